// The apps topic's snapshot (projections/apps/apps-snapshot.ts): the registry's compacted events,
// applied over any configured apps, give what the whole topic gives over them; the revocations a
// snapshot holds answer as the ones applied.
import { describe, expect, it } from 'vitest';
import { decode, encode } from '@msgpack/msgpack';
import { AppRegistry, type AppEvent } from '../../projections/apps/app-registry.js';
import { RevocationRegistry, type RevocableToken } from '../../projections/revocations/revocation-registry.js';
import type { AppDefinition, KeyDefinition } from '../../src/domain/app.js';
import type { TokensRevoked } from '../../src/domain/events.js';
import { rng } from '../helpers/stats-log.js';

const APPS = ['a', 'b', 'c', 'd'];
const key = (appId: string, k: number, capability = '{"*":["*"]}'): KeyDefinition => ({ keyName: `${appId}.k${k}`, keySecret: `secret-${appId}-${k}`, capability });
const app = (appId: string, keys: number[], persisted = false): AppDefinition => ({
  appId,
  accountId: 'acct',
  keys: keys.map((k) => key(appId, k)),
  namespaces: persisted ? [{ id: 'p', persisted: true }] : [],
  source: 'file',
  createdAt: 1,
});

function randomEvent(random: () => number, i: number): AppEvent {
  const appId = APPS[Math.floor(random() * APPS.length)];
  const k = Math.floor(random() * 4);
  const r = random();
  if (r < 0.06) return { type: 'app.created', app: app(appId, [0, Math.floor(random() * 3)], random() < 0.5) };
  if (r < 0.1) return { type: 'app.deleted', appId };
  if (r < 0.35) return { type: 'key.created', appId, key: key(appId, k, `{"ch${i}":["publish"]}`) };
  if (r < 0.9) {
    const update: AppEvent = { type: 'key.updated', appId, keyName: `${appId}.k${k}`, modified: i };
    if (random() < 0.5) update.capability = `{"u${i}":["subscribe"]}`;
    if (random() < 0.3) update.name = `name ${i}`;
    if (random() < 0.2) update.revocableTokens = random() < 0.5;
    return update;
  }
  return { type: 'key.revoked', appId, keyName: `${appId}.k${k}`, modified: i };
}

/** The registry a start builds: the configured apps, then the events. */
function built(configured: AppDefinition[], events: AppEvent[]): AppRegistry {
  const registry = new AppRegistry();
  for (const a of configured) registry.put(a);
  for (const e of events) registry.evolve(e);
  return registry;
}

const stateOf = (registry: AppRegistry) => registry.all().sort((x, y) => x.appId.localeCompare(y.appId));

describe('apps snapshot: the registry\'s compacted events', () => {
  it('applied over any configured apps give what the whole topic gives over them (random topics and apps files)', () => {
    const random = rng(11);
    for (let round = 0; round < 300; round++) {
      const events = Array.from({ length: 1 + Math.floor(random() * 60) }, (_, i) => randomEvent(random, i));
      // The snapshot is taken with one apps file, the restart may have another.
      const before = APPS.filter(() => random() < 0.5).map((a) => app(a, [0, 1]));
      const after = APPS.filter(() => random() < 0.5).map((a) => app(a, [1, 2], random() < 0.5));
      const compacted = decode(encode(built(before, events).compacted(), { ignoreUndefined: true })) as AppEvent[];
      expect(compacted.length).toBeLessThanOrEqual(events.length);
      expect(stateOf(built(after, compacted))).toEqual(stateOf(built(after, events)));
      // Restored, it compacts to itself: a snapshot of a restored registry holds the same events.
      expect(built(after, compacted).compacted()).toEqual(compacted);
    }
  });

  it('holds a bounded number of events for a topic of many: an app\'s last app.created or app.deleted, then its keys\' changes with updates in a row merged', () => {
    const registry = new AppRegistry();
    registry.evolve({ type: 'app.created', app: app('a', [0]) });
    for (let i = 0; i < 10_000; i++) registry.evolve({ type: 'key.updated', appId: 'a', keyName: 'a.k0', modified: i, ...(i % 2 ? { name: `n${i}` } : { capability: `{"c${i}":["publish"]}` }) });
    for (let i = 0; i < 1000; i++) registry.evolve({ type: 'app.created', app: app('b', [i % 3]) });
    registry.evolve({ type: 'app.deleted', appId: 'c' });
    const compacted = registry.compacted();
    expect(compacted.map((e) => e.type)).toEqual(['app.created', 'key.updated', 'app.created', 'app.deleted']);
    expect(compacted[1]).toEqual({ type: 'key.updated', appId: 'a', keyName: 'a.k0', modified: 9999, name: 'n9999', capability: '{"c9998":["publish"]}' });
  });
});

describe('apps snapshot: token revocations', () => {
  it('restored from a snapshot, answer every token as the revocations applied do, and come to apply again', () => {
    const random = rng(5);
    const applied = new RevocationRegistry(3_600_000);
    const NOW = 1_000_000_000;
    for (let i = 0; i < 2000; i++) {
      const event: TokensRevoked = {
        type: 'tokens.revoked',
        appId: 'a',
        keyName: `a.k${i % 5}`,
        targets: [`clientId:c${Math.floor(random() * 40)}`, ...(random() < 0.3 ? [`revocationKey:r${Math.floor(random() * 10)}`] : [])],
        issuedBefore: NOW - Math.floor(random() * 1_000_000),
        appliesAt: NOW + Math.floor(random() * 60_000) - 30_000,
      };
      applied.evolve(event);
    }
    applied.takeApplied(NOW);
    const restored = new RevocationRegistry(3_600_000);
    restored.restore(decode(encode(applied.snapshot())) as ReturnType<RevocationRegistry['snapshot']>);
    expect(restored.held()).toBe(applied.held());
    expect(restored.held('a')).toBe(applied.held('a'));
    for (let i = 0; i < 3000; i++) {
      const token: RevocableToken = { keyName: `a.k${i % 6}`, method: 'token', issued: NOW - Math.floor(random() * 1_200_000), clientId: `c${i % 45}`, ...(i % 4 === 0 ? { revocationKey: `r${i % 12}` } : {}) };
      const at = NOW + Math.floor(random() * 80_000) - 40_000;
      expect(restored.isRevoked(token, at)).toBe(applied.isRevoked(token, at));
      expect(restored.isRevokedOrPending(token)).toBe(applied.isRevokedOrPending(token));
    }
    // As at a start that replays them: the connections they reach are looked at once.
    expect(restored.takeApplied(NOW)).toBe(true);
  });
});
