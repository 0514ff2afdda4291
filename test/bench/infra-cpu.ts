// The production bench's reading of the local infrastructure's CPU (test/bench/run.ts).
import { readFileSync } from 'node:fs';

/**
 * The CPU time the local infrastructure's processes (the broker, ClickHouse) spent during the
 * production rounds, per publish: they share the machine's cores with the service and the load
 * generator, so what they spend per publish bounds the ratio to bare as the service's own does.
 * Linux /proc; where a process cannot be read, nothing is said of it.
 */
export class InfraCpu {
  private readonly totals = new Map<string, number>();
  private requests = 0;

  constructor(private readonly pids: Record<string, number | undefined>) {}

  /** Each process's user + system CPU in ms (clock ticks of 10 ms), undefined where unreadable. */
  read(): Map<string, number> {
    const out = new Map<string, number>();
    for (const [name, pid] of Object.entries(this.pids)) {
      if (pid === undefined) continue;
      try {
        const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
        out.set(name, (Number(fields[11]) + Number(fields[12])) * 10);
      } catch {
        // not this machine's process, or gone: not measured
      }
    }
    return out;
  }

  add(before: Map<string, number>, after: Map<string, number>, requests: number): void {
    for (const [name, ms] of after) if (before.has(name)) this.totals.set(name, (this.totals.get(name) ?? 0) + ms - before.get(name)!);
    this.requests += requests;
  }

  /** "broker 21 µs, ClickHouse 9 µs" per publish, or undefined when nothing was measured. */
  describe(): string | undefined {
    if (this.totals.size === 0 || this.requests === 0) return undefined;
    return [...this.totals].map(([name, ms]) => `${name} ${((ms * 1000) / this.requests).toFixed(0)} µs`).join(', ');
  }
}
