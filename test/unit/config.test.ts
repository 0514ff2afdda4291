import { describe, expect, it } from 'vitest';
import { ConfigError, modeOf, parseConfig } from '../../src/config.js';

describe('configuration', () => {
  it('defaults to the embedded mode on port 8080 with data in ./data', () => {
    const c = parseConfig({});
    expect(c.port).toBe(8080);
    expect(c.dataDir.endsWith('/data')).toBe(true);
    expect(modeOf(c)).toBe('embedded');
    expect(c.limits.maxMessageSize).toBe(65536);
  });

  it('LOG_RETENTION_HOURS: 96 by default, any whole number of hours from 72 (the longest history retention), also as a flag', () => {
    expect(parseConfig({}).logRetentionHours).toBe(96);
    expect(parseConfig({ LOG_RETENTION_HOURS: '72' }).logRetentionHours).toBe(72);
    expect(parseConfig({ LOG_RETENTION_HOURS: '8760' }).logRetentionHours).toBe(8760);
    expect(parseConfig({}, ['--log-retention-hours', '200']).logRetentionHours).toBe(200);
  });

  it('is production mode when both KAFKA_BROKERS and CLICKHOUSE_URL are set', () => {
    const c = parseConfig({ KAFKA_BROKERS: '127.0.0.1:9092', CLICKHOUSE_URL: 'http://127.0.0.1:8123' });
    expect(modeOf(c)).toBe('production');
    expect(c.kafkaBrokers).toEqual(['127.0.0.1:9092']);
  });

  it('command-line flags override the environment', () => {
    const c = parseConfig({ PORT: '1' }, ['--port', '9000', '--sandbox', '--data-dir=/tmp/x']);
    expect(c.port).toBe(9000);
    expect(c.sandbox).toBe(true);
    expect(c.dataDir).toBe('/tmp/x');
  });

  it.each([
    [{ PORT: 'abc' }, /PORT="abc" must be a whole number/],
    [{ KAFKA_BROKERS: 'localhost:9092' }, /set both KAFKA_BROKERS and CLICKHOUSE_URL/],
    [{ KAFKA_BROKERS: 'nope', CLICKHOUSE_URL: 'http://x:1' }, /must look like host:port/],
    [{ KAFKA_BROKERS: 'a:1,127.0.0.1:99999', CLICKHOUSE_URL: 'http://x:1' }, /KAFKA_BROKERS entry "127.0.0.1:99999" has port 99999: a port is from 1 to 65535/],
    [{ KAFKA_BROKERS: 'a:0', CLICKHOUSE_URL: 'http://x:1' }, /KAFKA_BROKERS entry "a:0" has port 0/],
    [{ KAFKA_BROKERS: 'a:1', CLICKHOUSE_URL: 'ftp://x' }, /must be an http\(s\) URL/],
    [{ SANDBOX: 'maybe' }, /SANDBOX="maybe" must be 1 or 0/],
    [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL="loud"/],
    [{ PERSISTED_RETENTION_HOURS: '12' }, /from 24 to 72/],
    [{ LOG_RETENTION_HOURS: '48' }, /^LOG_RETENTION_HOURS=48 is below the longest history retention \(72 hours/],
    [{ LOG_RETENTION_HOURS: 'week' }, /LOG_RETENTION_HOURS="week" must be a whole number of hours from 72 to 1000000/],
  ])('bad configuration %j fails with a message that says what to fix', (env, message) => {
    expect(() => parseConfig(env)).toThrowError(ConfigError);
    expect(() => parseConfig(env)).toThrowError(message);
  });

  it('channels: idle time defaults to the history window and may not exceed it; region and occupancy throttle', () => {
    expect(parseConfig({}).channels).toEqual({ idleMs: 120_000, occupancyThrottleMs: 1000, region: 'local' });
    expect(parseConfig({ HISTORY_TAIL_MS: '60000' }).channels.idleMs).toBe(60_000);
    expect(parseConfig({ CHANNEL_IDLE_MS: '15000', REGION: 'eu-west-1', CHANNEL_OCCUPANCY_THROTTLE_MS: '0' }).channels).toEqual({ idleMs: 15_000, occupancyThrottleMs: 0, region: 'eu-west-1' });
    expect(() => parseConfig({ CHANNEL_IDLE_MS: '130000' })).toThrowError(/CHANNEL_IDLE_MS \(130000\) must be at most HISTORY_TAIL_MS \(120000\)/);
    expect(() => parseConfig({ REGION: 'a b' })).toThrowError(ConfigError);
  });

  it('refuses unknown flags', () => {
    expect(() => parseConfig({}, ['--prot', '1'])).toThrowError(/unknown flag --prot/);
  });
});
