// Issue 11 with issue 10's rule: no frame of one connection can fail another's publishes. A
// hostile connection sends its frames in the same moment as 40 good publishes from four other
// connections (JSON and MessagePack), so that they share the log's group commits; every good
// publish must be ACKed and in history, and the hostile frames get their own NACK or ERROR (4xx).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encode as encodeMsgpack } from '@msgpack/msgpack';
import { removeDir, startTestService, uniqueChannel, type TestService, listening } from '../helpers/service.js';
import { Actions, nested, RawClient, sleep, type Format, type Pm } from '../helpers/raw-realtime.js';

let ts: TestService;
let port: number;
let good: RawClient[];
const hostiles: RawClient[] = [];

beforeAll(async () => {
  ts = await startTestService({ REALTIME_MAX_INBOUND_RATE: '10000', REALTIME_MAX_MEMBERS_PER_CONNECTION: '1000' });
  port = await listening(ts);
  good = await Promise.all((['json', 'json', 'msgpack', 'msgpack'] as Format[]).map((f, i) => RawClient.connect(port, { key: ts.key, clientId: `good-${i}` }, f)));
});

afterAll(async () => {
  for (const c of [...(good ?? []), ...hostiles]) c.close();
  await ts?.close();
  if (ts) removeDir(ts.dataDir);
});

/**
 * One hostile input: how it is sent, and what the hostile connection must get for it: the code of
 * its NACKs (or of the ERROR that ends it), `1009` for a socket closed as too big, `null` for none.
 */
interface Hostile {
  name: string;
  send: (c: RawClient, channel: string) => void;
  refusal: number | null;
  /** The hostile connection's clientId (none: a key that may act for any clientId). */
  clientId?: string;
  only?: Format;
}

const message = (channel: string, msgSerial: number, messages: unknown[]): unknown => ({ action: Actions.MESSAGE, channel, msgSerial, messages });
const presence = (channel: string, msgSerial: number, items: unknown[]): unknown => ({ action: Actions.PRESENCE, channel, msgSerial, presence: items });

/** A MESSAGE whose one message is {data: <a msgpack timestamp extension>}, which decodes to a Date. */
function msgpackDateMessage(channel: string, msgSerial: number): Buffer {
  const whole = Buffer.from(encodeMsgpack({ action: Actions.MESSAGE, channel, msgSerial, messages: [{ name: 'date' }] }));
  const inner = Buffer.from(encodeMsgpack({ name: 'date' }));
  const date = Buffer.from([0xd6, 0xff, 0x5f, 0x00, 0x00, 0x00]);
  return Buffer.concat([whole.subarray(0, whole.length - inner.length), Buffer.from([0x81, 0xa4]), Buffer.from('data'), date]);
}

