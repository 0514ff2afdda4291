// Continuity on re-attach is a short-lived guarantee (README: Resume), as the platform's: the SDK
// re-attaches with the channelSerial of the last message it received (RTL4c1), and the gateway
// replays what came after it from the log only when all of that came within connectionStateTtl
// (2 minutes) and the position is one of the channel's. Any other channelSerial, however a client
// made it, attaches without RESUMED and with 90003, nothing replayed: a forged position far back
// sent up to 10,000 messages (history the client may not read over REST) and read up to 1,000,000
// log records. Runs on the embedded adapters, and in production mode with TEST_SERVICE_MODE=production.
import { afterEach, describe, expect, it } from 'vitest';
import * as Ably from 'ably';
import { removeDir, startTestService, uniqueChannel, type TestService, listening } from '../helpers/service.js';
import { Topics } from '../../src/log/port.js';
import { channelKey, partitionFor } from '../../src/log/partitioner.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import type { MessagesPublished } from '../../src/domain/events.js';
import { Actions, RawClient, type Pm } from '../helpers/raw-realtime.js';

let ts: TestService | undefined;
let port = 0;
const opened: { close(): void }[] = [];

afterEach(async () => {
  for (const c of opened.splice(0)) c.close();
  await ts?.close();
  if (ts) removeDir(ts.dataDir);
  ts = undefined;
});

const RESUMED = 4;
const ATTACH_RESUME = 32;

const connect = async (): Promise<RawClient> => {
  const c = await RawClient.connect(port, { key: ts!.key });
  opened.push(c);
  return c;
};

const publish = async (channel: string, data: string): Promise<void> => {
  const res = await ts!.service.app.inject({ method: 'POST', url: `/channels/${channel}/messages`, headers: { authorization: ts!.auth, 'content-type': 'application/json' }, payload: { name: 'm', data } });
  expect(res.statusCode).toBe(201);
};

/** `count` publishes of `channel` appended as they were at `timestamp` (the log keeps the appender's timestamps); the first one's offset. */
const appendAt = async (channel: string, count: number, timestamp: number): Promise<number> => {
  const appId = ts!.key.split('.')[0];
  const records = Array.from({ length: count }, (_, i) => {
    const event: MessagesPublished = { type: 'messages.published', appId, channel, transport: 'rest', messages: [{ id: `${channel}-${timestamp}-${i}`, name: 'm', data: `old-${i}`, timestamp }] };
    return { key: channelKey(appId, channel), value: encodeEvent(event), timestamp };
  });
  return (await ts!.service.log.append(Topics.messages, records))[0].offset;
};

const dataOf = (c: RawClient, channel: string): unknown[] =>
  c.frames.filter((pm) => pm.action === Actions.MESSAGE && pm.channel === channel).flatMap((pm) => (pm.messages as { data: unknown }[]).map((m) => m.data));

/** The message `data` on `channel` reaches `c` (a publish after the ATTACHED: whatever a replay sent came before it). */
const received = (c: RawClient, channel: string, data: string): Promise<Pm> =>
  c.next((pm) => pm.action === Actions.MESSAGE && pm.channel === channel && (pm.messages as { data: unknown }[]).some((m) => m.data === data));

/** Counts the service log's reads of the messages topic (what a replay reads). */
function countReads(): { records: number } {
  const log = ts!.service.log;
  const read = log.read.bind(log);
  const counted = { records: 0 };
  log.read = async (topic, partition, from, max) => {
    const records = await read(topic, partition, from, max);
    if (topic === Topics.messages) counted.records += records.length;
    return records;
  };
  return counted;
}

const expectLost = (attached: Pm): void => {
  expect(attached.action).toBe(Actions.ATTACHED);
  expect(Number(attached.flags) & RESUMED).toBe(0);
  expect(attached.error).toMatchObject({ code: 90003, statusCode: 404 });
};

