// Issue 22, item 2 ("messages missed in silence"): a subscriber receives every message of its
// attachment in order, or is told (the channel re-attaches without RESUMED, or an error), never
// neither. The SDK resumes a channel from the last channelSerial it processed on an ATTACHED,
// MESSAGE or PRESENCE (REALTIME-PROTOCOL.md §4.1), so no frame may carry a position past a
// message this client has not been sent before it.
import { afterEach, describe, expect, it } from 'vitest';
import { removeDir, startTestService, uniqueChannel, type TestService, listening } from '../helpers/service.js';
import { embeddedAdapters } from '../../src/service.js';
import { parseConfig } from '../../src/config.js';
import { DEFAULT_REALTIME_SETTINGS } from '../../src/realtime/settings.js';
import { Topics, type Log } from '../../src/log/port.js';
import { channelKey } from '../../src/log/partitioner.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import type { MessagesPublished } from '../../src/domain/events.js';
import { Actions, RawClient, closedWithin, type Pm } from '../helpers/raw-realtime.js';

let ts: TestService | undefined;
const opened: RawClient[] = [];

afterEach(async () => {
  for (const c of opened.splice(0)) c.close();
  await ts?.close();
  if (ts) removeDir(ts.dataDir);
  ts = undefined;
});

const RESUMED = 4;
const carriesPosition = (pm: Pm, channel: string): boolean =>
  pm.channel === channel && (pm.action === Actions.ATTACHED || pm.action === Actions.MESSAGE || pm.action === Actions.PRESENCE) && typeof pm.channelSerial === 'string' && pm.channelSerial !== '';

/**
 * A service whose log reads wait at a gate while one is set: a resume's backlog read then takes as
 * long as the test wants. `readStarted` resolves when a read first reaches a gate.
 */
async function serviceWithGatedReads(): Promise<{ service: TestService; setGate: (gate: Promise<void> | undefined) => void; readStarted: Promise<void> }> {
  let gate: Promise<void> | undefined;
  let reading!: () => void;
  const readStarted = new Promise<void>((resolve) => (reading = resolve));
  const gated = (log: Log): Log =>
    new Proxy(log, {
      get: (target, prop, receiver) =>
        prop === 'read'
          ? async (...args: Parameters<Log['read']>) => {
              if (gate) {
                reading();
                await gate;
              }
              return target.read(...args);
            }
          : Reflect.get(target, prop, receiver),
    });
  const service = await startTestService({}, {
    adapters: (dataDir) => {
      const adapters = embeddedAdapters(parseConfig({ DATA_DIR: dataDir, SANDBOX: '1', LOG_LEVEL: 'silent' }));
      return { ...adapters, log: gated(adapters.log) };
    },
  });
  return { service, setGate: (g) => (gate = g), readStarted };
}

