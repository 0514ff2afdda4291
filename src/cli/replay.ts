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
import { existsSync, readFileSync } from 'node:fs';
import { commandAsTyped, commandLine, isEntryPoint } from './command.js';
import { checkPathFlag, ConfigError, modeOf, parseConfig, type Config } from '../config.js';
import { existingEmbeddedLog } from '../log/embedded/existing-log.js';
import { EmbeddedLogReader } from '../log/embedded/embedded-log-reader.js';
import { KafkaLog } from '../log/kafka/kafka-log.js';
import { probeKafka } from '../log/kafka/kafka-probe.js';
import type { Log } from '../log/port.js';
import { loadAppsFile } from '../apps/apps-file.js';
import { loadDefaultApp } from '../apps/default-app.js';
import { CheckpointSigner, fingerprintOf, publicKeyBase64 } from '../audit/checkpoint.js';
import { exportWithProof, ExportFormatError, hasChains, verifyFile, verifyLog } from '../audit/proof.js';
import type { ChainVerifier } from '../audit/verify.js';
import { KeyringError, loadKeyring, type Keyring } from '../audit/keyring.js';
import { isKafkaChained, verifyKafkaLog, type KafkaChainedLog } from '../audit/kafka-verify.js';
import { exportKafkaWithProof } from '../audit/kafka-proof.js';
import { replayNdjson } from '../audit/ndjson.js';
import { appHasEvents, INCLUDES, type ChannelScope, type Include, type ScopeProgress, type ScopeRequest } from '../audit/replay-scope.js';

export interface ReplayRequest extends ScopeRequest {}

/** What the command does: replay (an export with --with-proof), verify the log, verify an export, or print the public key. */
export type ParsedReplay =
  | { help: true }
  | { help: false; mode: 'verify-file'; file: string; trust: Trust; requireSealed: boolean }
  | { help: false; mode: 'public-key'; config: Config }
  | { help: false; mode: 'replay' | 'verify'; request: ReplayRequest; config: Config; withProof: boolean; trust: Trust; requireSealed: boolean };

/** What the auditor trusts: --trust-key files, --keyring files or directories, --trust-fingerprint values. */
export interface Trust {
  keyFiles: string[];
  keyrings: string[];
  fingerprints: string[];
}

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

Tamper evidence (README: Replay for audits):
  --verify                   check the hash chains and signed checkpoints of every log partition
                             the scope reads (whole), instead of replaying; problems on stdout
                             (embedded: a chain per partition; Kafka: a chain per writing
                             instance and partition, in the records' headers)
  --with-proof               the replay as an export a third party can verify alone: a header, the
                             records of the scope with their value and links (Kafka: their chain
                             headers), the partitions' other records as digests, the signed
                             checkpoints and public keys
  --verify-file <export>     check such an export, with no service and no log
  --trust-key <file>         a public key (PEM) whose checkpoints are believed, repeatable
  --keyring <file|dir>       public keys (PEM) and/or fingerprints, one a line, in a file or in the
                             *.pem, *.pub and *.txt files of a directory: every instance's key
                             (each signs its own checkpoints), the retired ones too; repeatable
  --trust-fingerprint <fp>   a key's fingerprint (aa:bb:…, as --public-key prints it), repeatable
                             Without any of these: --verify trusts the key of AUDIT_KEY_FILE
                             (and of AUDIT_PREVIOUS_KEY_FILE after a rotation),
                             --verify-file the export's own keys (compare their fingerprints with
                             the ones the operator published). A key a trusted key endorsed
                             (AUDIT_PREVIOUS_KEY_FILE at a rotation) is trusted too.
  --require-sealed           exit 5 when records after the newest checkpoint of their chain are
                             covered by no signed checkpoint (a warning otherwise)
  --public-key               print the public key of AUDIT_KEY_FILE (PEM) and its fingerprint

