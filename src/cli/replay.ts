#!/usr/bin/env node
// Replay for audits: an app's records (one channel, a prefix or every channel; messages, presence,
// the app's own events) between two instants, read from the log itself (not from a projection), in
// log order, as NDJSON on stdout, with progress on stderr (on a terminal). The reading is
// src/audit/replay-scope.ts. A composition root of its own: it reads the configuration the service
// reads. `--help`: usage().
//
//   npm run -s replay -- --app <appId> --channel <name> [--include messages,presence,app-events] [--from <ms|ISO>] [--to <ms|ISO>]
//
// With KAFKA_BROKERS and CLICKHOUSE_URL set it reads Kafka, otherwise the embedded log in DATA_DIR.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { commandAsTyped, commandLine, isEntryPoint } from './command.js';
import { ConfigError, modeOf, parseConfig, type Config } from '../config.js';
import { checkDataDir, StartupError } from '../startup.js';
import { EmbeddedLog } from '../log/embedded/embedded-log.js';
import { KafkaLog } from '../log/kafka/kafka-log.js';
import { probeKafka } from '../log/kafka/kafka-probe.js';
import type { Log } from '../log/port.js';
import { loadAppsFile } from '../apps/apps-file.js';
import { loadDefaultApp } from '../apps/default-app.js';
import { appHasEvents, INCLUDES, replayScope, type ChannelScope, type Include, type ScopeProgress, type ScopeRequest } from '../audit/replay-scope.js';

export interface ReplayRequest extends ScopeRequest {}

/** The --help text, with the command as the user typed it (bin, npm script or node path). */
export const usage = (command = 'channel-messaging-replay'): string => `Usage: ${command} --app <appId> (--channel <name> | --prefix <p> | --all-channels) [--include <kinds>] [--from <time>] [--to <time>] [options]
${command.startsWith('npm ') ? '       (npm run -s keeps the npm banner out of the output)\n' : ''}
Writes an app's records with from <= time <= to, read from the log itself in log order (each
channel's in order), as NDJSON on stdout, one record a line: {"topic", "partition", "offset",
"time", "event", "credential"} (the credential: the key that published, its clientId and
connection, when the record names them). A progress bar on stderr when stderr is a terminal, and
a summary line on stderr at the end. Times are ms since the epoch or ISO 8601 dates
(2026-11-20T00:00:00Z). The log is read from DATA_DIR (embedded mode) or from Kafka when
KAFKA_BROKERS and CLICKHOUSE_URL are set, as the service reads them; nothing is created or written.

Options:
  --app <appId>              the application (required)
  --channel <name>           one channel
  --prefix <prefix>          every channel whose name starts with it
  --all-channels             every channel of the app
  --include <kinds>          comma-separated, of messages, presence, app-events (default messages);
                             app-events: apps and keys made, changed and revoked, token
                             revocations (never a secret), and need no channel option
  --keys                     the same as --include app-events
  --from <time>              earliest record time (default: the beginning)
  --to <time>                latest record time (default: the end)
  --data-dir <dir>           DATA_DIR (default ./data); it must exist
  --kafka-brokers <list>     KAFKA_BROKERS (with --clickhouse-url: read Kafka)
  --clickhouse-url <url>     CLICKHOUSE_URL
  --help, -h                 this text

Exit codes: 0 done (a warning on stderr when a prefix or every channel had nothing), 1 the log
could not be read, 2 bad arguments, 3 an unknown app, or a --channel with no record in the range.
`;

