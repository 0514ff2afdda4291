// Issue 22, item 7: a read that writes. `GET /channels/<id>` activates the channel (spec: Channel
// status) but must not grow the disk: before, each request of a new name appended a
// `channel.activated` record and, through it, four lifecycle messages (1.5 KB a request in
// DATA_DIR; 2,000 requests: 3 MB). Now the activation is held in memory by the instance that
// answered (projections/channels/status-activations.ts).
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Topics } from '../../src/log/port.js';
import { removeDir, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';

const IDLE_MS = 300;
const REQUESTS = 2_000;
let t: TestService;

beforeAll(async () => {
  t = await startTestService({ CHANNEL_IDLE_MS: String(IDLE_MS) });
});
afterAll(async () => {
  await t.close();
  removeDir(t.dataDir);
});

const bytesIn = (dir: string): number => readdirSync(dir, { withFileTypes: true }).reduce((sum, e) => sum + (e.isDirectory() ? bytesIn(join(dir, e.name)) : statSync(join(dir, e.name)).size), 0);
const ends = async (): Promise<string> => {
  const out: string[] = [];
  for (const topic of [Topics.connections, Topics.messages]) out.push(`${topic}:${[...(await t.service.log.endOffsets(topic))].join()}`);
  return out.join(' ');
};
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

it(`${REQUESTS} status requests of new names (and one name again and again) append nothing and do not grow DATA_DIR`, async () => {
  // Whatever the start wrote has settled (its instance.started, the first announcer rounds).
  await sleep(500);
  const offsetsBefore = await ends();
  const bytesBefore = bytesIn(t.dataDir);
  const prefix = uniqueChannel('status-read');
  for (let i = 0; i < REQUESTS; i++) {
    const res = await t.service.app.inject({ url: `/channels/${prefix}-${i % 2 === 0 ? i : 'same'}`, headers: { authorization: t.auth } });
    expect(res.statusCode).toBe(200);
    expect(res.json().status.isActive).toBe(true);
  }
  // Listed while active, here (spec: Channel enumeration) ...
  const listed = await t.service.app.inject({ url: `/channels?by=id&limit=1000&prefix=${prefix}-same`, headers: { authorization: t.auth } });
  expect(listed.json()).toEqual([`${prefix}-same`]);
  // ... and past the idle time, when lifecycle events would have been appended, gone.
  await sleep(IDLE_MS * 3);
  const after = await t.service.app.inject({ url: `/channels?by=id&limit=1000&prefix=${prefix}`, headers: { authorization: t.auth } });
  expect(after.json()).toEqual([]);
  expect(await ends()).toBe(offsetsBefore);
  // Bounded, not proportional to the requests: before, 1.5 KB each (3 MB in all).
  expect(bytesIn(t.dataDir) - bytesBefore).toBeLessThan(64 * 1024);
});
