// ARCHITECTURE, Data flow and Retention: a persisted channel's history survives a restart, and
// "rebuilding any projection from offset 0 must give the same result".
import { afterEach, describe, expect, it } from 'vitest';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Clock } from '../../src/clock.js';
import { removeDir, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';

type WireMessage = { id: string; timestamp: number; name?: string; data?: unknown; encoding?: string };

/** A clock that a test can move past the in-memory tail, so that only the store can answer. */
class ShiftedClock implements Clock {
  shiftMs = 0;
  now(): number {
    return Date.now() + this.shiftMs;
  }
}

const TAIL_MS = 120_000;

async function publish(ts: TestService, channel: string, payload: unknown): Promise<void> {
  const res = await ts.service.app.inject({
    method: 'POST',
    url: `/channels/${encodeURIComponent(channel)}/messages`,
    headers: { authorization: ts.auth },
    payload: payload as Record<string, unknown>,
  });
  expect(res.statusCode, res.body).toBe(201);
}

/** Every message of a channel through the history route, following Link rel="next". */
async function history(ts: TestService, channel: string, query: string): Promise<WireMessage[]> {
  const base = `/channels/${encodeURIComponent(channel)}/messages`;
  const out: WireMessage[] = [];
  let url: string | undefined = `${base}?${query}`;
  while (url) {
    const res = await ts.service.app.inject({ method: 'GET', url, headers: { authorization: ts.auth } });
    expect(res.statusCode, res.body).toBe(200);
    const page = res.json() as WireMessage[];
    out.push(...page);
    const next = /<\.\/messages(\?[^>]*)>; rel="next"/.exec(String(res.headers.link ?? ''));
    url = next && page.length > 0 ? `${base}${next[1]}` : undefined;
  }
  return out;
}

/** 32 messages in 28 publishes: strings, an object, base64 bytes and a batch of five. */
async function publishFixture(ts: TestService, channel: string): Promise<string[]> {
  const names: string[] = [];
  for (let i = 0; i < 25; i++) {
    await publish(ts, channel, { name: `single-${i}`, data: `data-${i}` });
    names.push(`single-${i}`);
  }
  await publish(ts, channel, { name: 'object', data: { nested: { n: 1, list: [1, 'two', null] } } });
  await publish(ts, channel, { name: 'bytes', data: Buffer.from([0, 1, 2, 253, 254, 255]).toString('base64'), encoding: 'base64' });
  const batch = Array.from({ length: 5 }, (_, i) => ({ name: `batch-${i}`, data: `b${i}` }));
  await publish(ts, channel, batch);
  names.push('object', 'bytes', ...batch.map((m) => m.name));
  return names;
}

async function snapshot(ts: TestService, channel: string): Promise<{ forwards: WireMessage[]; backwards: WireMessage[] }> {
  return {
    forwards: await history(ts, channel, 'direction=forwards&limit=1000'),
    backwards: await history(ts, channel, 'limit=7'),
  };
}

/** Applies what the log holds to the store, then drops the in-memory tail: only the store answers. */
async function storeOnly(ts: TestService, clock: ShiftedClock, channel: string): Promise<void> {
  await ts.service.history.flush();
  clock.shiftMs = TAIL_MS + 10 * 60_000;
  ts.service.history.evict();
  const appId = ts.key.split('.')[0];
  expect(ts.service.history.tail.query({ appId, channel, start: 0, end: clock.now(), limit: 1000, direction: 'forwards' })).toEqual([]);
}

describe('restart: persisted history survives and the projection rebuilds from the log', () => {
  let ts: TestService | undefined;

  afterEach(async () => {
    if (ts) {
      await ts.close();
      removeDir(ts.dataDir);
    }
    ts = undefined;
  });

  it('a graceful restart keeps a persisted channel\'s history, in order', async () => {
    ts = await startTestService();
    const channel = `persisted:${uniqueChannel('restart')}`;
    const names = await publishFixture(ts, channel);
    const before = await snapshot(ts, channel);
    expect(before.forwards.map((m) => m.name)).toEqual(names);
    expect(before.backwards.map((m) => m.name)).toEqual([...names].reverse());

    ts = await ts.restart();
    expect(await snapshot(ts, channel)).toEqual(before);
  });

  it('after a restart, the store alone answers with the same history (past the in-memory tail)', async () => {
    const clock = new ShiftedClock();
    ts = await startTestService({}, { clock });
    const channel = `persisted:${uniqueChannel('restart-store')}`;
    await publishFixture(ts, channel);
    const before = await snapshot(ts, channel);

    ts = await ts.restart();
    await storeOnly(ts, clock, channel);
    expect(await snapshot(ts, channel)).toEqual(before);
  });

  it('deleting projections.db rebuilds history from offset 0 with the same result', async () => {
    const clock = new ShiftedClock();
    ts = await startTestService({}, { clock });
    const channel = `persisted:${uniqueChannel('rebuild')}`;
    const other = `persisted:${uniqueChannel('rebuild-other')}`;
    await publishFixture(ts, channel);
    await publish(ts, other, { name: 'elsewhere', data: 'x' });
    const before = await snapshot(ts, channel);
    const otherBefore = await snapshot(ts, other);
    await ts.close();

    const files = readdirSync(ts.dataDir).filter((f) => f.startsWith('projections.db'));
    expect(files).toContain('projections.db');
    for (const f of files) rmSync(join(ts.dataDir, f));
    expect(existsSync(join(ts.dataDir, 'log.db'))).toBe(true);

    ts = await startTestService({}, { clock, dataDir: ts.dataDir });
    await storeOnly(ts, clock, channel);
    expect(await snapshot(ts, channel)).toEqual(before);
    expect(await snapshot(ts, other)).toEqual(otherBefore);
    expect(before.forwards).toHaveLength(32);
  });
});
