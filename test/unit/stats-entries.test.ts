import { describe, expect, it } from 'vitest';
import { BASE_COUNTERS, type StatsBucket } from '../../src/domain/stats-sample.js';
import { flatEntries, specEntries } from '../../src/domain/stats-record.js';
import { rng } from '../helpers/stats-log.js';

describe('flatEntries (the table-made entries every page record uses)', () => {
  it('gives what the spec derivation (specEntries) gives, key for key and in the same order, for random buckets', () => {
    const random = rng(3);
    const int = (n: number) => Math.floor(random() * n);
    for (let i = 0; i < 2000; i++) {
      const counters: Record<string, number> = {};
      for (const k of BASE_COUNTERS) if (random() < 0.3) counters[k] = int(random() < 0.5 ? 10 : 1e12);
      if (random() < 0.1) counters['not.a.counter'] = 5; // a name no release knows is ignored
      const channelSamples = random() < 0.3 ? 0 : 1 + int(600);
      const connectionSamples = random() < 0.3 ? 0 : 1 + int(600);
      const bucket: StatsBucket = {
        start: 0,
        counters,
        channelSamples,
        channelSum: channelSamples * int(50),
        channelMax: int(100),
        channelMin: int(10),
        connectionSamples,
        connectionSum: connectionSamples * int(50),
        connectionMax: int(100),
        connectionMin: int(10),
        lastSample: 0,
      };
      const elapsed = 1 + int(600);
      const total = elapsed + int(3);
      expect(JSON.stringify(flatEntries(bucket, elapsed, total))).toBe(JSON.stringify(specEntries(bucket, elapsed, total)));
    }
  });
});
