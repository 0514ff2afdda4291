// Issue 26, items 2, 4 and 5 on the wire (REALTIME-PROTOCOL.md §4.1, §4.2, §9): the modes and
// params ATTACHED grants, what each mode lets through, the frames of a derived channel and the
// `[meta]occupancy` message, as a client that is not the SDK sees them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Flag } from '../../src/realtime/protocol.js';
import { Actions, RawClient, type Format } from '../helpers/raw-realtime.js';
import { listening, publishJson, removeDir, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';

let ts: TestService;
let port: number;
const clients: RawClient[] = [];

beforeAll(async () => {
  ts = await startTestService({ REALTIME_OCCUPANCY_INTERVAL_MS: '100' });
  port = await listening(ts);
});
afterAll(async () => {
  for (const c of clients) c.close();
  await ts?.close();
  if (ts) removeDir(ts.dataDir);
});

const connect = async (query: Record<string, string> = {}, format: Format = 'json'): Promise<RawClient> => {
  const c = await RawClient.connect(port, { key: ts.key, ...query }, format);
  clients.push(c);
  return c;
};
const MODES = Flag.PRESENCE | Flag.PUBLISH | Flag.SUBSCRIBE | Flag.PRESENCE_SUBSCRIBE;
const b64 = (s: string): string => Buffer.from(s).toString('base64');

describe.each(['json', 'msgpack'] as const)('channel modes and params on the wire (%s)', (format) => {
  it('ATTACHED grants the modes asked within the four served, and echoes the params granted', async () => {
    const c = await connect({}, format);
    const asked = await c.attach(uniqueChannel('wire-modes'), { flags: Flag.SUBSCRIBE | Flag.PRESENCE_SUBSCRIBE, params: { rewind: '1', occupancy: 'metrics' } });
    expect(asked.action).toBe(Actions.ATTACHED);
    expect(Number(asked.flags) & 0x3ff0000).toBe(Flag.SUBSCRIBE | Flag.PRESENCE_SUBSCRIBE);
    expect(asked.params).toEqual({ rewind: '1', occupancy: 'metrics' });
    const all = await c.attach(uniqueChannel('wire-modes-all'));
    expect(Number(all.flags) & 0x3ff0000).toBe(MODES);
    expect(all.params).toBeUndefined();
  });

  it('an unknown param, delta and a bad occupancy value are a channel ERROR (the attach fails), the connection goes on', async () => {
    const c = await connect({}, format);
    const unknown = await c.attach(uniqueChannel('wire-p1'), { params: { nope: '1' } });
    expect(unknown.action).toBe(Actions.ERROR);
    expect((unknown.error as { code: number }).code).toBe(40002);
    const delta = await c.attach(uniqueChannel('wire-p2'), { params: { delta: 'vcdiff' } });
    expect((delta.error as { code: number; message: string }).message).toMatch(/delta is not served/);
    const occupancy = await c.attach(uniqueChannel('wire-p3'), { params: { occupancy: 'metrics.everything' } });
    expect((occupancy.error as { code: number }).code).toBe(40003);
    await c.ping();
  });

  it('a filter whose cost the client would choose (a list of fields walked by to_string) is a channel ERROR 40010, the connection goes on', async () => {
    const c = await connect({}, format);
    const costly = b64(`length(to_string([${Array(100).fill('headers').join(',')}])) > \`0\``);
    const refused = await c.attach(`[filter=${costly}]${uniqueChannel('wire-costly')}`);
    expect(refused.action).toBe(Actions.ERROR);
    expect(refused.error as { code: number; message: string }).toMatchObject({ code: 40010, message: expect.stringMatching(/literals only/) });
    await c.ping();
  });

  it('without PRESENCE_SUBSCRIBE a connection gets its own members\' presence events only; without PUBLISH its MESSAGE is NACKed', async () => {
    const name = uniqueChannel('wire-presence');
    const c = await connect({ clientId: 'me' }, format);
    expect((await c.attach(name, { flags: Flag.SUBSCRIBE | Flag.PRESENCE })).action).toBe(Actions.ATTACHED);
    const other = await connect({ clientId: 'other' }, format);
    expect((await other.attach(name)).action).toBe(Actions.ATTACHED);
    expect((await other.presence(name, [{ action: 2, data: 'x' }])).action).toBe(Actions.ACK);
    expect((await c.presence(name, [{ action: 2, data: 'mine' }])).action).toBe(Actions.ACK);
    // The other's PRESENCE has both (it subscribes); then everything sent to `c` before it has reached it.
    await other.next((pm) => pm.action === Actions.PRESENCE && (pm.presence as { clientId: string }[]).some((p) => p.clientId === 'me'));
    await c.ping();
    const seen = c.frames.filter((f) => f.action === Actions.PRESENCE).flatMap((f) => (f.presence as { clientId: string }[]).map((p) => p.clientId));
    expect(seen).toEqual(['me']);
    const nack = await c.publish(name, [{ name: 'x' }]);
    expect(nack.action).toBe(Actions.NACK);
    expect((nack.error as { code: number; message: string }).message).toMatch(/without the publish mode/);
  });

  it('the presence capability alone grants PRESENCE, not PRESENCE_SUBSCRIBE: no SYNC of the members, no one else\'s events (GET presence needs subscribe too)', async () => {
    const made = await fetch(`http://127.0.0.1:${port}/apps`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ keys: [{}, { capability: '{"*":["presence"]}' }] }) });
    const [root, presenceOnly] = ((await made.json()) as { keys: { keyStr: string }[] }).keys.map((k) => k.keyStr);
    const name = uniqueChannel('wire-presence-cap');
    const member = await connect({ key: root, clientId: 'member' }, format);
    expect((await member.presence(name, [{ action: 2, data: 'x' }])).action).toBe(Actions.ACK);
    const c = await connect({ key: presenceOnly, clientId: 'enterer' }, format);
    const attached = await c.attach(name);
    expect(Number(attached.flags) & 0x3ff0000).toBe(Flag.PRESENCE);
    expect(Number(attached.flags) & Flag.HAS_PRESENCE).toBe(0);
    c.send({ action: Actions.SYNC, channel: name });
    expect((await c.presence(name, [{ action: 2, data: 'mine' }])).action).toBe(Actions.ACK);
    expect((await member.presence(name, [{ action: 4, data: 'y' }])).action).toBe(Actions.ACK);
    // The update's ACK follows its PRESENCE to the attachments here; the HEARTBEAT's answer, anything sent to `c` before it.
    await c.ping();
    expect(c.frames.filter((f) => f.action === Actions.SYNC)).toEqual([]);
    const seen = c.frames.filter((f) => f.action === Actions.PRESENCE).flatMap((f) => (f.presence as { clientId: string }[]).map((p) => p.clientId));
    expect(seen).toEqual(['enterer']);
  });

  it('a derived channel\'s frames carry its own name; its ATTACHED grants SUBSCRIBE only; PRESENCE on it is NACKed', async () => {
    const base = uniqueChannel('wire-derived');
    const name = `[filter=${b64("name == 'yes'")}]${base}`;
    const c = await connect({ clientId: 'd' }, format);
    const attached = await c.attach(name);
    expect(Number(attached.flags) & 0x3ff0000).toBe(Flag.SUBSCRIBE);
    const publisher = await connect({}, format);
    expect((await publisher.publish(base, [{ name: 'no' }, { name: 'yes', data: '1' }])).action).toBe(Actions.ACK);
    const frame = await c.next((pm) => pm.action === Actions.MESSAGE);
    expect(frame.channel).toBe(name);
    expect((frame.messages as { name: string }[]).map((m) => m.name)).toEqual(['yes']);
    expect((await c.presence(name, [{ action: 2 }])).action).toBe(Actions.NACK);
  });

  it('a [?params] name is its channel: its members come in SYNC under that name, again on a SYNC request, and its presence enters the channel', async () => {
    const base = uniqueChannel('wire-qualified');
    const name = `[?rewind=1]${base}`;
    const member = await connect({ clientId: 'present' }, format);
    expect((await member.presence(base, [{ action: 2, data: 'x' }])).action).toBe(Actions.ACK);
    const c = await connect({ clientId: 'q' }, format);
    const attached = await c.attach(name);
    expect(attached.params).toEqual({ rewind: '1' });
    const syncOf = (pm: { action: number; channel?: unknown; presence?: unknown }): boolean =>
      pm.action === Actions.SYNC && pm.channel === name && (pm.presence as { clientId: string }[]).some((p) => p.clientId === 'present');
    await c.next(syncOf);
    const again = c.next(syncOf, 10_000, false);
    c.send({ action: Actions.SYNC, channel: name });
    await again;
    expect((await c.presence(name, [{ action: 2, data: 'mine' }])).action).toBe(Actions.ACK);
    const members = ts.service.presence.query({ appId: ts.service.registry.all()[0].appId, channel: base, limit: 10 }).members.map((m) => m.clientId).sort();
    expect(members).toEqual(['present', 'q']);
  });

  it('a channel attached by two of its names counts once, and stays counted when one of them detaches', async () => {
    const base = uniqueChannel('wire-two-names');
    const appId = ts.service.registry.all()[0].appId;
    const connections = (): number => ts.service.channels.metrics(appId, base).connections;
    const c = await connect({}, format);
    expect((await c.attach(base)).action).toBe(Actions.ATTACHED);
    expect((await c.attach(`[?rewind=1]${base}`)).action).toBe(Actions.ATTACHED);
    const detached = c.next((pm) => pm.action === Actions.DETACHED, 10_000, false);
    c.send({ action: Actions.DETACH, channel: `[?rewind=1]${base}` });
    await detached;
    // Another connection's attach is appended after whatever the detach appended (same channel, same partition).
    const other = await connect({}, format);
    expect((await other.attach(base)).action).toBe(Actions.ATTACHED);
    const deadline = Date.now() + 10_000;
    while (connections() !== 2) {
      if (Date.now() > deadline) throw new Error(`connections on the channel: ${connections()}, not 2`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  });

  it('rewind by time sends at most 100 messages, the newest, as rewind by count does (the platform: "rewind returns at most 100 messages")', async () => {
    const name = uniqueChannel('wire-rewind-window');
    for (let i = 0; i < 6; i++) await publishJson(ts, name, Array.from({ length: 20 }, (_, j) => ({ name: `m${i * 20 + j}` })));
    const c = await connect({}, format);
    const attached = await c.attach(`[?rewind=2m]${name}`);
    expect(Number(attached.flags) & Flag.HAS_BACKLOG).toBe(Flag.HAS_BACKLOG);
    // The backlog goes out right after ATTACHED: the answer to a later HEARTBEAT comes after it.
    await c.ping();
    const names = c.frames.filter((f) => f.action === Actions.MESSAGE).flatMap((f) => (f.messages as { name: string }[]).map((m) => m.name));
    expect(names).toHaveLength(100);
    expect(names[0]).toBe('m20');
    expect(names[99]).toBe('m119');
  });

  it('[meta]occupancy is a MESSAGE on the attached name with data {metrics}', async () => {
    const name = uniqueChannel('wire-occupancy');
    const c = await connect({}, format);
    expect((await c.attach(`[?occupancy=metrics]${name}`)).action).toBe(Actions.ATTACHED);
    const frame = await c.next((pm) => pm.action === Actions.MESSAGE && (pm.messages as { data: { metrics: { connections: number } } }[])[0].data.metrics.connections === 1);
    expect(frame.channel).toBe(`[?occupancy=metrics]${name}`);
    const [message] = frame.messages as Record<string, unknown>[];
    expect(message.name).toBe('[meta]occupancy');
    expect(message.data).toEqual({ metrics: { connections: 1, publishers: 1, subscribers: 1, presenceConnections: 1, presenceMembers: 0, presenceSubscribers: 1 } });
    expect(typeof message.id).toBe('string');
    expect(typeof message.timestamp).toBe('number');
  });
});
