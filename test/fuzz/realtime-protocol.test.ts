// Fuzz tier, realtime: random ProtocolMessages and garbage frames, in both formats, against the
// live gateway (issue 11: "the fuzz tier covers protocol messages too"). Each input is a fresh
// connection sending one to four frames, then a HEARTBEAT probe. For every input: the service
// does not crash or log an error; every frame it sends decodes as a ProtocolMessage; every error
// has a string message, a numeric code and statusCode, and is never a 5xx; the connection either
// answers the probe (and then ACKs or NACKs every MESSAGE and PRESENCE with a msgSerial) or was
// closed for a reason it was told (ERROR, DISCONNECTED, CLOSED, or 1009/1007 for a frame too big
// or not UTF-8). A control connection per format publishes throughout and must be ACKed, and
// GET /time must keep answering. Seeded (FUZZ_SEED) and bounded (FUZZ_RUNS per format, FUZZ_SECONDS).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { isUtf8 } from 'node:buffer';
import { decode as decodeMsgpack } from '@msgpack/msgpack';
import pino from 'pino';
import { removeDir, startTestService, type TestService, listening } from '../helpers/service.js';
import { Actions, RawClient, type Pm } from '../helpers/raw-realtime.js';
import { fuzzSettings, replayHint } from './settings.js';
import { describeFailures, Tally } from './tally.js';
import { TimeWatch } from './time-watch.js';
import type { Violation } from './invariants.js';
import { caseArb, type Case, type Format } from './realtime-arbitraries.js';

const settings = fuzzSettings();
const FORMATS: Format[] = ['json', 'msgpack'];
const FRAME_LIMIT = 256 * 1024;
/** How long the gateway has to answer the probe, or an ACK/NACK, before an input counts as a hang. */
const ANSWER_MS = 10_000;

const tally = new Tally();
/** Errors the service logged, and uncaught exceptions or rejections in this process, while an input ran. */
const serviceErrors: string[] = [];
let t: TestService;
let port: number;
let token: string;
let watch: TimeWatch;
const control = new Map<Format, RawClient>();
let probes = 0;

const onUncaught = (err: unknown): void => void serviceErrors.push(`uncaught: ${(err as Error)?.stack ?? String(err)}`);

beforeAll(async () => {
  const logger = pino({ level: 'error' }, { write: (line: string) => void serviceErrors.push(line.slice(0, 2000)) });
  t = await startTestService({ REALTIME_MAX_FRAME_BYTES: String(FRAME_LIMIT), REALTIME_MAX_INBOUND_RATE: '10000' }, { logger });
  port = await listening(t);
  const keyName = t.key.split(':')[0];
  const res = await t.service.app.inject({
    method: 'POST',
    url: `/keys/${keyName}/requestToken`,
    headers: { authorization: t.auth, 'content-type': 'application/json' },
    payload: { keyName, timestamp: Date.now(), ttl: 3600_000 },
  });
  expect(res.statusCode).toBe(200);
  token = res.json().token as string;
  for (const format of FORMATS) {
    const c = await RawClient.connect(port, { key: t.key, clientId: `control-${format}` }, format);
    expect((await c.attach('fuzz-control')).action).toBe(Actions.ATTACHED);
    control.set(format, c);
  }
  process.on('uncaughtException', onUncaught);
  process.on('unhandledRejection', onUncaught);
  watch = new TimeWatch(port);
  watch.start();
});

afterAll(async () => {
  process.off('uncaughtException', onUncaught);
  process.off('unhandledRejection', onUncaught);
  const time = watch?.stop();
  console.log(
    `\nrealtime fuzz tier: seed ${settings.seed}, up to ${settings.runs} inputs per format, ${settings.budgetMs / 2000} s per format\n${tally.table()}\n` +
      (time ? `GET /time during the run: ${time.answered} answered, ${time.failed} failed, slowest ${time.worstMs.toFixed(0)} ms\n` : ''),
  );
  for (const c of control.values()) c.close();
  await t?.close();
  if (t) removeDir(t.dataDir);
});