Exit codes: 0 done (a warning on stderr when a prefix or every channel had nothing), 1 the log
could not be read, 2 bad arguments, 3 an unknown app, or a --channel with no record in the range
(--verify: none in the log),
4 the verification found a record changed or missing, or a checkpoint that does not match,
5 (--require-sealed) nothing wrong, but records are not covered by any signed checkpoint yet.
`;

/** The command line, read by node:util parseArgs; a ConfigError says what is wrong. */
export function parseReplayArgs(argv: string[], env: Record<string, string | undefined>): ParsedReplay {
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
      verify: { type: 'boolean' },
      'with-proof': { type: 'boolean' },
      'verify-file': { type: 'string' },
      'trust-key': { type: 'string', multiple: true },
      keyring: { type: 'string', multiple: true },
      'trust-fingerprint': { type: 'string', multiple: true },
      'require-sealed': { type: 'boolean' },
      'public-key': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return { help: true };
  checkPathFlag('data-dir', values['data-dir']);
  const trust: Trust = { keyFiles: values['trust-key'] ?? [], keyrings: values.keyring ?? [], fingerprints: values['trust-fingerprint'] ?? [] };
  for (const fp of trust.fingerprints) {
    if (!/^[0-9a-f]{2}(:[0-9a-f]{2}){15}$/i.test(fp)) throw new ConfigError(`--trust-fingerprint takes a key's fingerprint, 16 hex pairs (aa:bb:…), as --public-key prints it, not "${fp}"`);
  }
  const requireSealed = values['require-sealed'] === true;
  if (values['verify-file'] !== undefined) {
    if (values.app !== undefined || values.verify || values['with-proof']) throw new ConfigError('--verify-file reads only the export (and the keys to trust): no --app, --verify or --with-proof with it');
    return { help: false, mode: 'verify-file', file: values['verify-file'], trust, requireSealed };
  }
  if (requireSealed && !values.verify) throw new ConfigError('--require-sealed goes with --verify or --verify-file');
  if (values.verify && values['with-proof']) throw new ConfigError('--verify checks the log, --with-proof writes an export: one of them');
  const config = (): Config =>
    parseConfig({
      ...env,
      ...(values['data-dir'] !== undefined ? { DATA_DIR: values['data-dir'] } : {}),
      ...(values['kafka-brokers'] !== undefined ? { KAFKA_BROKERS: values['kafka-brokers'] } : {}),
      ...(values['clickhouse-url'] !== undefined ? { CLICKHOUSE_URL: values['clickhouse-url'] } : {}),
    });
  if (values['public-key']) return { help: false, mode: 'public-key', config: config() };
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
  return { help: false, mode: values.verify ? 'verify' : 'replay', request: { appId, channels, include, from, to }, config: config(), withProof: values['with-proof'] === true, trust, requireSealed };
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

/**
 * The log to read: an existing embedded log, read-only and from one snapshot (beside a running
 * service: nothing written, its partition counts as stored whatever EMBEDDED_PARTITIONS says, its
 * retention's deletes meanwhile unseen), or Kafka within STARTUP_TIMEOUT_MS.
 */
async function openLog(config: Config): Promise<Log> {
  if (modeOf(config) === 'embedded') return new EmbeddedLogReader({ path: existingEmbeddedLog(config.dataDir), snapshot: true });
  await probeKafka(config.kafkaBrokers!, config.kafkaClientId, config.startupTimeoutMs);
  // A reader: a topic missing (another cluster, or one the service never started on) is an error, never made.
  return new KafkaLog({ brokers: config.kafkaBrokers!, clientId: `${config.kafkaClientId}-replay`, idempotent: false, createTopics: false });
}

const write = (text: string | Uint8Array): Promise<void> | undefined =>
  process.stdout.write(text) ? undefined : new Promise((resolve) => process.stdout.once('drain', () => resolve()));

/** A chunk written whole (its callback called): its buffer may be written again (replayNdjson's reuseChunks). */
const written = (chunk: Uint8Array): Promise<void> => new Promise((resolve, reject) => void process.stdout.write(chunk, (err) => (err ? reject(err) : resolve())));

