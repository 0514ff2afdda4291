// Checks of what the configuration names, made before anything starts, so that a bad resource ends
// the start with one line that says what to fix (main.ts prints it) instead of a stack trace.
import { accessSync, constants, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

/** A resource the configuration names is unusable; its message is the one line the operator reads. */
export class StartupError extends Error {}

const reason = (err: unknown): string => {
  const e = err as NodeJS.ErrnoException;
  switch (e.code) {
    case 'EROFS':
      return 'the file system is read-only';
    case 'EACCES':
    case 'EPERM':
      return 'permission denied';
    case 'ENOSPC':
      return 'no space left on the device';
    default:
      return e.code ?? e.message;
  }
};

/**
 * DATA_DIR must be a directory this process can write to. `create`: a missing one is made (the
 * service); otherwise it must exist (the replay CLI reads, never creates).
 */
export function checkDataDir(dir: string, { create }: { create: boolean }): void {
  let stat;
  try {
    stat = statSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new StartupError(`DATA_DIR=${dir} cannot be read: ${reason(err)}`);
    if (!create) throw new StartupError(`DATA_DIR=${dir} does not exist`);
    try {
      ensureDir(dir);
    } catch (mkdirErr) {
      throw new StartupError(`DATA_DIR=${dir} does not exist and cannot be created: ${mkdirErr instanceof StartupError ? mkdirErr.message : reason(mkdirErr)}`);
    }
    stat = statSync(dir);
  }
  if (!stat.isDirectory()) throw new StartupError(`DATA_DIR=${dir} is not a directory`);
  if (!create) return;
  // access(W_OK) says yes to root on a read-only mount: a real write says what will happen.
  const probe = join(dir, `.write-test-${process.pid}`);
  try {
    writeFileSync(probe, '');
    rmSync(probe, { force: true });
  } catch (err) {
    throw new StartupError(`DATA_DIR=${dir} is not writable: ${reason(err)}`);
  }
}

/**
 * mkdir -p, one directory at a time from the nearest one that exists. Node's recursive mkdir loops
 * for ever at 100 % CPU where the parent exists but refuses new entries with ENOENT (procfs:
 * DATA_DIR=/proc/nope); here that is an error naming the directory that cannot hold one.
 */
export function ensureDir(dir: string): void {
  const missing: string[] = [];
  for (let d = resolve(dir); ; d = dirname(d)) {
    let exists = true;
    try {
      statSync(d);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      exists = false;
    }
    if (exists || dirname(d) === d) break;
    missing.unshift(d);
  }
  for (const d of missing) {
    try {
      mkdirSync(d);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EEXIST') continue;
      // The parent exists (it was there, or made just before): ENOENT means its file system takes no new directories.
      if (code === 'ENOENT') throw new StartupError(`the file system of ${dirname(d)} does not allow creating directories in it (a virtual file system such as /proc or /sys?)`);
      throw err;
    }
  }
}

/** APPS_FILE must be a readable file (its content is checked when it is loaded). */
export function checkAppsFile(path: string): void {
  let stat;
  try {
    stat = statSync(path);
  } catch (err) {
    throw new StartupError((err as NodeJS.ErrnoException).code === 'ENOENT' ? `APPS_FILE=${path} does not exist` : `APPS_FILE=${path} cannot be read: ${reason(err)}`);
  }
  if (!stat.isFile()) throw new StartupError(`APPS_FILE=${path} is not a file`);
  try {
    accessSync(path, constants.R_OK);
  } catch (err) {
    throw new StartupError(`APPS_FILE=${path} cannot be read: ${reason(err)}`);
  }
}

/** What a failed listen means, in one line. */
export function listenError(err: unknown, host: string, port: number): StartupError {
  const e = err as NodeJS.ErrnoException;
  const where = `HOST=${host} PORT=${port}`;
  switch (e.code) {
    case 'EADDRINUSE':
      return new StartupError(`cannot listen on ${where}: the port is in use by another process`);
    case 'EADDRNOTAVAIL':
      return new StartupError(`cannot listen on ${where}: no network interface of this machine has that address`);
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new StartupError(`cannot listen on ${where}: the host name does not resolve`);
    case 'EACCES':
      return new StartupError(`cannot listen on ${where}: permission denied (ports below 1024 need privileges)`);
    default:
      return new StartupError(`cannot listen on ${where}: ${e.code ?? e.message}`);
  }
}

export interface WaitOptions {
  /** What is awaited, as the log names it: "Kafka", "ClickHouse". */
  what: string;
  /** Where, as the configuration gives it: host:port or a URL. */
  at: string;
  timeoutMs: number;
  /** Told "waiting for <what> at <at>" about once a second while it does not answer. */
  logger?: { info(obj: object, msg?: string): void };
  /** Pause between a failed attempt and the next. */
  retryMs?: number;
  /** The error's message on giving up, before the last failure (default: "<what> at <at> did not answer within N ms"). */
  gaveUp?: string;
}

const WAIT_LOG_EVERY_MS = 1000;

/**
 * Tries `attempt` until it resolves, saying what it waits for about once a second (pino, info), and
 * gives up at `timeoutMs` exactly: an attempt still running then (a connection that hangs) is left
 * behind, not awaited, so the start ends on time. `attempt` is told when it has been given up on,
 * to stop what it keeps open. The error names the last failure.
 */
export async function waitFor<T>(options: WaitOptions, attempt: (givenUp: () => boolean) => Promise<T>): Promise<T> {
  const started = Date.now();
  let last: unknown;
  let gaveUp = false;
  const givenUp = (): boolean => gaveUp;
  const say = (): void =>
    options.logger?.info(
      { waitingFor: options.what, at: options.at, elapsedMs: Date.now() - started, timeoutMs: options.timeoutMs, lastError: last instanceof Error ? last.message : undefined },
      `waiting for ${options.what} at ${options.at}`,
    );
  const attempts = (async (): Promise<T> => {
    for (let tries = 0; !gaveUp; tries++) {
      try {
        return await attempt(givenUp);
      } catch (err) {
        last = err;
        if (tries === 0) say(); // at once, then by the timer
        await new Promise((r) => setTimeout(r, options.retryMs ?? 250));
      }
    }
    throw new Error('given up');
  })();
  attempts.catch(() => {}); // settles after the race once given up
  const ticker = setInterval(say, WAIT_LOG_EVERY_MS);
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      attempts,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          gaveUp = true;
          const why = last instanceof Error && last.message ? `: ${last.message}` : '';
          reject(new StartupError(`${options.gaveUp ?? `${options.what} at ${options.at} did not answer within ${options.timeoutMs} ms`}${why}`));
        }, options.timeoutMs);
      }),
    ]);
  } finally {
    gaveUp = true;
    clearInterval(ticker);
    clearTimeout(timer);
  }
}

