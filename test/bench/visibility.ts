// Publish-to-visible latency: publish one message with a unique id, then poll the channel's
// history (newest first, limit=1) until that id is the newest message. One request at a time.
import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

export interface VisibilitySpec {
  url: string;
  auth: string;
  channel: string;
  samples: number;
  data: string;
  /** A sample that is not visible after this long counts as a failure. */
  timeoutMs?: number;
}

/** Sampling stops after this many failures: something is broken, and waiting longer tells nothing. */
const MAX_FAILURES = 3;
/**
 * Polls follow each other at once for the first milliseconds, then with a gap of 5% of the time
 * waited so far (at most 5 ms): the resolution stays within 5%, and slow paths are not hammered.
 */
const pollGapMs = (waitedMs: number): number => (waitedMs < 10 ? 0 : Math.min(5, waitedMs * 0.05));

export interface VisibilityResult {
  samples: number;
  /** publish answered (201), ms */
  ackP50: number;
  ackP99: number;
  /** publish sent until visible in history, ms */
  visibleP50: number;
  visibleP99: number;
  visibleMax: number;
  /** history requests per visible sample, on average */
  polls: number;
  failures: number;
}

interface Response {
  status: number;
  body: string;
}

export async function measureVisibility(spec: VisibilitySpec): Promise<VisibilityResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const target = new URL(spec.url);
  const path = `/channels/${encodeURIComponent(spec.channel)}/messages`;
  const send = (method: string, url: string, body?: string): Promise<Response> =>
    new Promise((resolve, reject) => {
      const headers = body === undefined ? { authorization: spec.auth } : { authorization: spec.auth, 'content-type': 'application/json' };
      const req = request({ host: target.hostname, port: target.port, method, path: url, headers, agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });

  const run = randomBytes(4).toString('hex');
  const timeoutMs = spec.timeoutMs ?? 10_000;
  const acks: number[] = [];
  const visible: number[] = [];
  let polls = 0;
  let failures = 0;
  try {
    for (let i = 0; i < spec.samples && failures < MAX_FAILURES; i++) {
      const id = `vis-${run}-${i}`;
      const started = performance.now();
      const published = await send('POST', path, JSON.stringify([{ id, name: 'visibility', data: spec.data }]));
      if (published.status !== 201) throw new Error(`publish answered ${published.status}: ${published.body.slice(0, 200)}`);
      acks.push(performance.now() - started);
      for (;;) {
        polls++;
        const page = await send('GET', `${path}?limit=1`);
        if (page.status !== 200) throw new Error(`history answered ${page.status}: ${page.body.slice(0, 200)}`);
        if ((JSON.parse(page.body) as { id?: string }[])[0]?.id === id) {
          visible.push(performance.now() - started);
          break;
        }
        const waited = performance.now() - started;
        if (waited > timeoutMs) {
          failures++;
          break;
        }
        const gap = pollGapMs(waited);
        if (gap > 0) await sleep(gap);
      }
    }
  } finally {
    agent.destroy();
  }
  return {
    samples: visible.length,
    ackP50: percentile(acks, 50),
    ackP99: percentile(acks, 99),
    visibleP50: percentile(visible, 50),
    visibleP99: percentile(visible, 99),
    visibleMax: percentile(visible, 100),
    polls: visible.length > 0 ? polls / visible.length : 0,
    failures,
  };
}

/** Nearest-rank percentile; NaN for no values. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}