/** The keys to trust: the --trust-key files, keyrings and fingerprints, else (`fallback`) the service's own (undefined: none given). */
function trustedKeys(trust: Trust, fallback: () => string[] | undefined): Keyring | undefined {
  if (trust.keyFiles.length === 0 && trust.keyrings.length === 0 && trust.fingerprints.length === 0) {
    const keys = fallback();
    return keys && { keys: new Set(keys), fingerprints: new Set() };
  }
  const ring: Keyring = { keys: new Set(), fingerprints: new Set(trust.fingerprints.map((f) => f.toLowerCase())) };
  for (const file of trust.keyFiles) {
    try {
      ring.keys.add(publicKeyBase64(readFileSync(file, 'utf8')));
    } catch (err) {
      throw new ConfigError(`--trust-key ${file}: not an Ed25519 public key in PEM (${(err as Error).message.split('\n')[0]})`);
    }
  }
  try {
    for (const path of trust.keyrings) loadKeyring(path, ring);
  } catch (err) {
    if (err instanceof KeyringError) throw new ConfigError(err.message);
    throw err;
  }
  return ring;
}

function report(verifier: ChainVerifier, what: string, requireSealed: boolean): number {
  for (const problem of verifier.problems) process.stdout.write(`${problem}\n`);
  const tails = verifier.unsignedTails();
  const list = (of: typeof tails): string => of.map((t) => `${t.chain} ${t.unit} ${t.from} to ${t.to}`).join(', ');
  const total = (of: typeof tails): number => of.reduce((n, t) => n + t.count, 0);
  const after = tails.filter((t) => !t.neverSigned);
  const never = tails.filter((t) => t.neverSigned);
  if (after.length > 0) {
    // What no signature covers yet: a cut of these records would leave no trace (README: what is and is not provable).
    process.stderr.write(`replay: warning: ${total(after)} records are covered by no signed checkpoint (after the newest one of their chain): ${list(after)}\n`);
  }
  if (never.length > 0) {
    // Kafka: a writer id no trusted checkpoint names is what records produced by someone else look like.
    process.stderr.write(
      `replay: warning: ${total(never)} records are of writers no signed checkpoint names at all (an instance that stopped before its first checkpoint, or records produced by something other than the service under a writer id of its own: nothing proves the service accepted them): ${list(never)}\n`,
    );
  }
  if (verifier.problemTotal > 0) {
    process.stderr.write(`replay: verification FAILED for ${what}: ${verifier.problemTotal} problems; ${verifier.summary()}\n`);
    return 4;
  }
  process.stderr.write(`replay: verified ${what}: ${verifier.summary()}\n`);
  if (requireSealed && tails.length > 0) {
    process.stderr.write('replay: not sealed (--require-sealed): verify again after the next checkpoint (AUDIT_CHECKPOINT_INTERVAL_MS), or after a graceful stop of the service\n');
    return 5;
  }
  return 0;
}

async function verifyWhereLogIs(log: Log, request: ReplayRequest, trust: Trust, requireSealed: boolean, config: Config, tty: boolean): Promise<number> {
  // By default the service's own keys: AUDIT_KEY_FILE's, and after a rotation the retired one's (its checkpoints are in the log too).
  const ownKeys = (): string[] | undefined => {
    const keys = [config.auditKeyFile, config.auditPreviousKeyFile].filter((f): f is string => f !== undefined && existsSync(f)).map((f) => CheckpointSigner.load(f).publicKey);
    return keys.length > 0 ? keys : undefined;
  };
  const trusted = trustedKeys(trust, ownKeys);
  if (!trusted) throw new ConfigError(`no key to trust: AUDIT_KEY_FILE (${config.auditKeyFile}) does not exist here; pass the instances' public keys (--keyring, --trust-key or --trust-fingerprint)`);
  let read = 0;
  const onRecords = (n: number): void => {
    read += n;
    if (tty) process.stderr.write(`\rverifying: ${read} records`);
  };
  let verifier: ChainVerifier;
  if (hasChains(log)) verifier = await verifyLog(log, request, trusted, onRecords);
  else if (isKafkaChained(log)) {
    const kafka = await verifyKafkaLog(log, request, trusted, onRecords);
    if (tty) process.stderr.write('\n');
    return unknownChannel(kafka, request, config, report(kafka, `the kafka log's partitions of ${describeScope(request)} (${kafka.writerCount()} writers' chains)`, requireSealed));
  } else throw new ConfigError(`the ${log.kind} log keeps no hash chain`);
  if (tty) process.stderr.write('\n');
  return unknownChannel(verifier, request, config, report(verifier, `the ${modeOf(config)} log's partitions of ${describeScope(request)}`, requireSealed));
}

