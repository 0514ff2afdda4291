import { defineConfig } from 'vitest/config';

// Test tiers live in folders: unit/, contract/, http/ are fast; e2e/ and sdk/ start real servers
// and (with infrastructure) Kafka and ClickHouse, so they get longer timeouts; faults/ starts its own
// Kafka mock broker and clickhouse-server per file and takes them down under load (about a minute).
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    pool: 'forks',
    reporters: ['default', './test/helpers/summary-reporter.ts'],
  },
});
