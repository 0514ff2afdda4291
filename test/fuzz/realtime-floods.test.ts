// The flood tier (issue 22): one connection floods each kind of frame while victims on other
// connections publish and subscribe. What must hold, whatever the timing: the flooder is sent away
// in-band (DISCONNECTED 42911, or ERROR 80013 for a frame nested too deep or too wide, never an
// unexplained close), every victim publish is ACKed and received once and in order, no victim is
// disconnected, and the service answers REST throughout. How much the victims' latency moves is a
// benchmark's question (`npm run bench:flood`, test/bench/README.md: the realtime door under floods), not a test's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { decode } from '@msgpack/msgpack';
import { listening, removeDir, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';
import { Actions, RawClient, sleep } from '../helpers/raw-realtime.js';
import { FLOOD_KINDS, floodFrames } from '../helpers/flood-frames.js';

let ts: TestService;
let port: number;
const clients: RawClient[] = [];

beforeAll(async () => {
  ts = await startTestService({});
  port = await listening(ts);
});

afterAll(async () => {
  for (const c of clients) c.close();
  await ts?.close();
  if (ts) removeDir(ts.dataDir);
});

/** One flooding connection: sends its frames as fast as its socket takes them until it is closed. */
async function flood(kind: (typeof FLOOD_KINDS)[number]): Promise<{ ended: { action: number; code?: number } | undefined; closed: Promise<void> }> {
  const { format, frames } = floodFrames(kind);
  const ws = new WebSocket(`ws://127.0.0.1:${port}/?key=${encodeURIComponent(ts.key)}&format=${format}&v=6`, { perMessageDeflate: false });
  ws.on('error', () => undefined);
  const result: { ended: { action: number; code?: number } | undefined; closed: Promise<void> } = {
    ended: undefined,
    closed: new Promise((resolve) => ws.once('close', () => resolve())),
  };
  await new Promise((resolve) => ws.once('message', resolve));
  ws.on('message', (raw: Buffer, isBinary: boolean) => {
    const pm = (isBinary ? decode(raw) : JSON.parse(raw.toString())) as { action: number; error?: { code: number } };
    if (pm.action === Actions.DISCONNECTED || pm.action === Actions.ERROR) result.ended = { action: pm.action, code: pm.error?.code };
  });
  let sent = 0;
  const pump = (): void => {
    // At most 20,000 frames a turn: a destroyed socket takes writes unbuffered until its close is seen (test/bench/flood-bench.ts).
    for (let n = 0; n < 20_000 && ws.readyState === ws.OPEN && ws.bufferedAmount < 2 * 1024 * 1024; n++) ws.send(frames[sent++ % frames.length]);
    if (ws.readyState === ws.OPEN) setTimeout(pump, 1);
  };
  pump();
  return result;
}

describe('the flood tier: one connection floods each kind of frame; victims lose nothing and are not disturbed (issue 22)', () => {
  it.each(FLOOD_KINDS)('%s', async (kind) => {
    const subscriber = await RawClient.connect(port, { key: ts.key });
    const publisher = await RawClient.connect(port, { key: ts.key });
    clients.push(subscriber, publisher);
    const channel = uniqueChannel('victim');
    expect((await subscriber.attach(channel)).action).toBe(Actions.ATTACHED);

    const flooder = await flood(kind);
    const answers: Promise<unknown>[] = [];
    for (let i = 0; i < 40; i++) {
      answers.push(publisher.publish(channel, [{ name: 'v', data: `m${i}` }]));
      await sleep(25);
    }
    const acks = (await Promise.all(answers)) as { action: number }[];
    expect(acks.every((a) => a.action === Actions.ACK)).toBe(true);
    await subscriber.next((pm) => pm.action === Actions.MESSAGE && (pm.messages as { data: string }[]).some((m) => m.data === 'm39'));
    const received = subscriber.frames.filter((f) => f.action === Actions.MESSAGE).flatMap((f) => (f.messages as { data: string }[]).map((m) => m.data));
    expect(received).toEqual(Array.from({ length: 40 }, (_, i) => `m${i}`));

    // The flooder was sent away in-band, and its socket went.
    await flooder.closed;
    expect(flooder.ended?.action, `${kind}: ${JSON.stringify(flooder.ended)}`).toBeDefined();
    expect([42911, 80013]).toContain(flooder.ended?.code);
    for (const victim of [subscriber, publisher]) {
      expect(victim.isClosed).toBe(false);
      expect(victim.frames.filter((f) => f.action === Actions.DISCONNECTED || f.action === Actions.ERROR)).toEqual([]);
    }
    const time = await ts.service.app.inject({ method: 'GET', url: '/time' });
    expect(time.statusCode).toBe(200);
  });
});