/** A signal this soon after the first is the same one delivered twice (shutdownSignals). */
export const SIGNAL_REPEAT_MS = 1000;

/**
 * What SIGTERM and SIGINT do: the first begins the graceful shutdown (`begin`); a second forces the
 * exit (`force`): an operator who will not wait (Ctrl-C again), with nothing acknowledged lost (the
 * log holds it; projections replay from their checkpoints). One within `repeatMs` of the first is
 * the same request delivered twice, not a second one: `npm start` in a terminal hands the process
 * Ctrl-C's SIGINT from the terminal and again from its wrappers (npm, tsx), a few ms apart.
 */
export function shutdownSignals(options: {
  begin: (signal: string) => void;
  force: (signal: string) => void;
  logger: { info(obj: object, msg?: string): void; warn(obj: object, msg?: string): void };
  now?: () => number;
  repeatMs?: number;
}): (signal: string) => void {
  const now = options.now ?? Date.now;
  const repeatMs = options.repeatMs ?? SIGNAL_REPEAT_MS;
  let since: number | undefined;
  return (signal) => {
    if (since === undefined) {
      since = now();
      return options.begin(signal);
    }
    if (now() - since < repeatMs) {
      options.logger.info({ signal }, 'already shutting down (the same signal again, from a wrapper or the terminal)');
      return;
    }
    options.logger.warn({ signal }, 'a second signal during the shutdown; exiting now (code 1)');
    options.force(signal);
  };
}