/** The command line, read by node:util parseArgs; a ConfigError says what is wrong. */
export function parseReplayArgs(argv: string[], env: Record<string, string | undefined>): { help: true } | { help: false; request: ReplayRequest; config: Config } {
  const { values } = commandLine({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      app: { type: 'string' },
      channel: { type: 'string' },
      prefix: { type: 'string' },
      'all-channels': { type: 'boolean' },
      include: { type: 'string' },
      keys: { type: 'boolean' },
      from: { type: 'string' },
      to: { type: 'string' },
      'data-dir': { type: 'string' },
      'kafka-brokers': { type: 'string' },
      'clickhouse-url': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return { help: true };
  const appId = values.app;
  if (!appId) throw new ConfigError('--app is required (see --help)');
  const include = new Set<Include>();
  if (values.keys) include.add('app-events');
  if (values.include !== undefined) {
    for (const kind of values.include.split(',').map((k) => k.trim())) {
      if (!(INCLUDES as readonly string[]).includes(kind)) throw new ConfigError(`--include takes ${INCLUDES.join(', ')} (comma-separated), not "${kind}"`);
      include.add(kind as Include);
    }
  } else if (!values.keys) include.add('messages');
  const chosen = [values.channel !== undefined, values.prefix !== undefined, values['all-channels'] === true].filter(Boolean).length;
  if (chosen > 1) throw new ConfigError('--channel, --prefix and --all-channels are one scope: give one of them');
  if (values.channel === '') throw new ConfigError('--channel must name a channel (see --help)');
  const channels: ChannelScope =
    values.channel !== undefined ? { kind: 'channel', name: values.channel } : values.prefix !== undefined ? { kind: 'prefix', prefix: values.prefix } : { kind: 'all' };
  if (chosen === 0 && (include.has('messages') || include.has('presence'))) {
    throw new ConfigError('--app and --channel are required (or --prefix, or --all-channels; see --help); with --include app-events alone, --app alone');
  }
  const time = (name: 'from' | 'to', fallback: number): number => {
    const v = values[name];
    if (v === undefined) return fallback;
    const n = /^\d+$/.test(v) ? Number(v) : /^\d{4}-\d{2}-\d{2}/.test(v) ? Date.parse(v) : NaN;
    if (!Number.isSafeInteger(n)) throw new ConfigError(`--${name} must be ms since the epoch or an ISO 8601 date (2026-11-20T00:00:00Z), not "${v}"`);
    return n;
  };
  const from = time('from', 0);
  const to = time('to', Number.MAX_SAFE_INTEGER);
  if (from > to) throw new ConfigError(`--from (${new Date(from).toISOString()}) is later than --to (${new Date(to).toISOString()})`);
  const config = parseConfig({
    ...env,
    ...(values['data-dir'] !== undefined ? { DATA_DIR: values['data-dir'] } : {}),
    ...(values['kafka-brokers'] !== undefined ? { KAFKA_BROKERS: values['kafka-brokers'] } : {}),
    ...(values['clickhouse-url'] !== undefined ? { CLICKHOUSE_URL: values['clickhouse-url'] } : {}),
  });
  return { help: false, request: { appId, channels, include, from, to }, config };
}

/** Nothing to replay: an app the service does not know, or a channel with no record in the range (exit 3). */
export class NothingToReplay extends Error {}

/** Whether the service knows the app: its configuration (APPS_FILE, DATA_DIR's default app) or the apps topic. */
async function knownApp(config: Config, log: Log, appId: string): Promise<boolean> {
  if (config.appsFile && existsSync(config.appsFile) && loadAppsFile(config.appsFile, Date.now()).some((a) => a.appId === appId)) return true;
  if (existsSync(config.dataDir) && loadDefaultApp(config.dataDir, { upgrade: false })?.appId === appId) return true;
  return appHasEvents(log, appId);
}

function progressLine(p: ScopeProgress): string {
  const width = 30;
  const done = p.total === 0 ? 1 : p.read / p.total;
  const bar = '#'.repeat(Math.round(done * width)).padEnd(width, '.');
  return `\r[${bar}] ${(done * 100).toFixed(1)}%  records read ${p.read}/${p.total}  ${p.found} found`;
}

/** The log to read, opened read-only in spirit: an existing embedded log, or Kafka within STARTUP_TIMEOUT_MS. */
async function openLog(config: Config): Promise<Log> {
  if (modeOf(config) === 'embedded') {
    checkDataDir(config.dataDir, { create: false });
    const path = join(config.dataDir, 'log.db');
    if (!existsSync(path)) throw new StartupError(`DATA_DIR=${config.dataDir} holds no log (${path} does not exist); is it the service's data directory?`);
    return new EmbeddedLog({ path, partitions: config.embeddedPartitions });
  }
  await probeKafka(config.kafkaBrokers!, config.kafkaClientId, config.startupTimeoutMs);
  return new KafkaLog({ brokers: config.kafkaBrokers!, clientId: `${config.kafkaClientId}-replay`, idempotent: false });
}

const write = (line: string): Promise<void> | undefined =>
  process.stdout.write(line) ? undefined : new Promise((resolve) => process.stdout.once('drain', () => resolve()));

const describeScope = (r: ReplayRequest): string => {
  const kinds = [...r.include].join(', ');
  const where = r.channels.kind === 'channel' ? `channel ${r.channels.name}` : r.channels.kind === 'prefix' ? `channels ${r.channels.prefix}*` : 'every channel';
  return `${kinds} of app ${r.appId}${r.include.has('messages') || r.include.has('presence') ? ` (${where})` : ''}`;
};

async function main(): Promise<number> {
  let parsed;
  try {
    parsed = parseReplayArgs(process.argv.slice(2), process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`replay: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  if (parsed.help) {
    process.stdout.write(usage(commandAsTyped('channel-messaging-replay')));
    return 0;
  }
  const { request, config } = parsed;
  const log = await openLog(config);
  const tty = process.stderr.isTTY === true;
  let last: ScopeProgress = { read: 0, total: 0, found: 0 };
  let shownAt = 0;
  try {
    if (!(await knownApp(config, log, request.appId))) {
      process.stderr.write(`replay: unknown app "${request.appId}": neither the configuration (APPS_FILE, DATA_DIR's default app) nor the ${modeOf(config)} log's apps topic names it\n`);
      return 3;
    }
    for await (const { line } of replayScope(log, request, (p) => {
      last = p;
      if (tty && (Date.now() - shownAt > 100 || p.read >= p.total)) {
        shownAt = Date.now();
        process.stderr.write(progressLine(p));
      }
    })) {
      await write(`${JSON.stringify(line)}\n`);
    }
  } finally {
    await log.close();
  }
  if (tty) process.stderr.write('\n');
  const range = `${request.from === 0 ? 'the beginning' : new Date(request.from).toISOString()} to ${request.to === Number.MAX_SAFE_INTEGER ? 'the end' : new Date(request.to).toISOString()}`;
  if (last.found === 0 && request.channels.kind === 'channel' && (request.include.has('messages') || request.include.has('presence'))) {
    process.stderr.write(`replay: no record of ${describeScope(request)} from ${range} in the ${modeOf(config)} log: an unknown channel, or none in the range (check --channel and the times)\n`);
    return 3;
  }
  if (last.found === 0) {
    process.stderr.write(`replay: warning: no record of ${describeScope(request)} from ${range} in the ${modeOf(config)} log (check the scope and the times)\n`);
  } else {
    process.stderr.write(`replay: ${last.found} records of ${describeScope(request)} from ${range}, ${last.read}/${last.total} log records read\n`);
  }
  return 0;
}

// Run only as a command (node, tsx or the bin link), not when a test imports replayChannel.
if (isEntryPoint(import.meta.url)) {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (err) => {
      process.stderr.write(`replay failed: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
