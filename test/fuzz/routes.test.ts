// Fuzz tier: random requests at every route of a real listening service, over real HTTP
// (issue 10, "Prove it stays fixed"). For every response: no 5xx, every error in the spec's shape
// in the negotiated format with its headers, status equal to error.statusCode; and GET /time
// answers throughout. Seeded (FUZZ_SEED) and bounded (FUZZ_RUNS per route, FUZZ_SECONDS in all).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { AddressInfo } from 'node:net';
import { startTestService, type TestService } from '../helpers/service.js';
import { fuzzSettings, replayHint } from './settings.js';
import { HttpClient, NoResponse, type FuzzRequest } from './http-client.js';
import { violationsOf } from './invariants.js';
import { describeFailures, Tally } from './tally.js';
import { fuzzRoutes, type FuzzRoute } from './routes.js';
import { TimeWatch } from './time-watch.js';

const settings = fuzzSettings();
const tally = new Tally();
let t: TestService;
let client: HttpClient;
let watch: TimeWatch;
let routes: FuzzRoute[];

/** A request as a failure report prints it: enough to send it again with curl. */
function printable(r: FuzzRequest): string {
  const target = r.target.length > 200 ? `${r.target.slice(0, 200)}…(${r.target.length} chars)` : r.target;
  const body = r.body === undefined ? '' : r.body.length <= 200 ? ` body ${JSON.stringify(r.body.toString('latin1'))}` : ` body (${r.label ?? 'bytes'}, ${r.body.length} bytes)`;
  const headers = Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, v.length > 80 ? `${v.slice(0, 80)}…(${v.length})` : v]));
  return `${r.method} ${target} headers ${JSON.stringify(headers)}${body}`;
}

beforeAll(async () => {
  // Every valid POST /apps body makes an app: room for all of them, so they go on reaching the log.
  t = await startTestService({ MAX_SANDBOX_APPS: '100000' });
  await t.service.app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = t.service.app.server.address() as AddressInfo;
  client = new HttpClient(port);
  const keyName = t.key.split(':')[0];
  const now = Date.now();
  const tokenRes = await client.send({
    method: 'POST',
    target: `/keys/${keyName}/requestToken`,
    headers: { authorization: t.auth, 'content-type': 'application/json' },
    body: Buffer.from(JSON.stringify({ keyName, timestamp: now })),
  });
  expect(tokenRes.status).toBe(200);
  const token = JSON.parse(tokenRes.body.toString()).token as string;
  const appRes = await client.send({ method: 'POST', target: '/apps', headers: { 'content-type': 'application/json' }, body: Buffer.from('{}') });
  expect(appRes.status).toBe(201);
  routes = fuzzRoutes(
    { valid: t.auth, token: `Bearer ${Buffer.from(token).toString('base64')}`, keyName },
    now,
    JSON.parse(appRes.body.toString()).appId as string,
  );
  watch = new TimeWatch(port);
  watch.start();
});

afterAll(async () => {
  const time = watch?.stop();
  console.log(
    `\nfuzz tier: seed ${settings.seed}, up to ${settings.runs} inputs per route, ${settings.budgetMs / 1000} s budget\n${tally.table()}\n` +
      (time ? `GET /time during the run: ${time.answered} answered, ${time.failed} failed, slowest ${time.worstMs.toFixed(0)} ms\n` : ''),
  );
  client?.close();
  await t?.close();
});

describe('fuzz: random bodies, headers, paths and parameters at every route (issue 10)', () => {
  // Route labels are fixed here so that vitest can name the tests before beforeAll has run.
  const LABELS = fuzzRoutes({ valid: '', token: '', keyName: 'k' }, 0, 'a').map((r) => r.label);
  const share = Math.max(1000, Math.floor(settings.budgetMs / LABELS.length));

  for (const [index, label] of LABELS.entries()) {
    it(`${label}: no 5xx, every error in the spec's shape, /time answers`, { timeout: share + 60_000 }, async () => {
      const route = routes[index];
      await fc.assert(
        fc.asyncProperty(route.request, async (request) => {
          const input = printable(request);
          try {
            const res = await client.send(request);
            tally.record(label, res.status, input, violationsOf(res, request.method, request.mustRefuse));
          } catch (err) {
            if (err instanceof NoResponse) tally.record(label, 'none', input, [{ kind: `no response (${err.message.split(' ')[0]})`, detail: err.message }]);
            else if (err instanceof TypeError) return; // node:http would not send it; not an input the server saw
            else throw err;
          }
        }),
        { seed: settings.seed, numRuns: settings.runs, plugins: [fc.interruptAfterTimeLimit(share)] },
      );
      const failures = tally.failuresOf(label);
      if (failures.length > 0) expect.fail(describeFailures(failures, replayHint(settings)));
      expect(watch.failures(), 'GET /time stopped answering during the run').toEqual([]);
    });
  }
});
