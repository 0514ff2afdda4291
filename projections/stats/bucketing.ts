import { addCounters, bucketStart, type Counters, type StatsBucket, type Unit } from './stats-sample.js';

/** One 6-second sample summed over partitions and topics. */
export interface SampleTotal {
  interval: number;
  counters: Counters;
  channels: number;
}

/**
 * Folds samples (oldest first) into unit buckets: counters add up; channel samples give peak
 * (largest sample), min and a sum for the mean, so a peak of an hour is its largest 6-second
 * sample, not a sum.
 */
export function toBuckets(samples: Iterable<SampleTotal>, unit: Unit): StatsBucket[] {
  const buckets: StatsBucket[] = [];
  let current: StatsBucket | undefined;
  for (const s of samples) {
    const start = bucketStart(s.interval, unit);
    if (!current || current.start !== start) {
      current = { start, counters: {}, channelSamples: 0, channelSum: 0, channelMax: 0, channelMin: Infinity, lastSample: s.interval };
      buckets.push(current);
    }
    addCounters(current.counters, s.counters);
    if (s.channels > 0) {
      current.channelSamples++;
      current.channelSum += s.channels;
      current.channelMax = Math.max(current.channelMax, s.channels);
      current.channelMin = Math.min(current.channelMin, s.channels);
    }
    current.lastSample = Math.max(current.lastSample, s.interval);
  }
  for (const b of buckets) if (b.channelMin === Infinity) b.channelMin = 0;
  return buckets;
}
