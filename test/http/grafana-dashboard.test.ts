import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../helpers/service.js';

// The Grafana dashboard shipped in infra/grafana (issue 24 item 4): every metric its queries use
// is one GET /metrics declares, so a renamed metric breaks this test, not a user's dashboard.

interface Panel {
  type: string;
  title: string;
  targets?: { expr: string }[];
}
const dashboard = JSON.parse(readFileSync(resolve(import.meta.dirname, '../../infra/grafana/channel-messaging.json'), 'utf8')) as {
  panels: Panel[];
  templating: { list: { query: unknown }[] };
};

const queries = [
  ...dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr)),
  ...dashboard.templating.list.map((v) => v.query).filter((q): q is string => typeof q === 'string'),
];
const HISTOGRAM_SERIES = /_(bucket|sum|count)$/;

let t: TestService;
let declared: Map<string, string>;
beforeAll(async () => {
  t = await startTestService();
  const text = (await t.service.app.inject({ method: 'GET', url: '/metrics' })).body;
  declared = new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1], m[2]]));
});
afterAll(() => t.close());

describe('infra/grafana/channel-messaging.json', () => {
  it('has panels with queries, over the service, Node and process metrics', () => {
    expect(dashboard.panels.filter((p) => p.type === 'timeseries').length).toBeGreaterThanOrEqual(15);
    expect(queries.some((q) => q.includes('process_cpu_seconds_total'))).toBe(true);
    expect(queries.some((q) => q.includes('cm_messages_published_total'))).toBe(true);
  });

  it('every metric a query uses is declared by GET /metrics (histogram series by their histogram)', () => {
    const used = new Set(queries.flatMap((q) => [...q.matchAll(/\b((?:cm|process|nodejs)_[a-z0-9_]+)\b/g)].map((m) => m[1])));
    expect(used.size).toBeGreaterThan(20);
    const missing = [...used].filter((name) => {
      if (declared.has(name)) return false;
      const base = name.replace(HISTOGRAM_SERIES, '');
      return !(base !== name && declared.get(base) === 'histogram');
    });
    expect(missing).toEqual([]);
  });
});
