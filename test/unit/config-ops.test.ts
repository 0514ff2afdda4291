// The command line and the operations settings (issue 13): node:util parseArgs, --help, HOST,
// CORS_ORIGINS, KAFKA_IDEMPOTENT=auto, readiness, startup and shutdown bounds.
import { describe, expect, it } from 'vitest';
import { ConfigError, parseCommandLine, parseConfig, serviceUsage } from '../../src/config.js';

describe('the service command line', () => {
  it('--help and -h are seen; flags map to their variables; --sandbox takes no value', () => {
    expect(parseCommandLine(['--help']).help).toBe(true);
    expect(parseCommandLine(['-h']).help).toBe(true);
    expect(parseCommandLine(['--port', '9000', '--sandbox', '--data-dir=/tmp/x'])).toEqual({ help: false, flags: { PORT: '9000', SANDBOX: '1', DATA_DIR: '/tmp/x' } });
  });

  it('refuses a positional argument, a flag without its value and an unknown flag, pointing to --help', () => {
    expect(() => parseCommandLine(['serve'])).toThrowError(/unexpected argument "serve"; flags look like --port 8080 \(see --help\)/);
    expect(() => parseCommandLine(['--port'])).toThrowError(ConfigError);
    expect(() => parseCommandLine(['--port'])).toThrowError(/--port <value>.*\(see --help\)/);
    expect(() => parseCommandLine(['--prot', '1'])).toThrowError(/unknown flag --prot \(see --help\)/);
  });

  it('--help lists every flag with its variable', () => {
    const usage = serviceUsage();
    for (const [flag, variable] of [['port', 'PORT'], ['apps-file', 'APPS_FILE'], ['cors-origins', 'CORS_ORIGINS'], ['shutdown-timeout-ms', 'SHUTDOWN_TIMEOUT_MS'], ['kafka-idempotent', 'KAFKA_IDEMPOTENT']]) {
      expect(usage).toMatch(new RegExp(`--${flag}( <value>)?\\s+${variable}\\s`));
    }
  });
});

describe('operations settings', () => {
  it('defaults: any origin, READY_MAX_LAG 10000, 30 s startup, 15 s shutdown, idempotence auto', () => {
    const c = parseConfig({});
    expect(c).toMatchObject({ corsOrigins: true, readyMaxLag: 10_000, startupTimeoutMs: 30_000, shutdownTimeoutMs: 15_000, kafkaIdempotent: 'auto' });
  });

  it('CORS_ORIGINS: a list of origins, or none', () => {
    expect(parseConfig({ CORS_ORIGINS: 'https://a.example, http://localhost:3000' }).corsOrigins).toEqual(['https://a.example', 'http://localhost:3000']);
    expect(parseConfig({ CORS_ORIGINS: 'none' }).corsOrigins).toBe(false);
    expect(() => parseConfig({ CORS_ORIGINS: 'https://a.example/path' })).toThrowError(/must be an origin/);
  });

  it('KAFKA_IDEMPOTENT: auto, 1 or 0, nothing else', () => {
    expect(parseConfig({ KAFKA_IDEMPOTENT: 'auto' }).kafkaIdempotent).toBe('auto');
    expect(parseConfig({ KAFKA_IDEMPOTENT: '1' }).kafkaIdempotent).toBe(true);
    expect(parseConfig({ KAFKA_IDEMPOTENT: '0' }).kafkaIdempotent).toBe(false);
    expect(() => parseConfig({ KAFKA_IDEMPOTENT: 'maybe' })).toThrowError(/KAFKA_IDEMPOTENT="maybe"/);
  });

  it('HOST: an IP address or a host name', () => {
    for (const host of ['0.0.0.0', '::', '127.0.0.1', 'localhost', 'svc.internal']) expect(parseConfig({ HOST: host }).host).toBe(host);
    for (const host of ['not a host', 'http://x', 'a:b']) expect(() => parseConfig({ HOST: host })).toThrowError(/HOST=".*" must be an IP address/);
  });

  it('bounds of the timeouts and the lag', () => {
    expect(() => parseConfig({ SHUTDOWN_TIMEOUT_MS: '10' })).toThrowError(/SHUTDOWN_TIMEOUT_MS="10" must be a whole number from 100/);
    expect(() => parseConfig({ STARTUP_TIMEOUT_MS: 'soon' })).toThrowError(/STARTUP_TIMEOUT_MS/);
    expect(() => parseConfig({ READY_MAX_LAG: '-1' })).toThrowError(/READY_MAX_LAG/);
  });
});
