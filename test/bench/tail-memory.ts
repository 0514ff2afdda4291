// Memory of the in-memory history tail (two minutes of every channel): bytes per message held,
// measured in this process by filling a history projection with publish events of the bench's
// shape (fresh strings per message, as parsed request bodies give) and comparing the heap and
// ArrayBuffer memory before and after, each after a full garbage collection.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { HistoryProjection } from '../../projections/history/history-projection.js';
import type { HistoryStore } from '../../projections/history/history-store.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import type { LogRecord } from '../../src/log/port.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const nullStore: HistoryStore = {
  kind: 'none',
  init: async () => {},
  loadCheckpoint: async () => new Map(),
  loadMarks: async () => [],
  write: async () => {},
  query: async () => [],
  dropExpired: async () => 0,
  close: async () => {},
} as unknown as HistoryStore;

const used = (): number => {
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
};

export async function tailMemoryBench(options: { messages: number; body: string; progress: (s: string) => void }): Promise<string> {
  const projection = new HistoryProjection({ store: nullStore, clock: { now: () => Date.now() }, tailMs: 24 * 3600_000, retentionOf: () => undefined });
  await projection.start();
  const before = used();
  const start = Date.now();
  let records: LogRecord[] = [];
  for (let i = 0; i < options.messages; i++) {
    const timestamp = start + Math.floor(i / 30);
    const message = { id: `AbCdEfGh${i.toString(36)}:0`, timestamp, ...(JSON.parse(options.body) as object[])[0] };
    const value = encodeEvent({ type: 'messages.published', appId: 'bench', channel: `bench-${i % 100}`, transport: 'rest', messages: [message] });
    records.push({ topic: 'messages', partition: 0, offset: i, key: 'k', timestamp, value });
    if (records.length === 25) {
      projection.apply(records);
      records = [];
    }
    if ((i + 1) % 250_000 === 0) options.progress(`tail memory: ${i + 1} of ${options.messages} messages`);
  }
  projection.apply(records);
  const perMessage = (used() - before) / projection.tail.count;
  await projection.close();
  return [
    '| In-memory history tail | messages | bytes per message |',
    '|---|---:|---:|',
    `| heap + ArrayBuffers, after a full GC | ${projection.tail.count.toLocaleString('en-US')} | ${Math.round(perMessage)} |`,
  ].join('\n');
}
