// The results as markdown tables: printed as they are (padded, so they read well in a terminal)
// and written to test/bench/last-results.md for the benchmark figures (test/bench/README.md, and the README's Benchmarks summary).
import { cpus, totalmem } from 'node:os';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BenchOptions } from './options.js';
import type { LoadResult } from './load.js';
import type { VisibilityResult } from './visibility.js';

export interface ThroughputRow {
  setup: string;
  result?: LoadResult;
  /** the server process's CPU time (user + system) per request during the measured run */
  cpuUsPerRequest?: number;
  /** the server process's resident memory at the end of the measured run */
  rssMiB?: number;
  /** why there is no result */
  skipped?: string;
  /** req/s against bare rounds of its own, alternated with this setup's (production), instead of the first row's */
  vsBare?: number;
}

export interface VisibilityRow {
  mode: string;
  channel: string;
  load: string;
  result?: VisibilityResult;
  skipped?: string;
}

export interface Report {
  command: string;
  options: BenchOptions;
  body: string;
  throughput: ThroughputRow[];
  visibility: VisibilityRow[];
  notes: string[];
  /** Further sections (markdown), printed after the publish tables: the stats benchmarks. */
  sections: string[];
  /** Some request failed or some message never became visible: the figures are not valid. */
  failed?: boolean;
}

export function table(headers: string[], rows: string[][], rightAligned: boolean[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]): string =>
    `| ${cells.map((c, i) => (rightAligned[i] ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => (rightAligned[i] ? `${'-'.repeat(w + 1)}:` : '-'.repeat(w + 2))).join('|')}|`;
  return [line(headers), rule, ...rows.map(line)].join('\n');
}

const ms = (n: number): string => (Number.isNaN(n) ? '–' : n < 10 ? n.toFixed(2) : n.toFixed(1));
const int = (n: number): string => Math.round(n).toLocaleString('en-US');

/** The first row is the baseline the others are compared with. */
export function throughputTable(rows: ThroughputRow[]): string {
  const bare = rows[0]?.result?.reqPerSec;
  const cells = rows.map((r) => {
    if (!r.result) return [r.setup, 'skipped', '', '', '', '', '', ''];
    const { reqPerSec, p50, p99, non2xx, errors, timeouts } = r.result;
    const failures = non2xx + errors + timeouts;
    const cpu = r.cpuUsPerRequest === undefined ? '–' : r.cpuUsPerRequest.toFixed(0);
    const rss = r.rssMiB === undefined ? '–' : r.rssMiB.toFixed(0);
    return [r.setup, int(reqPerSec), String(p50), String(p99), failures === 0 ? '0' : `**${failures}**`, r.vsBare !== undefined ? r.vsBare.toFixed(2) : bare ? (reqPerSec / bare).toFixed(2) : '–', cpu, rss];
  });
  return table(
    ['Publish (POST)', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx / errors', 'vs bare', 'server CPU µs/req', 'server RSS MiB'],
    cells,
    [false, true, true, true, true, true, true, true],
  );
}

export function visibilityTable(rows: VisibilityRow[]): string {
  const cells = rows.map((r) => {
    if (!r.result) return [r.mode, r.channel, r.load, 'skipped', '', '', '', ''];
    const v = r.result;
    return [r.mode, r.channel, r.load, ms(v.ackP50), ms(v.ackP99), ms(v.visibleP50), ms(v.visibleP99), v.failures === 0 ? String(v.samples) : `${v.samples} (**${v.failures} not visible**)`];
  });
  return table(
    ['Publish → visible', 'channel', 'load', 'ack p50 ms', 'ack p99 ms', 'visible p50 ms', 'visible p99 ms', 'samples'],
    cells,
    [false, false, false, true, true, true, true, true],
  );
}

/** Why a row says "skipped", once per reason. */
function skippedNotes(report: Report): string[] {
  const reasons = new Map<string, string>();
  for (const r of report.throughput) if (r.skipped) reasons.set(r.skipped, r.setup);
  for (const r of report.visibility) if (r.skipped && !reasons.has(r.skipped)) reasons.set(r.skipped, `${r.mode} visibility`);
  return [...reasons].map(([reason, what]) => `- ${what}: skipped (${reason})`);
}

export function machineLine(root: string): string {
  const cpu = cpus();
  const version = (pkg: string): string => (JSON.parse(readFileSync(join(root, 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string }).version;
  return (
    `${cpu.length} cores (${cpu[0]?.model.trim() ?? 'unknown CPU'}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB, ` +
    `${process.platform} ${process.arch}, Node ${process.version}, fastify ${version('fastify')}, autocannon ${version('autocannon')}`
  );
}

export function markdown(report: Report, root: string): string {
  const o = report.options;
  const notes = [...report.notes.map((n) => `- ${n}`), ...skippedNotes(report)];
  return [
    `Measured ${new Date().toISOString().slice(0, 10)} with \`${report.command}\` on ${machineLine(root)}.`,
    `The load generator (autocannon, in the bench process) and the server (a child process) share the machine.`,
    '',
    `**Publish throughput.** autocannon, ${o.connections} connections, pipelining ${o.pipelining}, after ${o.warmupS} s of warm-up; ` +
      `bare and embedded alternate over ${o.rounds} round${o.rounds === 1 ? '' : 's'} of ${o.roundS} s, and each row adds its rounds up ` +
      `(req/s and CPU over all of them, latencies of its median round), so "vs bare" is the ratio of the two totals; production alternates likewise with bare rounds of its own, after them, its "vs bare" the ratio to those; ` +
      `each request publishes one message (a ${report.body.length}-byte JSON body) to one of ${o.channels} channels with Basic auth. ` +
      `Latencies are autocannon's, in whole milliseconds. "server CPU" is the server process's user + system time per request: ` +
      `it depends less than req/s on what else the machine runs. "server RSS" is its resident memory after the run.`,
    '',
    throughputTable(report.throughput),
    '',
    `**Publish → visible in history.** Publish one message with a unique id, then poll \`GET /channels/<ch>/messages?limit=1\` until it is the newest; ` +
      `${o.samples} samples, one request at a time, the history requests to the instance that acknowledged the publish. "ack" is the publish's 201; "visible" counts from sending the publish. ` +
      `Under load, autocannon publishes to other channels at ${Math.round(o.backgroundLoad * 100)}% of the throughput measured above.`,
    '',
    visibilityTable(report.visibility),
    ...(notes.length > 0 ? ['', ...notes] : []),
    ...report.sections.flatMap((section) => ['', section]),
    '',
  ].join('\n');
}

/**
 * A named section of last-results.md, between HTML comments, so that runs which measure
 * different things (the full bench, the soak) each replace their own part of the file and keep
 * the others'.
 */
export function withSection(file: string, name: string, section: string | undefined): string {
  const open = `<!-- ${name} -->`;
  const close = `<!-- /${name} -->`;
  const start = file.indexOf(open);
  const end = file.indexOf(close);
  const rest = start >= 0 && end > start ? file.slice(0, start).trimEnd() + '\n' + file.slice(end + close.length).trimStart() : file;
  if (section === undefined) return rest;
  return `${rest.trimEnd()}\n\n${open}\n${section.trim()}\n${close}\n`;
}

/** The named section of a last-results.md, or undefined. */
export function sectionOf(file: string, name: string): string | undefined {
  const open = `<!-- ${name} -->`;
  const start = file.indexOf(open);
  const end = file.indexOf(`<!-- /${name} -->`);
  return start >= 0 && end > start ? file.slice(start + open.length, end).trim() : undefined;
}
