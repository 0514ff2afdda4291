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
