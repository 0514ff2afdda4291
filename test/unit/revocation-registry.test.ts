// The token revocations projection (projections/revocations/): a revocation reaches a key's tokens
// of a target issued before issuedBefore, from appliesAt; applying events twice or in another
// order gives the same answers (every instance consumes them, and the one that appended one
// applies it first), and pruning changes no answer.
import { describe, expect, it } from 'vitest';
import { RevocationRegistry, type RevocableToken } from '../../projections/revocations/revocation-registry.js';
import type { TokensRevoked } from '../../src/domain/events.js';

const DAY = 24 * 3600_000;
const revoked = (targets: string[], issuedBefore: number, appliesAt = issuedBefore, keyName = 'app.k'): TokensRevoked => ({
  type: 'tokens.revoked',
  appId: 'app',
  keyName,
  targets,
  issuedBefore,
  appliesAt,
});
const token = (issued: number, more: Partial<RevocableToken> = {}): RevocableToken => ({ keyName: 'app.k', method: 'token', issued, clientId: 'bob', ...more });

describe('RevocationRegistry', () => {
  it('reaches the key\'s tokens of the target issued before issuedBefore, from appliesAt on', () => {
    const r = new RevocationRegistry(DAY);
    r.evolve(revoked(['clientId:bob'], 1000, 1500));
    expect(r.isRevoked(token(999), 1499)).toBe(false);
    expect(r.isRevoked(token(999), 1500)).toBe(true);
    expect(r.isRevokedOrPending(token(999))).toBe(true);
    expect(r.isRevoked(token(1000), 2000)).toBe(false); // issued at issuedBefore: not before it
    expect(r.isRevoked(token(999, { clientId: 'alice' }), 2000)).toBe(false);
    expect(r.isRevoked(token(999, { keyName: 'app.other' }), 2000)).toBe(false);
    expect(r.isRevoked(token(999, { method: 'basic' }), 2000)).toBe(false);
  });

  it('a revocationKey target reaches tokens with that revocation key, whatever their clientId', () => {
    const r = new RevocationRegistry(DAY);
    r.evolve(revoked(['revocationKey:group'], 1000));
    expect(r.isRevoked(token(10, { clientId: undefined, revocationKey: 'group' }), 1000)).toBe(true);
    expect(r.isRevoked(token(10, { revocationKey: 'other' }), 1000)).toBe(false);
  });

  it('a repeat changes nothing and takes no room; the order of events does not change an answer', () => {
    const events = [revoked(['clientId:bob'], 1000, 31_000), revoked(['clientId:bob', 'clientId:eve'], 2000), revoked(['clientId:bob'], 500)];
    const forwards = new RevocationRegistry(DAY);
    for (const e of events) forwards.evolve(e);
    expect(forwards.evolve(events[1])).toBe(false);
    expect(forwards.growth(events[1])).toBe(0);
    const backwards = new RevocationRegistry(DAY);
    for (const e of [...events].reverse()) backwards.evolve(e);
    for (const e of events) backwards.evolve(e);
    expect(backwards.held()).toBe(forwards.held());
    for (const issued of [0, 499, 500, 999, 1000, 1999, 2000]) {
      for (const now of [500, 1999, 2000, 30_999, 31_000]) {
        for (const clientId of ['bob', 'eve']) {
          expect(backwards.isRevoked(token(issued, { clientId }), now)).toBe(forwards.isRevoked(token(issued, { clientId }), now));
        }
      }
    }
    expect(forwards.isRevoked(token(1500), 2000)).toBe(true);
  });

  it('growth counts what an event would add, per app and in all', () => {
    const r = new RevocationRegistry(DAY);
    expect(r.growth(revoked(['clientId:a', 'clientId:b', 'clientId:a'], 10))).toBe(2);
    r.evolve(revoked(['clientId:a', 'clientId:b'], 10));
    expect([r.held(), r.held('app'), r.held('other')]).toEqual([2, 2, 0]);
    // One that reaches further and applies no later replaces it; one that applies later is held
    // beside it until both apply (prune then folds them into one).
    expect(r.growth(revoked(['clientId:a'], 20, 10))).toBe(0);
    expect(r.growth(revoked(['clientId:a'], 20))).toBe(1);
  });

  it('prune drops what no valid token can meet and folds applied revocations, changing no answer', () => {
    const r = new RevocationRegistry(DAY);
    r.evolve(revoked(['clientId:bob'], 1000, 31_000));
    r.evolve(revoked(['clientId:bob'], 2000, 32_000));
    r.evolve(revoked(['clientId:eve'], 5000));
    expect(r.held()).toBe(3);
    const now = 40_000;
    const before = [0, 999, 1500, 1999, 4999].map((i) => r.isRevoked(token(i), now));
    r.prune(now);
    expect(r.held()).toBe(2); // bob's two applied revocations fold into one
    expect([0, 999, 1500, 1999, 4999].map((i) => r.isRevoked(token(i), now))).toEqual(before);
    r.prune(5000 + DAY + 1); // every token issued before 5000 has expired by then
    expect(r.held()).toBe(0);
  });
});
