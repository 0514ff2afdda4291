// The realtime door under floods (issue 22): one hostile connection floods one kind of frame while
// victims on other connections publish and receive, and the victims' publish→receive latency is
// set beside its baseline measured in the same run with no flood.
//
// The service runs in a child process (as `npm start` runs it), the flooder in another (it
// reconnects each time it is disconnected, so a flood lasts the whole window), the victims in this
// one: a raw `ws` publisher at VICTIM_RATE MESSAGE frames a second on one connection and a
// subscriber on another, each message carrying its send time. "lost" counts ACKed messages the
// subscriber never received (it waits 3 s after the window); "refused" those NACKed.
// "answered": the flooder's frames the service answered before each of its sockets went;
// "published by the flooder": messages the service published from its connections in the window.
//
// `npm run bench:flood` (FLOOD_SECONDS, default 10; FLOOD_VICTIM_RATE, default 100; FLOOD_KINDS, a subset;
// BENCH_CPU_PROF=1: the service runs with --cpu-prof, and its hot spots are printed at the end).
// Each flood window follows a baseline window of its own, and its ratio is to that one. Figures: test/bench/README.md, the realtime door under floods.
import { fork } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { setPriority, tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { decode as decodeMsgpack } from '@msgpack/msgpack';
import { startServiceChild } from './service-child.js';
import { FLOOD_KINDS, floodFrames, type FloodKind } from '../helpers/flood-frames.js';
import { mainThreadProfile, summarizeProfile } from './cpu-profile.js';

const SECONDS = Number(process.env.FLOOD_SECONDS ?? 10);
/** Victim messages a second (FLOOD_VICTIM_RATE): at 100 and 10 s a window, a p99 is the 10th slowest of 1,000. */
const VICTIM_RATE = Number(process.env.FLOOD_VICTIM_RATE ?? 100);
/** FLOOD_KINDS: a comma-separated subset (matched by prefix). */
const KINDS = process.env.FLOOD_KINDS ? FLOOD_KINDS.filter((k) => process.env.FLOOD_KINDS!.split(',').some((p) => k.startsWith(p))) : FLOOD_KINDS;

if (process.argv[2] === 'flooder') {
  // Child: floods one kind of frame on one connection, reconnecting whenever it is closed. At the
  // lowest priority: a hostile client is on another machine, and here its own loop (writing
  // hundreds of thousands of frames a second) would otherwise take the core the service and the
  // victims share, and the victims' figures would measure this machine, not the service.
  setPriority(19);
  const [, , , url, key, kind] = process.argv;
  const { format, frames } = floodFrames(kind as FloodKind);
  const FLOOD_TURN = 20_000;
  let sent = 0;
  let connections = 0;
  /** The flooder's frames the service answered while its sockets were open (an ACK or NACK counts its count; CONNECTED and DISCONNECTED aside): what each connection had admitted. */
  let actedOn = 0;
  let stop = false;
  process.on('message', () => {
    stop = true;
  });
  while (!stop) {
    connections++;
    const ws = new WebSocket(`${url.replace('http', 'ws')}/?key=${encodeURIComponent(key)}&format=${format}&v=6`, { perMessageDeflate: false });
    ws.on('error', () => undefined);
    ws.on('message', (raw: Buffer, isBinary: boolean) => {
      let pm: { action?: number; count?: number };
      try {
        pm = (isBinary ? decodeMsgpack(raw) : JSON.parse(raw.toString())) as { action?: number; count?: number };
      } catch {
        return;
      }
      if (pm.action === 4 || pm.action === 6) return;
      actedOn += pm.action === 1 || pm.action === 2 ? Number(pm.count ?? 1) : 1;
    });
    await new Promise<void>((resolve) => {
      ws.once('close', () => resolve());
      ws.once('message', () => {
        // CONNECTED: flood while the socket takes it, without waiting for answers.
        // At most FLOOD_TURN frames a turn: a socket the service destroyed takes writes without
        // buffering them until its close is seen, which a loop that never yields never sees (the
        // flooder then spun, unstoppable, growing to gigabytes).
        const pump = (): void => {
          for (let n = 0; n < FLOOD_TURN && !stop && ws.readyState === ws.OPEN && ws.bufferedAmount < 4 * 1024 * 1024; n++) {
            ws.send(frames[sent++ % frames.length]);
          }
          if (!stop && ws.readyState === ws.OPEN) setTimeout(pump, 1);
          else if (stop) ws.terminate();
        };
        pump();
      });
    });
  }
  const cpu = process.cpuUsage();
  process.send?.({ sent, connections, actedOn, cpuMs: (cpu.user + cpu.system) / 1000 });
  process.exit(0);
}

interface Sample {
  p50: number;
  p99: number;
  max: number;
  received: number;
  lost: number;
  refused: number;
}

const quantile = (sorted: number[], q: number): number => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]);

