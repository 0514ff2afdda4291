// Replay for audits: one channel's messages between two instants, read from the log itself (not
// from a projection), in log order, as NDJSON on stdout, with progress on stderr. A composition
// root of its own: it reads the configuration the service reads.
//
//   npm run replay -- --app <appId> --channel <name> [--from <ms>] [--to <ms>] [--data-dir ./data]
//
// With KAFKA_BROKERS and CLICKHOUSE_URL set it reads Kafka, otherwise the embedded log in DATA_DIR.
import pino from 'pino';
import { ConfigError, modeOf, parseConfig } from '../config.js';
import { adaptersFor } from '../service.js';
import { Topics, type Log } from '../log/port.js';
import { channelKey, decodeEvent } from '../log/events.js';
import { partitionFor } from '../log/partitioner.js';
import { messageToWire } from '../messages/wire.js';

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

function parseArgs(argv: string[]): { request: ReplayRequest; rest: string[] } {
  const take = (name: string): string | undefined => {
    const i = argv.indexOf(`--${name}`);
    if (i < 0) return undefined;
    const value = argv[i + 1];
    argv.splice(i, 2);
    if (value === undefined) throw new ConfigError(`--${name} needs a value`);
    return value;
  };
  const appId = take('app');
  const channel = take('channel');
  const time = (name: string, fallback: number): number => {
    const v = take(name);
    if (v === undefined) return fallback;
    const n = /^\d+$/.test(v) ? Number(v) : Date.parse(v);
    if (Number.isNaN(n)) throw new ConfigError(`--${name} must be ms since the epoch or an ISO date, not "${v}"`);
    return n;
  };
  const from = time('from', 0);
  const to = time('to', Number.MAX_SAFE_INTEGER);
  if (!appId || !channel) throw new ConfigError('usage: npm run replay -- --app <appId> --channel <name> [--from <ms|ISO>] [--to <ms|ISO>]');
  return { request: { appId, channel, from, to }, rest: argv };
}

function progressLine(p: ReplayProgress): string {
  const width = 30;
  const done = p.end === 0 ? 1 : p.offset / p.end;
  const bar = '#'.repeat(Math.round(done * width)).padEnd(width, '.');
  return `\r[${bar}] ${(done * 100).toFixed(1)}%  offset ${p.offset}/${p.end}  ${p.found} messages`;
}

async function main(): Promise<void> {
  let parsed;
  let config;
  try {
    parsed = parseArgs(process.argv.slice(2));
    config = parseConfig(process.env, parsed.rest);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const logger = pino({ level: 'warn' }, pino.destination(2));
  const adapters = await adaptersFor(config, logger, { lock: false }); // reads beside a running service
  process.stderr.write(`replaying ${parsed.request.appId}/${parsed.request.channel} from the ${modeOf(config)} log\n`);
  let last = 0;
  try {
    for await (const message of replayChannel(adapters.log, parsed.request, (p) => {
      if (Date.now() - last > 100 || p.offset >= p.end) {
        last = Date.now();
        process.stderr.write(progressLine(p));
      }
    })) {
      process.stdout.write(`${JSON.stringify(message)}\n`);
    }
    process.stderr.write('\n');
  } finally {
    await adapters.log.close();
    await adapters.close?.();
  }
}

// Run only as a command, not when a test imports replayChannel.
if (process.argv[1] && /replay\.[tj]s$/.test(process.argv[1])) {
  main().catch((err) => {
    process.stderr.write(`replay failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
