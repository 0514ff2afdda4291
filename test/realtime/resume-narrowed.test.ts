// A connection resumed with credentials narrower than those it entered presence with (the SDK's
// path after a token expires: DISCONNECTED 40142, a new token from its authCallback, a resume; or a
// raw client resuming with another token): as an AUTH does (test/sdk/ably-realtime-auth-narrowing.test.ts),
// its members on channels the new capability allows no presence on leave. It could not leave them
// itself: a LEAVE needs the presence capability.
import { describe, expect, it } from 'vitest';
import { Actions, type RawClient } from '../helpers/raw-realtime.js';
import { uniqueChannel } from '../helpers/service.js';
import { rawRealtimeService } from '../helpers/raw-realtime-service.js';

const svc = rawRealtimeService();
const token = (capability: Record<string, string[]>): Promise<string> => svc.token(capability, 'resumer');
const { connect, presentOn } = svc;
const WIDE = { 'keep-*': ['*'], 'lose-*': ['*'] };
const NARROW = { 'keep-*': ['*'], 'lose-*': ['subscribe'] };

/** A connection with the wide token, a member on `keep-` and on `lose-` channels: its id and connectionKey. */
async function enteredOnBoth(): Promise<{ keep: string; lose: string; first: RawClient; connectionId: unknown; key: string }> {
  const id = uniqueChannel();
  const [keep, lose] = [`keep-${id}`, `lose-${id}`];
  const first = await connect({ access_token: await token(WIDE) });
  for (const channel of [keep, lose]) expect((await first.presence(channel, [{ action: 2, data: 'here' }])).action).toBe(Actions.ACK);
  const connected = first.frames.find((pm) => pm.action === Actions.CONNECTED)!;
  return { keep, lose, first, connectionId: connected.connectionId, key: (connected.connectionDetails as { connectionKey: string }).connectionKey };
}

/** Resumes `key` with the narrowed token, the same connection: the member on `lose` leaves (seen by an observer attached before), the one on `keep` stays. */
async function resumedNarrowed(narrowed: string, { keep, lose, connectionId, key }: { keep: string; lose: string; connectionId: unknown; key: string }): Promise<void> {
  const observer = await connect({ key: svc.ts.key });
  const leave = observer.next((pm) => pm.action === Actions.PRESENCE && pm.channel === lose && (pm.presence as { action: number }[]).some((p) => p.action === 3), 10_000, false);
  expect((await observer.attach(lose)).action).toBe(Actions.ATTACHED);
  const resumed = await connect({ access_token: narrowed, resume: key });
  const reconnected = resumed.frames.find((pm) => pm.action === Actions.CONNECTED)!;
  expect(reconnected.connectionId).toBe(connectionId);
  expect(reconnected.error).toBeUndefined();
  await leave;
  expect(await presentOn(lose)).toEqual([]);
  expect(await presentOn(keep)).toEqual(['resumer']);
}

describe('a resume with a narrower capability', () => {
  it('the members on channels it allows no presence on leave; the others stay, and the connection is the same', async () => {
    const entered = await enteredOnBoth();
    entered.first.close();
    await entered.first.closed;
    await resumedNarrowed(await token(NARROW), entered);
  });

  it('after a restart (the connection taken over by the instance it resumes on), the same: members where the new capability allows no presence leave', async () => {
    const entered = await enteredOnBoth();
    const narrowed = await token(NARROW);
    await svc.restart();
    expect(await presentOn(entered.lose)).toEqual(['resumer']);
    await resumedNarrowed(narrowed, entered);
  });
});
