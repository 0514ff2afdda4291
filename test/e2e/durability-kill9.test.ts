// ARCHITECTURE, Data flow: "A publish is acknowledged only after its event is durably appended ...
// Nothing acknowledged is ever lost." Proved for the embedded mode through the real process: the
// server is SIGKILLed in the middle of a stream of concurrent publishes, then every publish that got
// its 201 must be in the log file and in history after a restart.
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { basic, removeDir } from '../helpers/service.js';
import { readHistory, readLogFile, sleep, startServer, type ServerProcess } from '../helpers/server-process.js';

const APP_ID = 'kill9app';
const KEY = `${APP_ID}.k1:kill9-secret`;
const CHANNEL = 'persisted:kill9';
const PUBLISHERS = 8;
const KILL_AFTER_MS = 1_500;
const KILL_AFTER_ACKS = 2_000;

const duplicates = (values: string[]): string[] => values.filter((v, i) => values.indexOf(v) !== i);

describe('embedded mode: an acknowledged append survives kill -9', () => {
  let dataDir: string | undefined;
  const servers: ServerProcess[] = [];

  afterEach(async () => {
    for (const s of servers) await s.stop();
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

    const first = await startServer({ DATA_DIR: dataDir, APPS_FILE: appsFile });
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

    const inLog = await readLogFile(dataDir, APP_ID, CHANNEL);
    const logSet = new Set(inLog);

    const second = await startServer({ DATA_DIR: dataDir, APPS_FILE: appsFile });
    servers.push(second);
    const inHistory = await readHistory({ port: second.port, key: KEY, channel: CHANNEL });
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