/** A case as a failure report prints it. */
const printable = (format: Format, c: Case): string => `format=${format}${c.clientId ? ` clientId=${c.clientId}` : ''} frames: ${c.frames.map((f) => f.label).join(' | ')}`;

/** What the gateway will make of one of our frames, decoded as it decodes them. */
function readOwn(format: Format, data: Buffer | string, binary: boolean): Record<string, unknown> | undefined {
  try {
    const value: unknown = format === 'json' ? JSON.parse(Buffer.from(data).toString('utf8')) : binary ? decodeMsgpack(data as Buffer) : undefined;
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function errorProblem(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return 'error is not an object';
  const e = error as { message?: unknown; code?: unknown; statusCode?: unknown };
  if (typeof e.message !== 'string' || e.message.length === 0) return 'error.message is not a string';
  if (typeof e.code !== 'number' || !Number.isInteger(e.code)) return 'error.code is not a number';
  if (typeof e.statusCode !== 'number') return 'error.statusCode is not a number';
  if (e.statusCode >= 500) return `a ${e.statusCode} (${e.code}) for a client's frames`;
  return undefined;
}

/** The rules every frame the gateway sent keeps. */
function frameViolations(frames: Pm[]): Violation[] {
  const out: Violation[] = [];
  for (const f of frames) {
    if ('error' in f) {
      const problem = errorProblem(f.error);
      if (problem) out.push({ kind: `action ${f.action}: ${problem}`, detail: JSON.stringify(f).slice(0, 300) });
    }
    if (f.action === Actions.ACK || f.action === Actions.NACK) {
      const count = f.count;
      if (typeof f.msgSerial !== 'number' || typeof count !== 'number' || count < 1) out.push({ kind: `${f.action === Actions.ACK ? 'ACK' : 'NACK'} without msgSerial and count`, detail: JSON.stringify(f).slice(0, 300) });
      if (f.action === Actions.ACK && (!Array.isArray(f.res) || f.res.length !== count)) out.push({ kind: 'ACK whose res is not one entry per acknowledged message', detail: JSON.stringify(f).slice(0, 300) });
      if (f.action === Actions.NACK && !('error' in f)) out.push({ kind: 'NACK without an error', detail: JSON.stringify(f).slice(0, 300) });
    }
  }
  return out;
}

const settle = <T,>(p: Promise<T>, ms: number): Promise<T | 'timeout'> => {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), ms)))]).finally(() => clearTimeout(timer));
};

