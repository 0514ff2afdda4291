// Issue 22, item 7: attach and detach churn. Every ATTACH and DETACH appended a channel.attached or
// channel.detached record (85,000 attaches in 40 s: DATA_DIR 0.2 to 54.6 MB, and a restart 3.6
// to 9.1 s, since every start reads the whole connections topic). What one connection's churn
// appends is now bounded by REALTIME_ATTACHMENT_EVENTS_RATE (README: Resource limits), and the
// occupancy is exact once the attachments held back are appended.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Topics } from '../../src/log/port.js';
import { Actions, RawClient, sleep } from '../helpers/raw-realtime.js';
import { listening, removeDir, serialAhead, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';

const RATE = 10;
const CHANNELS_PER_CONNECTION = 5; // a burst of twice this: 10 attaches
const CYCLES = 1_000;
let ts: TestService;
let port: number;
const clients: RawClient[] = [];

beforeAll(async () => {
  ts = await startTestService({
    REALTIME_ATTACHMENT_EVENTS_RATE: String(RATE),
    REALTIME_MAX_CHANNELS_PER_CONNECTION: String(CHANNELS_PER_CONNECTION),
    // Frames are not what is limited here: the churn runs as fast as the gateway answers.
    REALTIME_MAX_INBOUND_RATE: '1000000',
  });
  port = await listening(ts);
});
afterAll(async () => {
  for (const c of clients) c.close();
  await ts?.close();
  if (ts) removeDir(ts.dataDir);
});

const appended = async (): Promise<number> => [...(await ts.service.log.endOffsets(Topics.connections)).values()].reduce((a, b) => a + b, 0);
const connectionsOn = (channel: string): number => ts.service.channels.metrics(ts.service.registry.all()[0].appId, channel).connections;
const until = async (what: string, check: () => boolean, ms = 10_000): Promise<void> => {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await sleep(20);
  }
};
const detach = async (c: RawClient, channel: string): Promise<void> => {
  const answer = c.next((pm) => pm.action === Actions.DETACHED && pm.channel === channel, 10_000, false);
  c.send({ action: Actions.DETACH, channel });
  await answer;
};

it(`${CYCLES} attach and detach cycles of one connection append a bounded number of records; the occupancy ends exact`, async () => {
  const c = await RawClient.connect(port, { key: ts.key });
  clients.push(c);
  const names = [0, 1, 2].map((i) => uniqueChannel(`churn-${i}`));
  await sleep(300);
  const before = await appended();
  const started = Date.now();
  for (let i = 0; i < CYCLES; i++) {
    const channel = names[i % names.length];
    expect((await c.attach(channel)).action).toBe(Actions.ATTACHED);
    await detach(c, channel);
  }
  // The last attachments stay: held back or not, they reach the log.
  for (const channel of names) expect((await c.attach(channel)).action).toBe(Actions.ATTACHED);
  const seconds = (Date.now() - started) / 1000;
  await until('each channel with its one connection', () => names.every((n) => connectionsOn(n) === 1));
  const records = (await appended()) - before;
  // Each appended attach may be followed by one detach: at most twice the bucket's tokens
  // (before: 2,003 records, one per ATTACH and DETACH).
  const bound = 2 * (2 * CHANNELS_PER_CONNECTION + RATE * (seconds + 1));
  console.log(`${CYCLES} cycles in ${seconds.toFixed(1)} s: ${records} records appended (bound ${Math.round(bound)})`);
  expect(records).toBeLessThanOrEqual(bound);
  expect(records).toBeLessThan(CYCLES / 2);

  // A detach is appended at once; another connection's attach is not held back by this one's churn.
  await detach(c, names[0]);
  const other = await RawClient.connect(port, { key: ts.key });
  clients.push(other);
  expect((await other.attach(names[1])).action).toBe(Actions.ATTACHED);
  await until('the detach and the other connection attached', () => connectionsOn(names[0]) === 0 && connectionsOn(names[1]) === 2, 2_000);
});

it('an ATTACH with a position ahead of delivery and a CLOSE right behind it leaves no attachment behind (it stayed in delivery and in the occupancy for good)', async () => {
  const before = ts.service.gateway.metrics().attachments;
  const gone = uniqueChannel('attach-close');
  const c = await RawClient.connect(port, { key: ts.key });
  // The CLOSE is read while the ATTACH waits for the log's end offsets.
  c.send({ action: Actions.ATTACH, channel: gone, channelSerial: await serialAhead(ts, gone) });
  c.send({ action: Actions.CLOSE });
  await c.closed;
  // Another ATTACH of the same kind answered: the first one's wait is over too.
  const other = await RawClient.connect(port, { key: ts.key });
  clients.push(other);
  const otherChannel = uniqueChannel('attach-close-other');
  expect((await other.attach(otherChannel, { channelSerial: await serialAhead(ts, otherChannel) })).action).toBe(Actions.ATTACHED);
  expect(ts.service.gateway.metrics().attachments).toBe(before + 1);
  await until('the closed connection off the channel', () => connectionsOn(gone) === 0);
});

it('an ATTACH with a position ahead of delivery and a DETACH right behind it is answered DETACHED only: no ATTACHED after it, no messages, no attachment', async () => {
  const before = ts.service.gateway.metrics().attachments;
  const name = uniqueChannel('attach-detach');
  const c = await RawClient.connect(port, { key: ts.key });
  clients.push(c);
  // The DETACH is read while the ATTACH waits for the log's end offsets.
  c.send({ action: Actions.ATTACH, channel: name, channelSerial: await serialAhead(ts, name) });
  c.send({ action: Actions.DETACH, channel: name });
  await c.next((pm) => pm.action === Actions.DETACHED);
  // Another ATTACH of the same kind answered: the first one's wait is over too.
  const other = await RawClient.connect(port, { key: ts.key });
  clients.push(other);
  const otherChannel = uniqueChannel('attach-detach-other');
  expect((await other.attach(otherChannel, { channelSerial: await serialAhead(ts, otherChannel) })).action).toBe(Actions.ATTACHED);
  await c.ping();
  expect(c.frames.filter((f) => f.channel === name).map((f) => f.action)).toEqual([Actions.DETACHED]);
  expect(ts.service.gateway.metrics().attachments).toBe(before + 1);
});
