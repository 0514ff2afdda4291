#!/usr/bin/env node
// Key management from the command line: create, list, update and revoke an app's keys. A
// composition root of its own. `--help`: usage().
//
// Through a running service (the default): the admin route /apps/<appId>/keys, with a management
// key, so the change is an event on the log that every instance applies. With --direct, when the
// embedded service is stopped: the same change appended to DATA_DIR's log by this process (it
// takes the data directory's lock, so it refuses while the service runs: two writers on one
// embedded log would assign the same offsets). Kafka always goes through a running instance.
import { checkPathFlag, ConfigError, modeOf, parseConfig, type Config } from '../config.js';
import { ServiceError } from '../errors.js';
import { systemClock } from '../clock.js';
import { StartupError } from '../startup.js';
import { existingEmbeddedLog } from '../log/embedded/existing-log.js';
import { Topics } from '../log/port.js';
import { encodeEvent } from '../log/event-codec.js';
import { eventOf } from '../log/event-shape.js';
import { EmbeddedLog } from '../log/embedded/embedded-log.js';
import { commandAsTyped, commandLine, isEntryPoint } from './command.js';
import { DataDirLock, DataDirLockedError } from '../log/embedded/data-dir-lock.js';
import { configuredApps } from '../apps/configured-apps.js';
import { loadDefaultApp } from '../apps/default-app.js';
import { keyString } from '../domain/app.js';
import { KeyAdmin, keyView, parseKeyChanges, type KeyChanges } from '../apps/key-admin.js';
import { AppRegistry } from '../../projections/apps/app-registry.js';

const usage = (command: string): string => `Usage: ${command} <command> [options]
       npm run -s keys -- <command> [options]      (-s: no npm banner in the output)

Manages an application's keys. Every change is an event on the log's apps topic: every instance
applies it, a restart keeps it, and \`replay --keys\` shows it.

Commands:
  create                     make a key; prints it once, as appId.keyId:secret, on stdout
  list                       the app's keys (never their secrets)
  update <keyId>             change a key's --name, --capability, --revocable-tokens or --management
  revoke <keyId>             revoke a key for good: it answers 40131, its tokens 40141, and its
                             realtime connections end, on every instance
  (<keyId> is the part after "appId.", or the whole key name)

Options:
  --name <label>             a label for people
  --capability <json>        what the key may do, e.g. '{"*":["stats"]}' (create: default {"*":["*"]})
  --revocable-tokens, --no-revocable-tokens
                             whether the tokens the key issues can be revoked (revokeTokens)
  --management, --no-management
                             whether the key may manage the app's keys (this command, the route)
  --app <appId>              the application (default: the management key's)
  --json                     print JSON (the route's answer) instead of text
  --url <url>                the running service (default SERVICE_URL, else http://localhost:PORT,
                             PORT default 8080)
  --key <appId.keyId:secret> a key with the management right (default MANAGEMENT_KEY, else the
                             default app's root key from DATA_DIR/default-app.json)
  --direct                   append to the embedded log in DATA_DIR instead, while the service is
                             stopped (no key needed: access to DATA_DIR is the authority)
  --data-dir <dir>           DATA_DIR (default ./data)
  --apps-file <file>         APPS_FILE, as the service reads it (with --direct)
  --help, -h                 this text

Examples:
  npm run -s keys -- create --name analyst --capability '{"*":["stats"]}'
  npm run -s keys -- create --name backend --revocable-tokens
  npm run -s keys -- list
  npm run -s keys -- update k3Yx9a --capability '{"rooms:*":["publish","subscribe"]}'
  npm run -s keys -- revoke k3Yx9a

Exit codes: 0 done, 1 refused or failed (the service's error on stderr), 2 bad arguments.
`;

const COMMANDS = ['create', 'list', 'update', 'revoke'] as const;
type Command = (typeof COMMANDS)[number];