/** The victims for one window: publish at VICTIM_RATE, receive, and their latency. */
async function victims(url: string, key: string, seconds: number): Promise<Sample> {
  const channel = `victim-${Math.random().toString(36).slice(2)}`;
  const open = (): Promise<WebSocket> =>
    new Promise((resolve, reject) => {
      const ws = new WebSocket(`${url.replace('http', 'ws')}/?key=${encodeURIComponent(key)}&format=json&v=6`, { perMessageDeflate: false });
      ws.once('message', () => resolve(ws));
      ws.once('error', reject);
    });
  const sub = await open();
  const pub = await open();
  const latencies: number[] = [];
  const seen = new Set<number>();
  await new Promise<void>((resolve) => {
    sub.on('message', (raw: Buffer) => {
      const pm = JSON.parse(raw.toString());
      if (pm.action === 11) resolve();
      if (pm.action !== 15) return;
      for (const m of pm.messages) {
        const [i, sentAt] = String(m.data).split(':').map(Number);
        seen.add(i);
        latencies.push(performance.now() - sentAt);
      }
    });
    sub.send(JSON.stringify({ action: 10, channel }));
  });
  const acked = new Set<number>();
  let refused = 0;
  pub.on('message', (raw: Buffer) => {
    const pm = JSON.parse(raw.toString());
    if (pm.action === 1) for (let i = pm.msgSerial; i < pm.msgSerial + pm.count; i++) acked.add(i);
    if (pm.action === 2) refused += pm.count;
  });
  const total = seconds * VICTIM_RATE;
  for (let i = 0; i < total; i++) {
    pub.send(JSON.stringify({ action: 15, channel, msgSerial: i, messages: [{ name: 'v', data: `${i}:${performance.now()}` }] }));
    await new Promise((r) => setTimeout(r, 1000 / VICTIM_RATE));
  }
  await new Promise((r) => setTimeout(r, 3000));
  sub.terminate();
  pub.terminate();
  const sorted = latencies.sort((a, b) => a - b);
  return { p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99), max: sorted[sorted.length - 1] ?? NaN, received: seen.size, lost: [...acked].filter((i) => !seen.has(i)).length, refused };
}

const profileDir = process.env.BENCH_CPU_PROF === '1' ? mkdtempSync(join(tmpdir(), 'cm-flood-prof-')) : undefined;
const service = await startServiceChild('flood', {}, profileDir ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : []);
const url = service.server.url;
const rows: string[][] = [];
const f = (ms: number): string => ms.toFixed(1);
/** Messages the service published from realtime MESSAGE frames so far (its GET /metrics). */
const realtimePublished = async (): Promise<number> =>
  Number(/^cm_messages_published_total\{transport="realtime"\} (\d+)/m.exec(await (await fetch(`${url}/metrics`)).text())?.[1] ?? NaN);
/** Victims alone for one window, and the service's CPU meanwhile (share of a core). */
const baseline = async (): Promise<{ sample: Sample; cpu: number }> => {
  const cpu0 = service.server.cpuMs() ?? NaN;
  const sample = await victims(url, service.key, SECONDS);
  return { sample, cpu: ((service.server.cpuMs() ?? NaN) - cpu0) / (SECONDS * 10 + 30) };
};
const baselineRow = (label: string, { sample: b, cpu }: { sample: Sample; cpu: number }): string[] =>
  [label, f(b.p50), f(b.p99), f(b.max), '1.0', String(b.received), String(b.lost), String(b.refused), '', '', '', '', `${cpu.toFixed(0)}%`, ''];
try {
  // Each flood window follows a baseline window of its own: on a shared machine the victims'
  // p99 with no flood moves by the minute, and a ratio against a baseline measured minutes
  // earlier measured the machine as much as the flood.
  for (const kind of KINDS) {
    process.stderr.write(`[flood] baseline before ${kind}: victims alone for ${SECONDS} s\n`);
    const base = await baseline();
    rows.push(baselineRow(`(none: baseline before ${kind})`, base));
    process.stderr.write(`[flood] ${kind}: ${SECONDS} s\n`);
    const flooder = fork(fileURLToPath(import.meta.url), ['flooder', url, service.key, kind], { execArgv: ['--import', 'tsx'] });
    const published0 = await realtimePublished();
    const outcome = new Promise<{ sent: number; connections: number; actedOn: number; cpuMs: number }>((resolve) => flooder.once('message', (m) => resolve(m as { sent: number; connections: number; actedOn: number; cpuMs: number })));
    await new Promise((r) => setTimeout(r, 500));
    const cpu0 = service.server.cpuMs() ?? NaN;
    const s = await victims(url, service.key, SECONDS);
    const cpu = ((service.server.cpuMs() ?? NaN) - cpu0) / (SECONDS * 10 + 30);
    flooder.send('stop');
    const { sent, connections, actedOn, cpuMs } = await outcome;
    // What the flooder's connections published: every realtime publish of the window, the victims' aside.
    const flooderPublished = (await realtimePublished()) - published0 - s.received;
    // The flooder's own CPU over its life (the window, 0.5 s before it and its 3 s of waiting), as a share of a core.
    const flooderCpu = cpuMs / ((SECONDS + 3.5) * 10);
    rows.push([kind, f(s.p50), f(s.p99), f(s.max), (s.p99 / base.sample.p99).toFixed(1), String(s.received), String(s.lost), String(s.refused), String(sent), String(actedOn), String(flooderPublished), String(connections), `${cpu.toFixed(0)}%`, `${flooderCpu.toFixed(0)}%`]);
  }
} finally {
  await service.stop();
}
const header = ['flood (one connection)', 'victim p50 ms', 'p99 ms', 'max ms', 'p99 / baseline', 'received', 'lost', 'refused', 'frames sent', 'answered', 'published by the flooder', 'connections', 'service CPU (of a core)', 'flooder CPU'];
console.log(`| ${header.join(' | ')} |\n|${header.map(() => '---').join('|')}|\n${rows.map((r) => `| ${r.join(' | ')} |`).join('\n')}`);
const profile = profileDir && mainThreadProfile(profileDir);
if (profile) {
  const summary = summarizeProfile(profile, join(fileURLToPath(import.meta.url), '../../..') + '/', 25);
  console.log(`\nservice CPU profile ${profile} (${(summary.busyMs / 1000).toFixed(1)} s busy)`);
  for (const h of [...summary.functions, ...summary.places]) console.log(`${h.selfMs.toFixed(0).padStart(7)} ms ${(h.share * 100).toFixed(1).padStart(5)}%  ${h.name}`);
}
