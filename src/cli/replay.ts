#!/usr/bin/env node
// Replay for audits: one channel's messages between two instants, read from the log itself (not
// from a projection), in log order, as NDJSON on stdout, with progress on stderr (on a terminal).
// A composition root of its own: it reads the configuration the service reads. `--help`: usage().
//
//   npm run -s replay -- --app <appId> --channel <name> [--from <ms|ISO>] [--to <ms|ISO>] [--data-dir ./data]
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
import { Topics, type Log } from '../log/port.js';
import { decodeEvent } from '../log/event-codec.js';
import { channelKey, partitionFor } from '../log/partitioner.js';
import { messageToWire } from '../codec/message-wire.js';
import { replayKeyEvents } from '../apps/key-history.js';

export interface ReplayRequest {
  appId: string;
  channel: string;
  from: number;
  to: number;
}

export interface ReplayProgress {
  offset: number;
  end: number;
  found: number;
}

/**
 * Streams the channel's messages with from <= timestamp <= to, in log order. The channel's events
 * are all in one partition (the log key is app + channel), so one partition is read, start to end.
 */
export async function* replayChannel(
  log: Log,
  request: ReplayRequest,
  onProgress: (p: ReplayProgress) => void = () => {},
  batch = 5000,
): AsyncGenerator<Record<string, unknown>> {
  const key = channelKey(request.appId, request.channel);
  const partition = partitionFor(key, await log.partitions(Topics.messages));
  const end = (await log.endOffsets(Topics.messages)).get(partition) ?? 0;
  let found = 0;
  for (let offset = 0; offset < end; ) {
    const records = await log.read(Topics.messages, partition, offset, Math.min(batch, end - offset));
    if (records.length === 0) break;
    for (const record of records) {
      if (record.key !== key) continue;
      const event = decodeEvent(record.value);
      if (event.type !== 'messages.published') continue;
      for (const message of event.messages) {
        if (message.timestamp < request.from || message.timestamp > request.to) continue;
        found++;
        yield { ...messageToWire(message, 'json'), offset: record.offset };
      }
    }
    offset = records[records.length - 1].offset + 1;
    onProgress({ offset, end, found });
  }
}

/** The --help text, with the command as the user typed it (bin, npm script or node path). */
export const usage = (command = 'channel-messaging-replay'): string => `Usage: ${command} --app <appId> --channel <name> [--from <time>] [--to <time>] [options]
${command.startsWith('npm ') ? '       (npm run -s keeps the npm banner out of the output)\n' : ''}
Writes one channel's messages with from <= timestamp <= to, read from the log itself in log order,
as NDJSON on stdout (one message a line, with its log offset); a progress bar on stderr when stderr
is a terminal, and a summary line on stderr at the end. Times are ms since the epoch or ISO 8601
dates (2026-11-20T00:00:00Z). The log is read from DATA_DIR (embedded mode) or from Kafka when
KAFKA_BROKERS and CLICKHOUSE_URL are set, as the service reads them; nothing is created or written.

Options:
  --app <appId>              the application (required)
  --channel <name>           the channel (required, unless --keys)
  --keys                     the app's key history instead: keys made, changed and revoked (key
                             management), and token revocations, from the apps topic; no secrets
  --from <time>              earliest timestamp (default: the beginning)
  --to <time>                latest timestamp (default: the end)
  --data-dir <dir>           DATA_DIR (default ./data); it must exist
  --kafka-brokers <list>     KAFKA_BROKERS (with --clickhouse-url: read Kafka)
  --clickhouse-url <url>     CLICKHOUSE_URL
  --help, -h                 this text

Exit codes: 0 done (a warning on stderr when nothing matched), 1 the log could not be read,
2 bad arguments.
`;

/** The command line, read by node:util parseArgs; a ConfigError says what is wrong. */
export function parseReplayArgs(argv: string[], env: Record<string, string | undefined>): { help: true } | { help: false; request: ReplayRequest; config: Config; keys: boolean } {
  const { values } = commandLine({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      app: { type: 'string' },
      channel: { type: 'string' },
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
  const { app: appId, keys = false } = values;
  const channel = values.channel ?? '';
  if (!appId || (!channel && !keys)) throw new ConfigError('--app and --channel are required (see --help); with --keys, --app alone');
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
  return { help: false, request: { appId, channel, from, to }, config, keys };
}

function progressLine(p: ReplayProgress): string {
  const width = 30;
  const done = p.end === 0 ? 1 : p.offset / p.end;
  const bar = '#'.repeat(Math.round(done * width)).padEnd(width, '.');
  return `\r[${bar}] ${(done * 100).toFixed(1)}%  offset ${p.offset}/${p.end}  ${p.found} messages`;
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
  if (parsed.keys) {
    let events = 0;
    try {
      for await (const event of replayKeyEvents(log, request.appId)) {
        events++;
        await write(`${JSON.stringify(event)}\n`);
      }
    } finally {
      await log.close();
    }
    process.stderr.write(`replay: ${events} key events of app ${request.appId}\n`);
    return 0;
  }
  const tty = process.stderr.isTTY === true;
  const where = `${request.appId}/${request.channel}`;
  let last: ReplayProgress = { offset: 0, end: 0, found: 0 };
  let shownAt = 0;
  try {
    for await (const message of replayChannel(log, request, (p) => {
      last = p;
      if (tty && (Date.now() - shownAt > 100 || p.offset >= p.end)) {
        shownAt = Date.now();
        process.stderr.write(progressLine(p));
      }
    })) {
      await write(`${JSON.stringify(message)}\n`);
    }
  } finally {
    await log.close();
  }
  if (tty) process.stderr.write('\n');
  const range = `${request.from === 0 ? 'the beginning' : new Date(request.from).toISOString()} to ${request.to === Number.MAX_SAFE_INTEGER ? 'the end' : new Date(request.to).toISOString()}`;
  if (last.found === 0) {
    process.stderr.write(`replay: warning: no messages of ${where} from ${range} in the ${modeOf(config)} log (check --app, --channel and the times)\n`);
  } else {
    process.stderr.write(`replay: ${last.found} messages of ${where} from ${range}, log offsets read ${last.offset}/${last.end}\n`);
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
