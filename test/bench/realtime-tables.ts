// The realtime rows' tables and notes for the bench's markdown (realtime-bench.ts measures them):
// fan-out, publish → delivered latency, memory per connection and attachment, which side saturated.
import { cpus } from 'node:os';
import { table } from './report.js';
import { DELIVERIES_IN_FLIGHT, DRAIN_MS, int, PAYLOAD, pct, PUBLISHERS, RAMP_HOLD_MS, reasonsText, SATURATED, SCENARIOS, WARMUP_S, type RealtimeOptions, type RealtimeServerResult } from './realtime-bench.js';

const ms = (n: number): string => (Number.isNaN(n) ? '–' : n < 10 ? n.toFixed(2) : n.toFixed(1));
const kib = (n: number | undefined): string => (n === undefined ? '–' : n.toFixed(1));

/** results[0] is the baseline. */
export function fanoutTable(results: RealtimeServerResult[]): string {
  const base = results[0];
  const rows = results.flatMap((r) =>
    r.fanout.map((f, i) => {
      const b = base.fanout[i];
      if (f.error) return [f.scenario, r.setup, `**failed**: ${f.error}`, '', '', '', '', '', '', '', '', ''];
      return [
        f.scenario,
        r.setup,
        int(f.deliveredPerS),
        int(f.publishesPerS),
        b ? (f.deliveredPerS / b.deliveredPerS).toFixed(2) : '–',
        ms(f.p50),
        ms(f.p99),
        String(Math.round(f.frameBytes)),
        `${pct(f.serverMain)} + ${pct(f.serverOthers)}`,
        f.clients.map(pct).join(' + '),
        pct(f.elsewhere),
        f.lost + f.nacked === 0 ? '0' : `**${f.lost} lost, ${f.nacked} NACKs**`,
      ];
    }),
  );
  return table(
    ['Realtime fan-out', 'server', 'delivered msg/s', 'publishes/s', 'vs bare', 'p50 ms', 'p99 ms', 'frame bytes', 'server CPU (main + others)', 'load generators CPU', 'rest of machine CPU', 'lost / NACKs'],
    rows,
    [false, false, true, true, true, true, true, true, true, true, true, true],
  );
}

export function latencyTable(results: RealtimeServerResult[]): string {
  const rows = results.flatMap((r) =>
    r.fanout.flatMap((f) =>
      f.latency.map((l) => [f.scenario, r.setup, l.load, ms(l.p50), ms(l.p99), ms(l.max), int(l.deliveries), l.lost + l.nacked === 0 ? '0' : `**${l.lost} lost, ${l.nacked} NACKs**`]),
    ),
  );
  return table(['Publish → delivered', 'server', 'load', 'p50 ms', 'p99 ms', 'max ms', 'deliveries', 'lost / NACKs'], rows, [false, false, false, true, true, true, true, true]);
}

export function memoryTable(results: RealtimeServerResult[]): string {
  const rows = results.map((r) => [
    r.setup,
    kib(r.perConnection.rssKiB),
    kib(r.perConnection.heapKiB),
    kib(r.perAttachment.rssKiB),
    kib(r.perAttachment.heapKiB),
    int(r.maxConnections.held),
    r.maxConnections.rssMiB === undefined ? '–' : r.maxConnections.rssMiB.toFixed(0),
    r.maxConnections.openFilesLimit === undefined ? '–' : int(r.maxConnections.openFilesLimit),
    r.maxConnections.stoppedBy,
  ]);
  return table(
    ['Realtime connections', 'KiB RSS / idle connection', 'KiB heap / idle connection', 'KiB RSS / attachment', 'KiB heap / attachment', 'most connections held', 'RSS at most MiB', 'open-file limit', 'ramp stopped by'],
    rows,
    [false, true, true, true, true, true, true, true, false],
  );
}

/** Which side limited each throughput run, from the CPU shares. */
export function saturationNotes(results: RealtimeServerResult[]): string[] {
  return results.flatMap((r) =>
    r.fanout.filter((f) => !f.error).map((f) => {
      const busy = [f.serverMain >= SATURATED ? `the server's main thread (${pct(f.serverMain)})` : undefined, ...f.clients.map((c, i) => (c >= SATURATED ? `load generator ${i} (${pct(c)})` : undefined))].filter(
        (x) => x !== undefined,
      );
      const ours = f.serverMain + f.serverOthers + f.clients.reduce((a, b) => a + b, 0);
      const machine = ours + f.elsewhere;
      const full = machine >= SATURATED * cpus().length;
      return (
        `${r.setup}, ${f.scenario}: ${busy.length > 0 ? `saturated: ${busy.join(', ')}` : 'no single process saturated'}; ` +
        `server and its load generators ${pct(ours)} of one core, the rest of the machine ${pct(f.elsewhere)}${full ? `: all ${cpus().length} cores busy` : ''}.`
      );
    }),
  );
}

