// Frames of features this service does not serve, which the SDK counts among the frames to ACK
// (REALTIME-PROTOCOL.md §3.2: MESSAGE, PRESENCE, OBJECT and ANNOTATION carry a msgSerial): an
// OBJECT (LiveObjects) or ANNOTATION frame, and a MESSAGE whose message asks for an update, a
// delete or an append (message `action` 1, 2, 5). Each is refused in its turn, a NACK 40030 of its
// own serial, and the connection goes on: the publish after it is ACKed with its own serial, and
// nothing reaches the channel. Before, an ANNOTATION or OBJECT was ignored: never answered (the SDK's
// annotations.publish() hung), and the next ACK covered its serial too; an update was published as
// a new message. Raw frames, JSON and MessagePack.
import { describe, expect, it } from 'vitest';
import { Actions, RawClient, type Format } from '../helpers/raw-realtime.js';
import { uniqueChannel } from '../helpers/service.js';
import { rawRealtimeService } from '../helpers/raw-realtime-service.js';

const svc = rawRealtimeService();
const OBJECT = 19;
const ANNOTATION = 21;

const history = async (channel: string): Promise<unknown[]> => {
  const res = await fetch(`http://127.0.0.1:${svc.port}/channels/${channel}/messages`, { headers: svc.auth() });
  expect(res.status).toBe(200);
  return ((await res.json()) as { name?: string }[]).map((m) => m.name);
};

describe.each<Format>(['json', 'msgpack'])('frames of features not served (%s)', (format) => {
  const connect = async (): Promise<RawClient> => RawClient.connect(svc.port, { key: svc.ts.key }, format);

  it.each([
    ['an ANNOTATION', { action: ANNOTATION, annotations: [{ action: 0, messageSerial: 'x', type: 'reaction:distinct.v1', name: '👍' }] }, /annotations/],
    ['an OBJECT', { action: OBJECT, state: [{ operation: { action: 0, objectId: 'root' } }] }, /LiveObjects/],
    ['a MESSAGE updating a message', { action: Actions.MESSAGE, messages: [{ name: 'edited', data: 'v2', action: 1, serial: 'x' }] }, /action 1 is not served/],
    ['a MESSAGE deleting a message', { action: Actions.MESSAGE, messages: [{ name: 'gone', action: 2, serial: 'x' }] }, /action 2 is not served/],
    ['a MESSAGE appending to a message', { action: Actions.MESSAGE, messages: [{ name: 'more', data: 'x', action: 5, serial: 'x' }] }, /action 5 is not served/],
  ])('%s is NACKed 40030 in its turn, the connection goes on, the channel gets nothing', async (_what, frame, message) => {
    const channel = uniqueChannel('unserved');
    const client = await connect();
    expect((await client.attach(channel)).action).toBe(Actions.ATTACHED);
    client.send({ ...frame, channel, msgSerial: 0 });
    client.send({ action: Actions.MESSAGE, channel, msgSerial: 1, messages: [{ name: 'after', data: 'ok', action: 0 }] });
    const nack = await client.next((pm) => pm.action === Actions.NACK);
    expect(nack).toMatchObject({ msgSerial: 0, count: 1, error: { code: 40030, statusCode: 400 } });
    expect((nack.error as { message: string }).message).toMatch(message);
    const ack = await client.next((pm) => pm.action === Actions.ACK);
    expect(ack).toMatchObject({ msgSerial: 1, count: 1 });
    await client.next((pm) => pm.action === Actions.MESSAGE && pm.channel === channel);
    expect(client.isClosed).toBe(false);
    expect(client.frames.filter((pm) => pm.action === Actions.ERROR)).toEqual([]);
    expect(await history(channel)).toEqual(['after']);
    client.close();
  });
});