const HOSTILE: Hostile[] = [
  { name: 'data nested 100 levels', refusal: 40013, send: (c, ch) => c.send(message(ch, c.nextSerial(), [{ name: 'deep', data: nested(100) }])) },
  {
    name: 'data nested 10,000 levels',
    refusal: 40013,
    only: 'json',
    send: (c, ch) => c.sendRaw(`{"action":15,"channel":"${ch}","msgSerial":${c.nextSerial()},"messages":[{"data":${'['.repeat(10_000)}${']'.repeat(10_000)}}]}`),
  },
  { name: 'extras nested 64 levels', refusal: 40032, send: (c, ch) => c.send(message(ch, c.nextSerial(), [{ data: 'x', extras: { push: nested(64) } }])) },
  { name: 'data that is not base64 with encoding base64', refusal: 40013, send: (c, ch) => c.send(message(ch, c.nextSerial(), [{ data: '%%% not base64 %%%', encoding: 'base64' }])) },
  { name: 'data that is not JSON with encoding json', refusal: 40013, send: (c, ch) => c.send(message(ch, c.nextSerial(), [{ data: '{"a":', encoding: 'json' }])) },
  { name: 'a malformed encoding chain', refusal: 40013, send: (c, ch) => c.send(message(ch, c.nextSerial(), [{ data: 'x', encoding: 'utf-8//base64' }])) },
  { name: 'an encoding that is not a string', refusal: 40013, send: (c, ch) => c.send(message(ch, c.nextSerial(), [{ data: 'x', encoding: { no: 1 } }])) },
  { name: 'data of a type messages cannot hold', refusal: 40013, send: (c, ch) => c.send(message(ch, c.nextSerial(), [{ data: 42 }, { data: true }])) },
  { name: 'a msgpack Date as data', refusal: 40013, only: 'msgpack', send: (c, ch) => c.sendRaw(msgpackDateMessage(ch, c.nextSerial()), true) },
  { name: 'a batch of 1,001 messages', refusal: 40034, send: (c, ch) => c.send(message(ch, c.nextSerial(), Array.from({ length: 1001 }, (_, i) => ({ data: `b${i}` })))) },
  { name: 'a batch of 600 KB (over MAX_PUBLISH_BYTES)', refusal: 40009, send: (c, ch) => c.send(message(ch, c.nextSerial(), Array.from({ length: 10 }, () => ({ data: 'z'.repeat(60_000) })))) },
  { name: 'a message over MAX_MESSAGE_SIZE', refusal: 40009, send: (c, ch) => c.send(message(ch, c.nextSerial(), [{ data: 'z'.repeat(70_000) }])) },
  { name: 'an empty messages array', refusal: 40001, send: (c, ch) => c.send(message(ch, c.nextSerial(), [])) },
  { name: 'messages that are not objects', refusal: 40001, send: (c, ch) => c.send(message(ch, c.nextSerial(), [null, 1, 'x', [[]]])) },
  { name: 'an id over 256 characters', refusal: 40031, send: (c, ch) => c.send(message(ch, c.nextSerial(), [{ id: 'i'.repeat(300), data: 'x' }])) },
  { name: "a clientId that is not the connection's", refusal: 40012, clientId: 'hostile', send: (c, ch) => c.send(message(ch, c.nextSerial(), [{ clientId: 'someone-else', data: 'x' }])) },
  { name: 'a name that is not a string', refusal: 40016, send: (c, ch) => c.send(message(ch, c.nextSerial(), [{ name: { n: 1 }, data: 'x' }])) },
  { name: 'an empty channel name', refusal: 40010, send: (c) => c.send(message('', c.nextSerial(), [{ data: 'x' }])) },
  { name: 'a metachannel', refusal: 40160, send: (c) => c.send(message('[meta]log', c.nextSerial(), [{ data: 'x' }])) },
  { name: 'presence with clientId "*"', refusal: 40012, send: (c, ch) => c.send(presence(ch, c.nextSerial(), [{ action: 2, clientId: '*' }])) },
  { name: 'presence with a numeric clientId', refusal: 40012, send: (c, ch) => c.send(presence(ch, c.nextSerial(), [{ action: 2, clientId: 42 }])) },
  { name: 'presence with an empty clientId', refusal: 40012, send: (c, ch) => c.send(presence(ch, c.nextSerial(), [{ action: 2, clientId: '' }])) },
  { name: "presence for a clientId that is not the connection's", refusal: 40012, clientId: 'hostile', send: (c, ch) => c.send(presence(ch, c.nextSerial(), [{ action: 2, clientId: 'victim' }])) },
  { name: 'presence without a clientId on an anonymous connection', refusal: 91000, send: (c, ch) => c.send(presence(ch, c.nextSerial(), [{ action: 2 }])) },
  { name: 'presence with a clientId of 100 KB', refusal: 40009, send: (c, ch) => c.send(presence(ch, c.nextSerial(), [{ action: 2, clientId: 'c'.repeat(100_000) }])) },
  { name: 'presence with data nested 100 levels', refusal: 40013, send: (c, ch) => c.send(presence(ch, c.nextSerial(), [{ action: 2, clientId: 'h', data: nested(100) }])) },
  { name: 'presence with an unknown action', refusal: 40001, send: (c, ch) => c.send(presence(ch, c.nextSerial(), [{ action: 9, clientId: 'h' }])) },
  { name: 'presence with "__proto__" for its action', refusal: 40001, send: (c, ch) => c.send(presence(ch, c.nextSerial(), [{ action: '__proto__', clientId: 'h' }])) },
  { name: 'presence with "constructor" for its action', refusal: 40001, send: (c, ch) => c.send(presence(ch, c.nextSerial(), [{ action: 'constructor', clientId: 'h' }])) },
  { name: 'presence with an object that cannot be a string for its action', refusal: 40001, send: (c, ch) => c.send(presence(ch, c.nextSerial(), [{ action: { toString: null, valueOf: 'x' }, clientId: 'h' }])) },
  { name: 'presence of 1,001 changes, more than a connection may hold members (REALTIME_MAX_MEMBERS_PER_CONNECTION 1,000 here)', refusal: 40034, send: (c, ch) => c.send(presence(ch, c.nextSerial(), Array.from({ length: 1001 }, (_, i) => ({ action: 2, clientId: `m${i}` })))) },
  { name: 'a frame that is not MessagePack', refusal: 80013, only: 'msgpack', send: (c) => c.sendRaw(Buffer.from([0xc1, 0xc1, 0xc1]), true) },
  { name: 'a frame that is not JSON', refusal: 80013, only: 'json', send: (c) => c.sendRaw('{"action":15,"messages":[', false) },
  { name: 'a frame over the frame limit', refusal: 1009, send: (c, ch) => c.send(message(ch, c.nextSerial(), [{ data: 'f'.repeat(1_100_000) }])) },
  { name: 'a HEARTBEAT with an id that cannot be a string', refusal: null, only: 'json', send: (c) => c.sendRaw('{"action":0,"id":{"toString":1}}') },
];