describe('a subscriber receives every message of its attachment in order, or is told', () => {
  it('a resume whose deliveries are held while its backlog is read, and overflow (80020), goes on from before them', { timeout: 60_000 }, async () => {
    // The backlog read of a resume waits for the gate while the channel's messages arrive: the
    // gateway holds them for the attachment, more than it may (maxReplayRecords), and cuts the client off.
    const { service, setGate, readStarted } = await serviceWithGatedReads();
    ts = service;
    const port = await listening(ts);
    const appId = ts.key.split('.')[0];
    const channel = uniqueChannel();
    const connect = async (query: Record<string, string>): Promise<RawClient> => {
      const c = await RawClient.connect(port, { key: ts!.key, ...query });
      opened.push(c);
      return c;
    };

    const first = await connect({});
    const connectionKey = String((first.frames[0].connectionDetails as { connectionKey: string }).connectionKey);
    const attached = await first.attach(channel);
    let serial = String(attached.channelSerial);
    first.close(); // the network drops it

    // The channel moves on, so the resume below reads a backlog (one with nothing after the
    // client's position resumes without reading the log).
    const other = await ts.service.app.inject({ method: 'POST', url: `/channels/${channel}/messages`, headers: { authorization: ts.auth }, payload: { id: 'before-resume', data: 'x' } });
    expect(other.statusCode).toBe(201);

    let release!: () => void;
    setGate(new Promise<void>((resolve) => (release = resolve)));
    const second = await connect({ resume: connectionKey });
    second.send({ action: Actions.ATTACH, channel, channelSerial: serial, flags: 32 });
    await readStarted;
    const published = Array.from({ length: DEFAULT_REALTIME_SETTINGS.maxReplayRecords + 1 }, (_, i) => `m-${i}`);
    for (let i = 0; i < published.length; i += 1000) {
      const records = published.slice(i, i + 1000).map((id) => {
        const event: MessagesPublished = { type: 'messages.published', appId, channel, transport: 'rest', messages: [{ id, name: 'm', data: id, timestamp: Date.now() }] };
        return { key: channelKey(appId, channel), value: encodeEvent(event), timestamp: Date.now() };
      });
      await ts.service.log.append(Topics.messages, records);
    }
    setGate(undefined);
    release();
    const cutOff = await second.next((pm) => pm.action === Actions.DISCONNECTED);
    expect((cutOff.error as { code: number }).code).toBe(80020);
    await closedWithin(second, 5000);

    // As the SDK does: resume, and re-attach from the last position this channel's frames carried.
    serial = String(second.frames.filter((pm) => carriesPosition(pm, channel)).at(-1)?.channelSerial ?? serial);
    const third = await connect({ resume: connectionKey });
    const reattached = await third.attach(channel, { channelSerial: serial, flags: 32 });
    expect(reattached.action).toBe(Actions.ATTACHED);
    const told = [second, third].some((c) => c.frames.some((pm) => pm.action === Actions.ATTACHED && pm.channel === channel && !(Number(pm.flags) & RESUMED)));
    if (told) return;
    // Continuity claimed: every message, in order, across the two sockets.
    const received = (): string[] =>
      [second, third].flatMap((c) => c.frames.filter((pm) => pm.action === Actions.MESSAGE && pm.channel === channel).flatMap((pm) => (pm.messages as { id: string }[]).map((m) => m.id)));
    await third.next((pm) => pm.action === Actions.MESSAGE && (pm.messages as { id: string }[]).some((m) => m.id === published.at(-1)), 10_000).catch(() => undefined);
    expect(received()).toEqual(['before-resume', ...published]);
  });
  it('a resume whose backlog read is slow gets the backlog first, then the messages that came during the read: in log order', { timeout: 60_000 }, async () => {
    // Found by the three-instance kill test (test/faults/three-instances-kill9.test.ts): the
    // backlog was queued behind the deliveries held during its read, so newer messages came first.
    const { service, setGate, readStarted } = await serviceWithGatedReads();
    ts = service;
    const port = await listening(ts);
    const channel = uniqueChannel();
    const publish = async (data: string): Promise<void> => {
      const res = await ts!.service.app.inject({ method: 'POST', url: `/channels/${channel}/messages`, headers: { authorization: ts!.auth }, payload: { name: 'm', data } });
      expect(res.statusCode).toBe(201);
    };
    const deliveryLag = async (): Promise<number> => {
      const text = (await ts!.service.app.inject({ method: 'GET', url: '/metrics' })).body;
      return Number(/^cm_consumer_lag_records\{consumer="realtime-delivery"\} (\d+)/m.exec(text)?.[1] ?? -1);
    };

    const first = await RawClient.connect(port, { key: ts.key });
    opened.push(first);
    const connectionKey = String((first.frames[0].connectionDetails as { connectionKey: string }).connectionKey);
    const serial = String((await first.attach(channel)).channelSerial);
    first.close(); // the network drops it
    for (const data of ['old-0', 'old-1', 'old-2']) await publish(data);

    let release!: () => void;
    setGate(new Promise<void>((resolve) => (release = resolve)));
    const second = await RawClient.connect(port, { key: ts.key, resume: connectionKey });
    opened.push(second);
    second.send({ action: Actions.ATTACH, channel, channelSerial: serial, flags: 32 });
    await readStarted;
    setGate(undefined);
    for (const data of ['new-0', 'new-1', 'new-2']) await publish(data);
    // Delivered to the gateway (and held for the attachment) before the backlog read goes on.
    for (let i = 0; i < 100 && (await deliveryLag()) !== 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await deliveryLag()).toBe(0);
    release();
    const received = (): string[] => second.frames.filter((pm) => pm.action === Actions.MESSAGE && pm.channel === channel).flatMap((pm) => (pm.messages as { data: string }[]).map((m) => m.data));
    await second.next((pm) => pm.action === Actions.MESSAGE && received().length === 6, 10_000).catch(() => undefined);
    const attachedAgain = second.frames.find((pm) => pm.action === Actions.ATTACHED && pm.channel === channel);
    expect(Number(attachedAgain?.flags) & RESUMED).toBe(RESUMED);
    expect(received()).toEqual(['old-0', 'old-1', 'old-2', 'new-0', 'new-1', 'new-2']);
  });
});
