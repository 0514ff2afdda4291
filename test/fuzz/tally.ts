// Inputs tried per route, the statuses they got, and the distinct failures found with the
// smallest input that showed each. A run reports every distinct failure rather than stopping at
// the first: several fixes are usually in flight at once, and each needs its own reproduction.
import type { Violation } from './invariants.js';

export interface Failure {
  route: string;
  kind: string;
  count: number;
  /** The shortest input (as printed) that showed it, and what the response did. */
  input: string;
  detail: string;
}

interface RouteTally {
  inputs: number;
  /** By HTTP status (0 for none), or by what became of a realtime connection. */
  byStatus: Map<number | string, number>;
}

export class Tally {
  private readonly routes = new Map<string, RouteTally>();
  private readonly failures = new Map<string, Failure>();

  record(route: string, status: number | string, input: string, violations: Violation[]): void {
    let t = this.routes.get(route);
    if (!t) this.routes.set(route, (t = { inputs: 0, byStatus: new Map() }));
    t.inputs++;
    const s = status === 'none' ? 0 : status;
    t.byStatus.set(s, (t.byStatus.get(s) ?? 0) + 1);
    for (const v of violations) {
      const key = `${route}\u0000${v.kind}`;
      const seen = this.failures.get(key);
      if (!seen) this.failures.set(key, { route, kind: v.kind, count: 1, input, detail: v.detail });
      else {
        seen.count++;
        if (input.length < seen.input.length) Object.assign(seen, { input, detail: v.detail });
      }
    }
  }

  failuresOf(route?: string): Failure[] {
    return [...this.failures.values()].filter((f) => route === undefined || f.route === route);
  }

  inputsOf(route: string): number {
    return this.routes.get(route)?.inputs ?? 0;
  }

  totalInputs(): number {
    return [...this.routes.values()].reduce((n, t) => n + t.inputs, 0);
  }

  /** The per-route table printed at the end of a run (and quoted in the README). */
  table(): string {
    const rows = [...this.routes.entries()].map(([route, t]) => {
      const statuses = [...t.byStatus.entries()]
        .sort((a, b) => (typeof a[0] === 'number' && typeof b[0] === 'number' ? a[0] - b[0] : String(a[0]).localeCompare(String(b[0]))))
        .map(([s, n]) => `${s === 0 ? 'none' : s}×${n}`)
        .join(' ');
      return [route, String(t.inputs), String(this.failuresOf(route).length), statuses];
    });
    rows.push(['all routes', String(this.totalInputs()), String(this.failures.size), '']);
    const widths = [0, 1, 2, 3].map((i) => Math.max(...rows.map((r) => r[i].length), ['route', 'inputs', 'failures', 'statuses'][i].length));
    const line = (r: string[]): string => `| ${r.map((c, i) => (i === 1 || i === 2 ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join(' | ')} |`;
    return [line(['route', 'inputs', 'failures', 'statuses']), `|${widths.map((w, i) => (i === 1 || i === 2 ? `${'-'.repeat(w + 1)}:` : '-'.repeat(w + 2))).join('|')}|`, ...rows.map(line)].join('\n');
  }
}

export function describeFailures(failures: Failure[], hint: string): string {
  return [
    `${failures.length} distinct failure(s); ${hint}`,
    ...failures.map((f) => `- [${f.route}] ${f.kind} (${f.count}×)\n    input: ${f.input}\n    got:   ${f.detail}`),
  ].join('\n');
}
