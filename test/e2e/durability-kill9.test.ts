// ARCHITECTURE, Data flow: "A publish is acknowledged only after its event is durably appended ...
// Nothing acknowledged is ever lost." Proved for the embedded mode through the real process: the
// server is SIGKILLed in the middle of a stream of concurrent publishes, then every publish that got
// its 201 must be in the log file and in history after a restart.
import { afterEach, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { decodeEvent } from '../../src/log/event-codec.js';
import { Topics } from '../../src/log/port.js';
import { basic, removeDir } from '../helpers/service.js';

const ROOT = resolve(import.meta.dirname, '../..');
const APP_ID = 'kill9app';
const KEY = `${APP_ID}.k1:kill9-secret`;
const CHANNEL = 'persisted:kill9';
const PUBLISHERS = 8;
const KILL_AFTER_MS = 1_500;
const KILL_AFTER_ACKS = 2_000;

interface Server {
  child: ChildProcess;
  port: number;
  output: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const freePort = (): Promise<number> =>
  new Promise((done, fail) => {
    const probe = createServer();
    probe.once('error', fail);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => done(port));
    });
  });

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Starts src/main.ts in a child whose PID is the server itself (tsx as a loader, not a wrapper). */
async function startServer(dataDir: string, appsFile: string): Promise<Server> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    // The embedded mode, whatever infrastructure the environment points at (CI exports Kafka's).
    env: { ...process.env, KAFKA_BROKERS: '', CLICKHOUSE_URL: '', DATA_DIR: dataDir, APPS_FILE: appsFile, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  child.stdout!.on('data', (b: Buffer) => output.push(b.toString()));
  child.stderr!.on('data', (b: Buffer) => output.push(b.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    child.once('exit', (code, signal) => r({ code, signal })),
  );
  const server = { child, port, output, exited };
  const deadline = Date.now() + 45_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`server exited before it was ready:\n${output.join('')}`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}/time`);
      if (res.ok) return server;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`server not ready after 45 s:\n${output.join('')}`);
    }
    await sleep(100);
  }
}

/** Every message of the channel in history, oldest first, following Link rel="next". */
async function readHistory(port: number): Promise<string[]> {
  const data: string[] = [];
  let path: string | undefined = `/channels/${encodeURIComponent(CHANNEL)}/messages?direction=forwards&limit=1000`;
  while (path) {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, { headers: { authorization: basic(KEY) } });
    expect(res.status).toBe(200);
    const page = (await res.json()) as { data: string }[];
    data.push(...page.map((m) => m.data));
    const next = /<\.\/messages(\?[^>]*)>; rel="next"/.exec(res.headers.get('link') ?? '');
    path = next && page.length > 0 ? `/channels/${encodeURIComponent(CHANNEL)}/messages${next[1]}` : undefined;
  }
  return data;
}

/** Every message of the channel in the log file itself, in log order. */
async function readLogFile(dataDir: string): Promise<string[]> {
  const log = new EmbeddedLog({ path: join(dataDir, 'log.db') });
  try {
    const data: string[] = [];
    const ends = await log.endOffsets(Topics.messages);
    for (const [partition, end] of ends) {
      for (const record of await log.read(Topics.messages, partition, 0, end + 1)) {
        const event = decodeEvent(record.value);
        if (event.type === 'messages.published' && event.appId === APP_ID && event.channel === CHANNEL) {
          data.push(...event.messages.map((m) => m.data as string));
        }
      }
    }
    return data;
  } finally {
    await log.close();
  }
}

const duplicates = (values: string[]): string[] => values.filter((v, i) => values.indexOf(v) !== i);

describe('embedded mode: an acknowledged append survives kill -9', () => {
  let dataDir: string | undefined;
  const servers: Server[] = [];

  afterEach(async () => {
    for (const s of servers) {
      if (s.child.exitCode === null && s.child.signalCode === null) {
        s.child.kill('SIGTERM');
        const timer = setTimeout(() => s.child.kill('SIGKILL'), 10_000);
        await s.exited;
        clearTimeout(timer);
      }
    }
    servers.length = 0;
    if (dataDir) removeDir(dataDir);
  });

  it('every publish answered 201 before SIGKILL is in the log file and in history after a restart', { timeout: 90_000 }, async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'cm-kill9-'));
    const appsFile = join(dataDir, 'apps.json');
    writeFileSync(
      appsFile,
      JSON.stringify({ apps: [{ appId: APP_ID, keys: [{ key: KEY }], namespaces: [{ id: 'persisted', persisted: true }] }] }),
    );

    const first = await startServer(dataDir, appsFile);
    servers.push(first);

    const sent = new Set<string>();
    const acked = new Set<string>();
    const failuresBeforeKill: string[] = [];
    let killed = false;
    const url = `http://127.0.0.1:${first.port}/channels/${encodeURIComponent(CHANNEL)}/messages`;
    const headers = { authorization: basic(KEY), 'content-type': 'application/json' };

    const publisher = async (worker: number): Promise<void> => {
      for (let seq = 0; !killed; seq++) {
        const data = `${worker}:${seq}`;
        sent.add(data);
        try {
          const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ name: 'kill9', data }) });
          await res.arrayBuffer();
          if (res.status === 201) acked.add(data);
          else if (!killed) failuresBeforeKill.push(`${data}: status ${res.status}`);
        } catch (err) {
          if (!killed) failuresBeforeKill.push(`${data}: ${(err as Error).message}`);
          return;
        }
      }
    };
    const startedAt = Date.now();
    const publishers = Array.from({ length: PUBLISHERS }, (_, w) => publisher(w));

    while (Date.now() - startedAt < KILL_AFTER_MS && acked.size < KILL_AFTER_ACKS && failuresBeforeKill.length === 0) await sleep(5);
    // Publishes are in flight at this instant; some of them are appended but not yet answered.
    killed = process.kill(first.child.pid!, 'SIGKILL');
    const killedAfterMs = Date.now() - startedAt;
    const ackedAtKill = acked.size;
    expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });
    await Promise.all(publishers);
    expect(failuresBeforeKill).toEqual([]);
    // A response read after the kill was still sent before it.
    const ackedTotal = acked.size;
    expect(ackedTotal).toBeGreaterThan(0);

    const inLog = await readLogFile(dataDir);
    const logSet = new Set(inLog);

    const second = await startServer(dataDir, appsFile);
    servers.push(second);
    const inHistory = await readHistory(second.port);
    const historySet = new Set(inHistory);

    const lostFromLog = [...acked].filter((d) => !logSet.has(d));
    const lostFromHistory = [...acked].filter((d) => !historySet.has(d));
    const durableNotAcked = inLog.filter((d) => !acked.has(d));
    const phantom = inLog.filter((d) => !sent.has(d));
    console.log(
      `kill -9 after ${killedAfterMs} ms of publishing: ${ackedTotal} acknowledged (${ackedAtKill} when the signal was sent), ` +
        `${sent.size - ackedTotal} sent without an answer, ${inLog.length} in the log file, ` +
        `${durableNotAcked.length} durable but never acknowledged (in flight), ${inHistory.length} in history after restart`,
    );

    expect(lostFromLog).toEqual([]);
    expect(lostFromHistory).toEqual([]);
    expect(phantom).toEqual([]);
    expect(duplicates(inLog)).toEqual([]);
    // History is the log, replayed: the same messages in the same order.
    expect(inHistory).toEqual(inLog);
    // Per publisher, order is kept and nothing is skipped before the last acknowledged message.
    for (let w = 0; w < PUBLISHERS; w++) {
      const seqs = inLog.filter((d) => d.startsWith(`${w}:`)).map((d) => Number(d.split(':')[1]));
      expect(seqs).toEqual(seqs.map((_, i) => i));
    }
  });
});
