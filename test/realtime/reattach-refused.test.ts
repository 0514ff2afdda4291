// An ATTACH of a channel already attached that is refused (a param the service does not take, the
// occupancy param without the channel-metadata capability): the ERROR with the channel makes the
// SDK's channel `failed`, its presence cleared, with no retry (REALTIME-PROTOCOL.md §4.4, §4.6). The
// service must then hold no attachment of it either: no more messages, and the members leave, as
// on DETACH. Raw frames (the SDK's setOptions sends the same ATTACH).
import { describe, expect, it } from 'vitest';
import { Actions } from '../helpers/raw-realtime.js';
import { uniqueChannel } from '../helpers/service.js';
import { rawRealtimeService } from '../helpers/raw-realtime-service.js';

const svc = rawRealtimeService();
const token = (capability: Record<string, string[]>): Promise<string> => svc.token(capability, 'reattacher');
const { connect, presentOn, auth } = svc;

describe('a refused ATTACH of a channel already attached', () => {
  it.each([
    ['a param the service does not take', { params: { delta: 'vcdiff' } }, 40002],
    ['the occupancy param without the channel-metadata capability', { params: { occupancy: 'metrics' } }, 40160],
  ])('%s: ERROR, then no message reaches the channel and its members leave', async (_what, extra, code) => {
    const channel = uniqueChannel('reattach');
    const client = await connect({ access_token: await token({ 'reattach-*': ['subscribe', 'publish', 'presence'] }) });
    expect((await client.attach(channel)).action).toBe(Actions.ATTACHED);
    expect((await client.presence(channel, [{ action: 2, data: 'here' }])).action).toBe(Actions.ACK);
    expect(await presentOn(channel)).toEqual(['reattacher']);

    const observer = await connect({ key: svc.ts.key });
    expect((await observer.attach(channel)).action).toBe(Actions.ATTACHED);
    const leave = observer.next((pm) => pm.action === Actions.PRESENCE && (pm.presence as { action: number }[]).some((p) => p.action === 3), 10_000, false);
    const refused = await client.attach(channel, extra);
    expect(refused).toMatchObject({ action: Actions.ERROR, channel, error: { code } });
    await leave;
    expect(await presentOn(channel)).toEqual([]);

    const res = await fetch(`http://127.0.0.1:${svc.port}/channels/${channel}/messages`, { method: 'POST', headers: { ...auth(), 'content-type': 'application/json' }, body: JSON.stringify({ name: 'after', data: 'the refusal' }) });
    expect(res.status).toBe(201);
    await observer.next((pm) => pm.action === Actions.MESSAGE && pm.channel === channel);
    await client.ping();
    expect(client.frames.filter((pm) => pm.action === Actions.MESSAGE && pm.channel === channel)).toEqual([]);
  });
});