describe.each(['json', 'msgpack'] as const)('a hostile connection (%s) cannot fail the publishes batched with its frames (issue 10, issue 11)', (format) => {
  const cases = HOSTILE.filter((h) => h.only === undefined || h.only === format).map((h) => [h.name, h] as const);
  it.each(cases)('%s: the 40 good publishes sent with it are all ACKed', async (_name, hostile) => {
    const hostileClient = await RawClient.connect(port, { key: ts.key, clientId: hostile.clientId }, format);
    hostiles.push(hostileClient);
    const channel = uniqueChannel('iso');
    const answers: Promise<Pm>[] = [];
    // Good publishes and hostile frames interleaved in one turn of the loop: the service reads them
    // in the same moment, and appends them in the same group commits.
    for (let round = 0; round < 10; round++) {
      for (const [i, c] of good.entries()) answers.push(c.publish(channel, [{ name: `good-${i}-${round}`, data: format === 'json' ? `d${round}` : Buffer.from([i, round]) }]));
      if (round % 3 === 0) hostile.send(hostileClient, channel);
    }
    const results = await Promise.all(answers);
    const refused = results.filter((r) => r.action !== Actions.ACK);
    expect(refused, JSON.stringify(refused).slice(0, 500)).toEqual([]);
    const res = await ts.service.app.inject({ method: 'GET', url: `/channels/${channel}/messages?limit=1000`, headers: { authorization: ts.auth } });
    const names = (res.json() as { name?: string }[]).map((m) => m.name);
    expect(names.filter((n) => n?.startsWith('good-'))).toHaveLength(40);
    expect(names).toHaveLength(40);

    // The hostile connection got its own refusals, in the error shape, 4xx.
    await sleep(100);
    const refusals = hostileClient.frames.filter((f) => f.action === Actions.NACK || f.action === Actions.ERROR || f.action === Actions.DISCONNECTED);
    for (const f of refusals) {
      const e = f.error as { code: unknown; statusCode: unknown; message: unknown };
      expect(typeof e.message).toBe('string');
      expect(e.code).toBe(hostile.refusal);
      expect(e.statusCode).toBeGreaterThanOrEqual(400);
      expect(e.statusCode).toBeLessThan(500);
    }
    if (hostile.refusal === 1009) expect((await hostileClient.closed).code).toBe(1009);
    else if (hostile.refusal === 80013) expect(refusals.map((f) => f.action)).toEqual([Actions.ERROR]);
    else if (hostile.refusal === null) expect(refusals).toEqual([]);
    else expect(refusals.map((f) => f.action)).toEqual([Actions.NACK, Actions.NACK, Actions.NACK, Actions.NACK]);
    expect(hostileClient.undecodable).toEqual([]);
    for (const c of good) expect(c.isClosed).toBe(false);
  });
});