/**
 * --verify --channel of a channel the verified partitions hold no record of: exit 3 after the
 * verification's report, as the replay of it exits (a mistyped name verified its partition and
 * said nothing of the channel). A verification that failed keeps its exit 4.
 */
function unknownChannel(verifier: ChainVerifier, request: ReplayRequest, config: Config, code: number): number {
  if (code === 4 || request.channels.kind !== 'channel' || verifier.inScope > 0) return code;
  if (!request.include.has('messages') && !request.include.has('presence')) return code;
  process.stderr.write(`replay: no record of ${describeScope(request)} in the ${modeOf(config)} log's partition of it: an unknown channel (check --channel)\n`);
  return 3;
}

async function verifyExport(file: string, trust: Trust, requireSealed: boolean): Promise<number> {
  if (!existsSync(file)) throw new ConfigError(`--verify-file ${file}: no such file`);
  const trusted = trustedKeys(trust, () => undefined);
  try {
    const { verifier, publicKeys } = await verifyFile(file, trusted);
    if (!trusted) process.stderr.write(`replay: trusting the export's own keys (${publicKeys.map(fingerprintOf).join(', ') || 'none'}): compare with the fingerprint the operator published, or pass --trust-key\n`);
    if (verifier.checkpoints === 0) verifier.report(`no checkpoint: ${file} holds no signed checkpoint, so nothing proves its records are the ones the service accepted`);
    return report(verifier, file, requireSealed);
  } catch (err) {
    if (err instanceof ExportFormatError) {
      process.stderr.write(`replay: ${err.message}\n`);
      return 4;
    }
    throw err;
  }
}

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
  if (parsed.mode === 'verify-file') return verifyExport(parsed.file, parsed.trust, parsed.requireSealed);
  if (parsed.mode === 'public-key') {
    const signer = CheckpointSigner.load(parsed.config.auditKeyFile);
    process.stdout.write(signer.publicKeyPem());
    process.stderr.write(`replay: the public key of ${parsed.config.auditKeyFile}, fingerprint ${signer.fingerprint}\n`);
    return 0;
  }
  const { request, config } = parsed;
  const log = await openLog(config);
  const tty = process.stderr.isTTY === true;
  let last: ScopeProgress = { read: 0, total: 0, found: 0 };
  let shownAt = 0;
  try {
    if (parsed.withProof && !hasChains(log) && !isKafkaChained(log)) throw new ConfigError(`the ${log.kind} log keeps no hash chain: no export with proof`);
    if (!(await knownApp(config, log, request.appId))) {
      process.stderr.write(`replay: unknown app "${request.appId}": neither the configuration (APPS_FILE, DATA_DIR's default app) nor the ${modeOf(config)} log's apps topic names it\n`);
      return 3;
    }
    const show = (p: ScopeProgress): void => {
      last = p;
      if (tty && (Date.now() - shownAt > 100 || p.read >= p.total)) {
        shownAt = Date.now();
        process.stderr.write(progressLine(p));
      }
    };
    if (parsed.mode === 'verify') return await verifyWhereLogIs(log, request, parsed.trust, parsed.requireSealed, config, tty);
    if (parsed.withProof) {
      const lines = hasChains(log) ? exportWithProof(log, request, show) : exportKafkaWithProof(log as Log & KafkaChainedLog, request, show);
      for await (const text of lines) await write(text);
    } else {
      for await (const chunk of replayNdjson(log, request, show, true)) await written(chunk);
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
  if (last.foreign) {
    process.stderr.write(`replay: warning: ${last.foreign} records of ${describeScope(request)} are not the service's events (undecodable, or of another shape: another producer's), left out: replay --verify names them\n`);
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
  // The reader of stdout went away (`replay ... | head`, or a pipe whose other end failed): the
  // output is incomplete, so say so in one line and end as a process killed by SIGPIPE does (exit
  // code 141, what shells expect of a pipeline's writer), not with a stack trace.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
    process.stderr.write('replay: stdout was closed before the end (EPIPE): the output is incomplete\n');
    process.exit(141);
  });
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (err) => {
      if (err instanceof ConfigError) {
        process.stderr.write(`replay: ${err.message}\n`);
        process.exitCode = 2;
        return;
      }
      process.stderr.write(`replay failed: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