export interface KeysRequest {
  command: Command;
  keyId?: string;
  changes: KeyChanges;
  appId?: string;
  json: boolean;
  direct: boolean;
  url: string;
  managementKey?: string;
  config: Config;
}

/** The command line, read by node:util parseArgs; a ConfigError says what is wrong. */
export function parseKeysArgs(argv: string[], env: Record<string, string | undefined>): { help: true } | ({ help: false } & KeysRequest) {
  const { values, positionals } = commandLine({
    args: argv,
    strict: true,
    allowPositionals: true,
    options: {
      name: { type: 'string' },
      capability: { type: 'string' },
      'revocable-tokens': { type: 'boolean' },
      'no-revocable-tokens': { type: 'boolean' },
      management: { type: 'boolean' },
      'no-management': { type: 'boolean' },
      app: { type: 'string' },
      json: { type: 'boolean' },
      url: { type: 'string' },
      key: { type: 'string' },
      direct: { type: 'boolean' },
      'data-dir': { type: 'string' },
      'apps-file': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return { help: true };
  checkPathFlag('data-dir', values['data-dir']);
  checkPathFlag('apps-file', values['apps-file']);
  const [command, keyId, ...rest] = positionals;
  const isCommand = (c: string | undefined): c is Command => (COMMANDS as readonly (string | undefined)[]).includes(c);
  if (!isCommand(command)) {
    throw new ConfigError(command === undefined ? `give a command: ${COMMANDS.join(', ')} (see --help)` : `unknown command "${command}": ${COMMANDS.join(', ')} (see --help)`);
  }
  const needsKey = command === 'update' || command === 'revoke';
  if (needsKey && keyId === undefined) throw new ConfigError(`${command} needs the key: ${command} <keyId> (see --help)`);
  if (rest.length > 0 || (!needsKey && keyId !== undefined)) throw new ConfigError(`unexpected argument "${needsKey ? rest[0] : keyId}" (see --help)`);

  const body: Record<string, unknown> = {};
  if (values.name !== undefined) body.name = values.name;
  if (values.capability !== undefined) {
    try {
      body.capability = JSON.parse(values.capability);
    } catch {
      throw new ConfigError(`--capability must be JSON, e.g. '{"*":["stats"]}'; got ${values.capability}`);
    }
  }
  for (const [flag, field] of [['revocable-tokens', 'revocableTokens'], ['management', 'management']] as const) {
    const on = values[flag] === true;
    const off = values[`no-${flag}`] === true;
    if (on && off) throw new ConfigError(`--${flag} and --no-${flag} together`);
    if (on || off) body[field] = on;
  }
  if ((command === 'list' || command === 'revoke') && Object.keys(body).length > 0) {
    throw new ConfigError(`${command} takes no --name, --capability, --revocable-tokens or --management (see --help)`);
  }
  const config = parseConfig({
    ...env,
    ...(values['data-dir'] !== undefined ? { DATA_DIR: values['data-dir'] } : {}),
    ...(values['apps-file'] !== undefined ? { APPS_FILE: values['apps-file'] } : {}),
  });
  let changes: KeyChanges;
  try {
    changes = command === 'create' || command === 'update' ? parseKeyChanges(body, config.limits, { update: command === 'update' }) : {};
  } catch (err) {
    if (err instanceof ServiceError) throw new ConfigError(`${err.message} (see --help)`);
    throw err;
  }
  const url = (values.url ?? env.SERVICE_URL ?? `http://localhost:${env.PORT || 8080}`).replace(/\/+$/, '');
  if (!/^https?:\/\//.test(url)) throw new ConfigError(`--url must be an http:// or https:// URL, not "${url}"`);
  const managementKey = values.key ?? env.MANAGEMENT_KEY;
  if (managementKey !== undefined && !/^[^.:]+\.[^.:]+:.+$/.test(managementKey)) throw new ConfigError('--key (MANAGEMENT_KEY) must look like appId.keyId:secret');
  return { help: false, command, keyId, changes, appId: values.app, json: values.json === true, direct: values.direct === true, url, managementKey, config };
}

/** A refusal or failure, with the message the user reads. */
class KeysError extends Error {}

type Answer = { status: number; body: unknown };

/** Through the running service's route, with the management key. */
async function throughService(r: KeysRequest): Promise<Answer> {
  let key = r.managementKey;
  if (key === undefined) {
    const found = loadDefaultApp(r.config.dataDir, { upgrade: false });
    if (!found) throw new KeysError(`no management key: give --key appId.keyId:secret (or MANAGEMENT_KEY); there is no default app in DATA_DIR=${r.config.dataDir} to take one from`);
    key = keyString(found.keys[0]);
  }
  const appId = r.appId ?? key.slice(0, key.indexOf('.'));
  const base = `${r.url}/apps/${encodeURIComponent(appId)}/keys`;
  const keyPath = r.keyId === undefined ? '' : `/${encodeURIComponent(r.keyId)}`;
  const [method, url, body] =
    r.command === 'list' ? ['GET', base, undefined]
    : r.command === 'create' ? ['POST', base, r.changes]
    : r.command === 'update' ? ['PATCH', `${base}${keyPath}`, r.changes]
    : ['POST', `${base}${keyPath}/revoke`, undefined];
  let res: Response;
  try {
    res = await fetch(url, {
      method,
      headers: { authorization: `Basic ${Buffer.from(key).toString('base64')}`, accept: 'application/json', ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(30_000),
    });
  } catch (err) {
    const inner = (err as { cause?: { code?: string; message?: string } }).cause;
    const cause = inner?.code ?? inner?.message ?? (err as Error).message;
    throw new KeysError(`no service answers at ${r.url} (${cause}); start it, give --url, or use --direct while the embedded service is stopped`);
  }
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: shown as it is
  }
  return { status: res.status, body: parsed };
}

/** Appended to the embedded log by this process, with the data directory's lock held. */
async function direct(r: KeysRequest): Promise<Answer> {
  if (modeOf(r.config) !== 'embedded') throw new KeysError('--direct appends to the embedded log; with Kafka, go through a running instance (--url)');
  const path = existingEmbeddedLog(r.config.dataDir);
  let lock: DataDirLock;
  try {
    lock = DataDirLock.acquire(r.config.dataDir);
  } catch (err) {
    if (err instanceof DataDirLockedError) throw new KeysError(`DATA_DIR=${r.config.dataDir} is in use (by the service, or another command holding it): if the service runs, drop --direct to go through it (the route applies the change on every instance); otherwise try again once the other command is done`);
    throw err;
  }
  const log = new EmbeddedLog({ path, partitions: r.config.embeddedPartitions });
  try {
    // The apps as the service would know them: its configuration, then the whole apps topic.
    const registry = new AppRegistry();
    // (No default app is made here: a DATA_DIR without one was run with an APPS_FILE.)
    const apps = r.config.appsFile ? configuredApps({ appsFile: r.config.appsFile, dataDir: r.config.dataDir, now: systemClock.now() }).apps : [loadDefaultApp(r.config.dataDir)];
    for (const app of apps) if (app) registry.put(app);
    const ends = await log.endOffsets(Topics.apps);
    for (const [partition, end] of ends) {
      for (let offset = 0; offset < end; ) {
        const records = await log.read(Topics.apps, partition, offset, 1000);
        if (records.length === 0) break;
        for (const record of records) {
          const event = eventOf(record.value); // undefined: not the service's (another producer's: src/log/event-shape.ts)
          if (event && registry.canHandle(event)) registry.evolve(event);
        }
        offset = records[records.length - 1].offset + 1;
      }
    }
    const admin = new KeyAdmin({
      registry,
      clock: systemClock,
      limits: r.config.limits,
      append: async (event) => {
        await log.append(Topics.apps, [{ key: event.appId, value: encodeEvent(event), timestamp: systemClock.now() }]);
        registry.evolve(event);
      },
    });
    const appId = r.appId ?? (r.managementKey ? r.managementKey.slice(0, r.managementKey.indexOf('.')) : registry.all().find((a) => a.source === 'default')?.appId);
    if (appId === undefined) throw new KeysError('give --app <appId>: there is no default app in DATA_DIR to default to');
    try {
      switch (r.command) {
        case 'list':
          return { status: 200, body: admin.list(appId).map((k) => keyView(appId, k)) };
        case 'create':
          return { status: 201, body: keyView(appId, await admin.create(appId, r.changes), true) };
        case 'update':
          return { status: 200, body: keyView(appId, await admin.update(appId, r.keyId!, r.changes)) };
        case 'revoke':
          return { status: 200, body: keyView(appId, await admin.revoke(appId, r.keyId!)) };
      }
    } catch (err) {
      if (err instanceof ServiceError) return { status: err.statusCode, body: { error: err.toJSON() } };
      throw err;
    }
  } finally {
    await log.close();
    lock.release();
  }
}

type View = { id: string; keyName: string; name: string; status: number; capability: unknown; revocableTokens: boolean; management: boolean; key?: string };

const describeKey = (k: View): string =>
  `${k.keyName}  ${k.status === 1 ? 'REVOKED' : 'enabled'}  ${JSON.stringify(k.capability)}${k.revocableTokens ? '  revocableTokens' : ''}${k.management ? '  management' : ''}${k.name ? `  "${k.name}"` : ''}`;

/** What is printed: the key string alone on stdout for create (scripts take it), the rest as text or JSON. */
export function render(r: Pick<KeysRequest, 'command' | 'json'>, answer: Answer): { stdout: string; stderr: string; code: number } {
  if (answer.status >= 400 || typeof answer.body !== 'object' || answer.body === null) {
    const error = (answer.body as { error?: { code?: number; message?: string } } | null)?.error;
    const message = error ? `${error.message} (${error.code}, HTTP ${answer.status})` : `HTTP ${answer.status}: ${String(answer.body).slice(0, 500)}`;
    return { stdout: '', stderr: `keys: ${r.command} refused: ${message}\n`, code: 1 };
  }
  if (r.json) return { stdout: `${JSON.stringify(answer.body, null, 2)}\n`, stderr: '', code: 0 };
  if (r.command === 'list') return { stdout: (answer.body as View[]).map((k) => `${describeKey(k)}\n`).join(''), stderr: '', code: 0 };
  const key = answer.body as View;
  if (r.command === 'create') {
    return { stdout: `${key.key}\n`, stderr: `keys: created ${describeKey(key)}\nkeys: the line on stdout is the key with its secret; it is shown this once\n`, code: 0 };
  }
  return { stdout: '', stderr: `keys: ${r.command === 'revoke' ? 'revoked' : 'updated'} ${describeKey(key)}\n`, code: 0 };
}

async function main(): Promise<number> {
  let parsed;
  try {
    parsed = parseKeysArgs(process.argv.slice(2), process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`keys: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  if (parsed.help) {
    process.stdout.write(usage(commandAsTyped('channel-messaging-keys')));
    return 0;
  }
  let answer: Answer;
  try {
    answer = parsed.direct ? await direct(parsed) : await throughService(parsed);
  } catch (err) {
    if (err instanceof KeysError || err instanceof StartupError || err instanceof ConfigError) {
      process.stderr.write(`keys: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
  const out = render(parsed, answer);
  if (out.stdout) process.stdout.write(out.stdout);
  if (out.stderr) process.stderr.write(out.stderr);
  return out.code;
}

// Run only as a command (node, tsx or the bin link), not when a test imports it.
if (isEntryPoint(import.meta.url)) {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (err) => {
      process.stderr.write(`keys failed: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