describe('a channelSerial is resumed from only within the continuity window (connectionStateTtl)', () => {
  it('one whose missed records are older than the window (a position forged far back) attaches without RESUMED, 90003, nothing replayed; one within it gets exactly what it missed', { timeout: 60_000 }, async () => {
    ts = await startTestService();
    port = await listening(ts);
    const channel = uniqueChannel('resume-window');
    const probe = await connect();
    const [partition] = String((await probe.attach(channel)).channelSerial).split(':').map(Number);

    // 20 publishes of the channel ten minutes ago: a position before them is older than the window.
    const start = await appendAt(channel, 20, Date.now() - 600_000);
    // Delivered here (the probe has them): the position is behind this instance's delivery, which
    // replays, not ahead of it (a resume from an instance further on, which live delivery serves).
    await received(probe, channel, 'old-19');
    const reads = countReads();
    const forger = await connect();
    const reply = await forger.attach(channel, { channelSerial: `${partition}:${start}`, flags: ATTACH_RESUME });
    expectLost(reply);
    // Read one batch to learn the position's age, then nothing more.
    expect(reads.records).toBeLessThanOrEqual(1000);
    // The channelSerial is the channel's position now, which the SDK takes (no loop of re-attaches).
    const [, now] = String(reply.channelSerial).split(':').map(Number);
    expect(now).toBeGreaterThanOrEqual(start + 20);
    await publish(channel, 'live');
    const live = await received(forger, channel, 'live');
    expect(dataOf(forger, channel)).toEqual(['live']);
    // The channel stays attached: the SDK treats ATTACHED with an error as attached, with a reason.
    expect(forger.frames.some((pm) => pm.channel === channel && (pm.action === Actions.ERROR || pm.action === Actions.DETACHED))).toBe(false);

    // Within the window: a client whose position is the last message it had resumes, RESUMED, and
    // gets what it missed, each once, then what comes live.
    await publish(channel, 'a');
    await publish(channel, 'b');
    const resumer = await connect();
    const resumed = await resumer.attach(channel, { channelSerial: String(live.channelSerial), flags: ATTACH_RESUME });
    expect(Number(resumed.flags) & RESUMED).toBe(RESUMED);
    expect(resumed.error).toBeUndefined();
    await publish(channel, 'c');
    await received(resumer, channel, 'c');
    expect(dataOf(resumer, channel)).toEqual(['a', 'b', 'c']);
  });

  it('one on a channel quiet for longer than the window, in a partition that was not, is RESUMED with nothing to replay, reading nothing', { timeout: 60_000 }, async () => {
    ts = await startTestService();
    port = await listening(ts);
    const appId = ts.key.split('.')[0];
    const channel = uniqueChannel('resume-quiet');
    const partitions = await ts.service.log.partitions(Topics.messages);
    const partition = partitionFor(channelKey(appId, channel), partitions);
    let other = uniqueChannel('resume-busy');
    while (partitionFor(channelKey(appId, other), partitions) !== partition) other = uniqueChannel('resume-busy');
    const probe = await connect();
    await probe.attach(channel);
    await probe.attach(other);
    // The channel's last message ten minutes ago, which the client had; then the partition's other
    // channel, ten minutes ago too: the first record after the client's position is older than the window.
    const last = await appendAt(channel, 1, Date.now() - 600_000);
    const serial = String((await received(probe, channel, 'old-0')).channelSerial);
    expect(serial).toBe(`${partition}:${last + 1}`);
    // The channel's `channel.used` (appended every 6 s while it is attached) is no publish.
    const used = encodeEvent({ type: 'channel.used', appId, channel });
    await ts.service.log.append(Topics.messages, [{ key: channelKey(appId, channel), value: used, timestamp: Date.now() - 600_000 }]);
    await appendAt(other, 50, Date.now() - 600_000);
    await received(probe, other, 'old-49');
    const reads = countReads();
    const resumer = await connect();
    const resumed = await resumer.attach(channel, { channelSerial: serial, flags: ATTACH_RESUME });
    expect(Number(resumed.flags) & RESUMED).toBe(RESUMED);
    expect(resumed.error).toBeUndefined();
    expect(reads.records).toBe(0);
    await publish(channel, 'live');
    await received(resumer, channel, 'live');
    expect(dataOf(resumer, channel)).toEqual(['live']);
  });

  it('one this service never issued (unreadable, of another partition, past the log\'s end) attaches without RESUMED and 90003; the channel goes on live', { timeout: 60_000 }, async () => {
    ts = await startTestService();
    port = await listening(ts);
    const channel = uniqueChannel('resume-forged');
    const probe = await connect();
    const [partition, start] = String((await probe.attach(channel)).channelSerial).split(':').map(Number);
    await publish(channel, 'before');
    await received(probe, channel, 'before');
    const c = await connect();
    for (const [i, serial] of ['not-a-serial', `${partition + 1}:${start}`, `${partition}:${start + 1_000_000}`].entries()) {
      const reply = await c.attach(channel, { channelSerial: serial, flags: ATTACH_RESUME });
      expectLost(reply);
      await publish(channel, `live-${i}`);
      await received(c, channel, `live-${i}`);
    }
    expect(dataOf(c, channel)).toEqual(['live-0', 'live-1', 'live-2']);
  });

  it('ably-js takes such an ATTACHED as attached with reason 90003: the channel neither fails nor re-attaches, and goes on live', { timeout: 60_000 }, async () => {
    ts = await startTestService();
    port = await listening(ts);
    const channel = uniqueChannel('resume-sdk');
    // A recovery key whose channelSerial this service never issued (RTN16: the SDK attaches with it).
    const recover = JSON.stringify({ connectionKey: 'gone!nomac', msgSerial: 0, channelSerials: { [channel]: '0:999999999999' } });
    const client = new Ably.Realtime({ key: ts.key, endpoint: '127.0.0.1', port, tls: false, logLevel: 0, recover });
    opened.push(client);
    const ch = client.channels.get(channel);
    const changes: Ably.ChannelStateChange[] = [];
    ch.on((change) => void changes.push(change));
    const arrived: unknown[] = [];
    await ch.subscribe((m) => void arrived.push(m.data));
    await publish(channel, 'live');
    const end = Date.now() + 10_000;
    while (!arrived.includes('live') && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    expect(arrived).toEqual(['live']);
    expect(ch.state).toBe('attached');
    const attached = changes.filter((c) => c.current === 'attached');
    expect(attached).toHaveLength(1);
    expect(attached[0].resumed).toBe(false);
    expect(attached[0].reason?.code).toBe(90003);
    expect(changes.map((c) => c.current)).toEqual(['attaching', 'attached']);
  });

  it('one with more records after it than REALTIME_MAX_REPLAY_SCAN attaches without RESUMED and 90003, reading nothing', { timeout: 60_000 }, async () => {
    ts = await startTestService({ REALTIME_MAX_REPLAY_SCAN: '1000' });
    port = await listening(ts);
    const channel = uniqueChannel('resume-scan');
    const probe = await connect();
    const [partition, start] = String((await probe.attach(channel)).channelSerial).split(':').map(Number);
    // 1,200 records of the channel's partition, just now (within the window).
    await appendAt(channel, 1200, Date.now());
    await received(probe, channel, 'old-1199');
    const reads = countReads();
    const c = await connect();
    expectLost(await c.attach(channel, { channelSerial: `${partition}:${start}`, flags: ATTACH_RESUME }));
    expect(reads.records).toBe(0);
    expect(dataOf(c, channel)).toEqual([]);
  });
});
