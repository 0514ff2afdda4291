// Latencies in µs as counts in log-spaced buckets (about 1.4% wide), so that load-generator
// children can record every delivery and the bench can add their histograms up.
const PER_DOUBLING = 50;
const BUCKETS = PER_DOUBLING * 26; // up to 2^26 µs, 67 s

export class LatencyHistogram {
  readonly counts: number[];
  total = 0;
  max = 0;

  constructor(counts?: number[]) {
    this.counts = counts ?? new Array<number>(BUCKETS).fill(0);
    for (const n of this.counts) this.total += n;
  }

  add(us: number): void {
    const v = Math.max(1, us);
    this.counts[Math.min(BUCKETS - 1, Math.floor(Math.log2(v) * PER_DOUBLING))]++;
    this.total++;
    if (v > this.max) this.max = v;
  }

  merge(other: { counts: number[]; max: number }): void {
    for (let i = 0; i < BUCKETS; i++) {
      this.counts[i] += other.counts[i];
      this.total += other.counts[i];
    }
    this.max = Math.max(this.max, other.max);
  }

  /** ms, the middle of the bucket holding the p-th percentile; NaN when empty. */
  percentileMs(p: number): number {
    if (this.total === 0) return Number.NaN;
    const rank = Math.ceil((p / 100) * this.total);
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.counts[i];
      if (seen >= rank) return 2 ** ((i + 0.5) / PER_DOUBLING) / 1000;
    }
    return this.max / 1000;
  }

  reset(): void {
    this.counts.fill(0);
    this.total = 0;
    this.max = 0;
  }
}