async function runCase(format: Format, c: Case): Promise<{ status: string; violations: Violation[] }> {
  const violations: Violation[] = [];
  const errorsBefore = serviceErrors.length;
  let client: RawClient;
  try {
    client = await RawClient.open(port, { key: t.key, clientId: c.clientId }, format);
  } catch (err) {
    return { status: 'no socket', violations: [{ kind: 'the upgrade failed', detail: (err as Error).message }] };
  }
  try {
    const first = await settle(client.next(() => true, ANSWER_MS).catch(() => undefined), ANSWER_MS + 100);
    if (first === 'timeout' || first === undefined || first.action !== Actions.CONNECTED) {
      return { status: 'not connected', violations: [{ kind: 'no CONNECTED', detail: JSON.stringify(first).slice(0, 300) }] };
    }
    const ackable: number[] = [];
    /** Why the gateway may close the socket without a ProtocolMessage: close codes, or the client's DISCONNECT. */
    const reasons = new Set<string>();
    for (const f of c.frames) {
      client.sendRaw(f.data, f.binary);
      const size = typeof f.data === 'string' ? Buffer.byteLength(f.data) : f.data.length;
      if (size > FRAME_LIMIT) reasons.add('1009');
      if (!f.binary && typeof f.data !== 'string' && !isUtf8(f.data)) reasons.add('1007');
      const pm = readOwn(format, f.data, f.binary);
      if (pm?.action === Actions.DISCONNECT) reasons.add('asked');
      const serial = pm?.msgSerial;
      if ((pm?.action === Actions.MESSAGE || pm?.action === Actions.PRESENCE) && typeof serial === 'number' && Number.isSafeInteger(serial) && serial >= 0) ackable.push(serial);
    }
    const probeId = `probe-${probes++}`;
    client.send({ action: Actions.HEARTBEAT, id: probeId });
    const answered = client.next((pm) => pm.action === Actions.HEARTBEAT && pm.id === probeId, ANSWER_MS).then(
      () => 'answered' as const,
      () => 'hang' as const,
    );
    const outcome = await Promise.race([answered, client.closed.then(() => 'closed' as const)]);
    let status: string = outcome;
    if (outcome === 'answered') {
      const missing = (await Promise.all(ackable.map((s) => client.ackOf(s, ANSWER_MS).then(() => undefined, () => s)))).filter((s) => s !== undefined);
      if (missing.length > 0 && !client.isClosed) violations.push({ kind: 'a MESSAGE or PRESENCE with a msgSerial got no ACK or NACK', detail: `msgSerial ${missing.join(', ')}` });
      status = client.frames.some((f) => f.action === Actions.NACK) ? 'open, NACKed' : 'open';
    } else if (outcome === 'closed') {
      const { code } = await client.closed;
      const told = client.frames.find((f) => (f.action === Actions.ERROR && f.channel === undefined) || f.action === Actions.DISCONNECTED || f.action === Actions.CLOSED);
      if (told) status = `closed after ${told.action === Actions.ERROR ? `ERROR ${(told.error as { code?: number })?.code}` : told.action === Actions.CLOSED ? 'CLOSED' : `DISCONNECTED ${(told.error as { code?: number })?.code}`}`;
      else if (reasons.has(String(code))) status = `closed ${code}`;
      else if (reasons.has('asked')) status = 'closed (DISCONNECT)';
      else violations.push({ kind: `closed (${code}) without a reason`, detail: client.frames.map((f) => JSON.stringify(f).slice(0, 120)).join(' ') });
    } else {
      violations.push({ kind: 'no answer to a HEARTBEAT and the socket still open', detail: `after ${ANSWER_MS} ms` });
    }
    violations.push(...frameViolations(client.frames));
    if (client.undecodable.length > 0) violations.push({ kind: 'a frame that does not decode as a ProtocolMessage', detail: client.undecodable[0] });
    if (serviceErrors.length > errorsBefore) violations.push({ kind: 'the service logged an error or threw', detail: serviceErrors.slice(errorsBefore).join('\n').slice(0, 1500) });
    return { status, violations };
  } finally {
    client.close();
  }
}

describe('fuzz: random and malformed ProtocolMessages against the realtime gateway (issue 11)', () => {
  const share = Math.max(1000, Math.floor(settings.budgetMs / 2));
  for (const format of FORMATS) {
    it(`${format}: no crash, no 5xx, every error in the protocol's shape, every connection answered or told why it closed; the control connection and /time keep working`, { timeout: share + 120_000 }, async () => {
      const ctl = control.get(format)!;
      let inputs = 0;
      await fc.assert(
        fc.asyncProperty(caseArb(format, token, FRAME_LIMIT), async (c) => {
          const { status, violations } = await runCase(format, c);
          if (++inputs % 20 === 0) {
            const answer = await ctl.publish('fuzz-control', [{ name: 'control', data: `after ${inputs}` }]).catch((err: Error) => ({ action: -1, error: err.message }));
            if (answer.action !== Actions.ACK) violations.push({ kind: 'the control connection publish was not ACKed', detail: JSON.stringify(answer).slice(0, 300) });
          }
          tally.record(format, status, printable(format, c), violations);
        }),
        { seed: settings.seed, numRuns: settings.runs, plugins: [fc.interruptAfterTimeLimit(share)] },
      );
      const failures = tally.failuresOf(format);
      if (failures.length > 0) expect.fail(describeFailures(failures, replayHint(settings)));
      expect(ctl.isClosed, 'the control connection was closed').toBe(false);
      await ctl.ping();
      expect(watch.failures(), 'GET /time stopped answering during the run').toEqual([]);
    });
  }
});
