// Frames that reach the gateway while an ATTACH of their channel is still being worked on, sent in
// one TCP write as a hostile client would (README: The realtime interface, "a connection's frames
// take effect in their order"): an AUTH that narrows the capability (REALTIME-PROTOCOL.md §4,
// §7.3: the attachment must not be granted by the token the connection no longer has), and a
// PRESENCE then a DETACH or a CLOSE (either makes the member the PRESENCE entered leave).
import { describe, expect, it } from 'vitest';
import { Actions, RawClient, type Pm } from '../helpers/raw-realtime.js';
import { uniqueChannel } from '../helpers/service.js';
import { rawRealtimeService } from '../helpers/raw-realtime-service.js';

const svc = rawRealtimeService();
const token = (capability: Record<string, string[]>): Promise<string> => svc.token(capability, 'racer');
const { connect, presentOn, auth } = svc;

/** Frames sent in one write (the gateway reads them in one go: the second is handled while the first waits). */
function sendTogether(c: RawClient, pms: unknown[]): void {
  const socket = (c.ws as unknown as { _socket: { cork(): void; uncork(): void } })._socket;
  socket.cork();
  for (const pm of pms) c.send(pm);
  socket.uncork();
}

describe('an ATTACH racing an AUTH that narrows the capability', () => {
  it('the channel the new token allows nothing on fails with 40160 and receives nothing, though its ATTACH began under the old token', async () => {
    const [lost, kept] = [uniqueChannel('race-lost'), uniqueChannel('race-kept')];
    // The channel's partition and the log's position in it, from an attach of the channel.
    const observer = await connect({ key: svc.ts.key });
    const observed = await observer.attach(lost);
    expect(observed.action).toBe(Actions.ATTACHED);
    const [partition, offset] = String(observed.channelSerial).split(':');

    const racer = await connect({ access_token: await token({ 'race-*': ['subscribe', 'publish', 'presence'] }) });
    const narrowed = await token({ [kept]: ['subscribe'] });
    // An ATTACH with a position ahead of this instance's delivery waits for the log's end (a resume
    // from an instance further on); the AUTH is handled meanwhile.
    const renewed = racer.next((pm) => pm.action === Actions.CONNECTED, 10_000, false);
    const answered = racer.next((pm) => (pm.action === Actions.ERROR || pm.action === Actions.ATTACHED) && pm.channel === lost && pm.error !== undefined && (pm.error as { code: number }).code !== 90003, 10_000, false);
    sendTogether(racer, [
      { action: Actions.ATTACH, channel: lost, channelSerial: `${partition}:${Number(offset) + 1_000_000}` },
      { action: Actions.AUTH, auth: { accessToken: narrowed } },
    ]);
    await renewed;
    const refusal: Pm = await answered;
    expect(refusal).toMatchObject({ action: Actions.ERROR, channel: lost, error: { code: 40160 } });

    // A message on the channel reaches the observer; the racer, asked after it, got none.
    const res = await fetch(`http://127.0.0.1:${svc.port}/channels/${lost}/messages`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'after', data: 'the narrowing' }),
    });
    expect(res.status).toBe(201);
    await observer.next((pm) => pm.action === Actions.MESSAGE && pm.channel === lost);
    await racer.ping();
    expect(racer.frames.filter((pm) => pm.action === Actions.MESSAGE && pm.channel === lost)).toEqual([]);
    // The connection goes on under the new token.
    expect((await racer.attach(kept)).action).toBe(Actions.ATTACHED);
  });
});

/** The channel's presence history, oldest first, once it holds `n` events (or 10 s passed). */
async function presenceHistory(channel: string, n: number): Promise<[number, string][]> {
  const read = async (): Promise<{ action: number; clientId: string }[]> =>
    (await (await fetch(`http://127.0.0.1:${svc.port}/channels/${channel}/presence/history?direction=forwards`, { headers: auth() })).json()) as { action: number; clientId: string }[];
  const deadline = Date.now() + 10_000;
  let events = await read();
  while (events.length < n && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    events = await read();
  }
  return events.map((e) => [e.action, e.clientId]);
}


describe('a PRESENCE that waits for its ATTACH, then a DETACH or a CLOSE', () => {
  it('the member entered leaves with the DETACH that followed it: ATTACH, ENTER, DETACH in one write leave nobody present', async () => {
    const channel = uniqueChannel('race-detach');
    const client = await connect({ key: svc.ts.key, clientId: 'leaver' });
    const detached = client.next((pm) => pm.action === Actions.DETACHED && pm.channel === channel, 10_000, false);
    const msgSerial = client.nextSerial();
    const answer = client.ackOf(msgSerial);
    sendTogether(client, [
      { action: Actions.ATTACH, channel },
      { action: Actions.PRESENCE, channel, msgSerial, presence: [{ action: 2, data: 'here' }] },
      { action: Actions.DETACH, channel },
    ]);
    expect((await answer).action).toBe(Actions.ACK);
    await detached;
    // The enter and the leave are both in presence history, the leave last; nobody is present.
    expect(await presenceHistory(channel, 2)).toEqual([
      [2, 'leaver'],
      [3, 'leaver'],
    ]);
    expect(await presentOn(channel)).toEqual([]);
  });

  it('ATTACH, ENTER, CLOSE in one write leave nobody present: the enter does not outlive the connection', async () => {
    const [channel, marker] = [uniqueChannel('race-close'), uniqueChannel('race-close-marker')];
    const client = await connect({ key: svc.ts.key, clientId: 'closer' });
    const closed = client.next((pm) => pm.action === Actions.CLOSED, 10_000, false);
    sendTogether(client, [
      { action: Actions.ATTACH, channel },
      { action: Actions.PRESENCE, channel, msgSerial: client.nextSerial(), presence: [{ action: 2, data: 'here' }] },
      { action: Actions.CLOSE },
    ]);
    await closed;
    // A member entered after this on another channel, by another connection: once it is present,
    // an enter of the closed connection taking effect would have been applied before it.
    const other = await connect({ key: svc.ts.key, clientId: 'marker' });
    expect((await other.presence(marker, [{ action: 2 }])).action).toBe(Actions.ACK);
    expect(await presenceHistory(marker, 1)).toEqual([[2, 'marker']]);
    expect(await presentOn(channel)).toEqual([]);
  });
});

