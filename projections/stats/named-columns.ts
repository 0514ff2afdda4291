import { BASE_COUNTERS, type StatsBucket } from '../../src/domain/stats-sample.js';
import { flatEntries } from '../../src/domain/stats-record.js';
import { sampleAggregate } from './rollups.js';

/**
 * The spec's names for every figure of a stats record (the 0.8 nested paths: `inbound.rest.messages.count`,
 * `apiRequests.succeeded`, `channels.peak`...), each as what it is made of, so that a store can offer
 * one column per name (ClickHouse: the `stats` view). Derived from flatEntries itself, so the columns
 * and GET /stats can never disagree: every counter section is a sum of base counters (found by
 * feeding flatEntries one base counter at a time); the rest are the channel and connection gauges.
 */
export type NamedColumn =
  | { name: string; kind: 'sum'; terms: { counter: number; times: number }[] }
  | { name: string; kind: 'gauge'; of: 'channel' | 'connection'; figure: 'peak' | 'min' | 'mean' };

/** The spec's (0.8) name of a flat entry key: `messages.` dropped, apiRequests.all/tokenRequests split. */
export function specName(flatKey: string): string {
  if (flatKey.startsWith('messages.')) return flatKey.slice('messages.'.length);
  if (flatKey.startsWith('apiRequests.tokenRequests.')) return `tokenRequests.${flatKey.split('.')[2]}`;
  if (flatKey.startsWith('apiRequests.all.')) return `apiRequests.${flatKey.split('.')[2]}`;
  return flatKey;
}

const emptyBucket = (counters: Record<string, number>): StatsBucket => sampleAggregate(0, counters, 0, 0);

function build(): NamedColumn[] {
  const sums = new Map<string, { counter: number; times: number }[]>();
  BASE_COUNTERS.forEach((name, i) => {
    for (const [key, times] of Object.entries(flatEntries(emptyBucket({ [name]: 1 }), 1, 1))) {
      if (!sums.has(key)) sums.set(key, []);
      sums.get(key)!.push({ counter: i, times });
    }
  });
  const columns: NamedColumn[] = [...sums].map(([key, terms]) => ({ name: specName(key), kind: 'sum', terms }));
  const gauges = flatEntries({ ...emptyBucket({}), channelSamples: 1, channelMax: 1, channelSum: 1, channelMin: 1, connectionSamples: 1, connectionMax: 1, connectionSum: 1, connectionMin: 1 }, 1, 1);
  for (const key of Object.keys(gauges)) {
    const [prefix, figure] = [key.slice(0, key.lastIndexOf('.')), key.slice(key.lastIndexOf('.') + 1)];
    columns.push({ name: specName(key), kind: 'gauge', of: prefix === 'channels' ? 'channel' : 'connection', figure: figure as 'peak' | 'min' | 'mean' });
  }
  return columns.sort((a, b) => a.name.localeCompare(b.name));
}

export const NAMED_COLUMNS: readonly NamedColumn[] = build();