/** The realtime section of the bench's markdown: method, tables, notes. results[0] is the baseline. */
export function realtimeMarkdown(results: RealtimeServerResult[], o: RealtimeOptions, head: string, notes: string[], extra: string[] = []): string {
  const problems = results.filter((r) => Object.keys(r.problems).length > 0).map((r) => `${r.setup}: the clients saw ${reasonsText(r.problems)}.`);
  const all = [...roundNotes(results), ...saturationNotes(results), ...problems, ...notes];
  return [
    `**Realtime.** ${head}`,
    `Both servers run at once, each in a child process (the bare \`ws\` baseline, ws-bare-server.ts, and the embedded service), each with ${o.clients} load-generator children of raw \`ws\` clients (JSON frames) of its own. ` +
      `For each server they open ${int(SCENARIOS.many.channels.length * SCENARIOS.many.fanout)} connections and attach each to one of ${int(SCENARIOS.many.channels.length)} channels (${SCENARIOS.many.fanout} per channel); the first ${int(SCENARIOS.one.fanout)} also attach one more channel. ` +
      `Publishes are realtime MESSAGE frames from ${PUBLISHERS} more connections per child (so that each stays under the service's default REALTIME_MAX_INBOUND_RATE of 100 frames/s), one message each (data of about ${PAYLOAD.length + 30} bytes carrying its send time), spread over the scenario's channels. ` +
      `Fan-out throughput: each child keeps about ${int(DELIVERIES_IN_FLIGHT / o.clients)} deliveries in flight (a message counts until all of that child's subscribers of its channel received it); ` +
      `${o.rounds} rounds of ${o.roundS} s per server, each after ${WARMUP_S} s of warm-up, alternating between the servers; a row adds its rounds up, and "vs bare" divides its delivered messages/s by the baseline's. ` +
      `Latency: from the publish frame's send to each subscriber's receipt, every delivery counted, at a fixed rate for ${o.latencyS} s: "idle" is a few publishes a second, "half of max" half of that server's own throughput above. ` +
      `"lost" counts deliveries that never arrived (a run waits up to ${DRAIN_MS / 1000} s after its last publish). ` +
      `Memory: the server's RSS, and heap + external after a full GC, before and after opening the idle connections, then after attaching them, divided by their count ` +
      `(RSS moves by whole pages and as the garbage collector returns them, so an attachment's share of it, under a KiB, is within its noise: the heap figure is the one to read). ` +
      `Last, the ramp adds idle connections to one server at a time, ${int(o.rampStep)} a step, all on 127.0.0.1, until a connection fails or the cap; "held" counts those still open ${RAMP_HOLD_MS / 1000} s later. ` +
      `CPU shares are of one core over the measured time (the server's main thread + its other threads; each load generator).`,
    '',
    fanoutTable(results),
    '',
    latencyTable(results),
    '',
    memoryTable(results),
    ...(all.length > 0 ? ['', ...all.map((n) => `- ${n}`)] : []),
    ...extra,
  ].join('\n');
}

/** Each round's delivered/s, and the ratio per round, as the publish bench lists its rounds. */
function roundNotes(results: RealtimeServerResult[]): string[] {
  const base = results[0];
  return base.fanout.map((b, i) => {
    const list = results.map((r) => `${r.setup} ${r.fanout[i]?.rounds.map(int).join(', ') || '–'}`).join('; ');
    const ratios = results
      .slice(1)
      .map((r) => r.fanout[i])
      .filter((f) => f && !f.error && f.rounds.length === b.rounds.length)
      .map((f) => f.rounds.map((x, k) => x / b.rounds[k]).sort((p, q) => p - q));
    const spread = ratios.map((r) => `from ${r[0].toFixed(2)} to ${r[r.length - 1].toFixed(2)}`).join('; ');
    return `${b.scenario}, delivered/s per round: ${list}${spread ? `; against the baseline per round: ${spread}` : ''}.`;
  });
}
