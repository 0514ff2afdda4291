// The embedded log of an existing DATA_DIR, for the command-line tools (rebuild, replay, keys
// --direct), which read or append to a service's log and never make one.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import Database from '../../stores/sqlite/driver.mjs';
import { checkDataDir, StartupError } from '../../startup.js';

/**
 * The path of DATA_DIR's log, or a StartupError that says what is wrong in one line: a mistyped
 * --data-dir became a new, empty data directory (and a rebuild of it a success), and a log.db that
 * is not a database failed with SQLite's 'file is not a database', naming no file.
 */
export function existingEmbeddedLog(dataDir: string): string {
  checkDataDir(dataDir, { create: false });
  const path = join(dataDir, 'log.db');
  if (!existsSync(path)) {
    // A Kafka-mode service's DATA_DIR holds its default app and audit key, and no log.db: the tool was not told of Kafka.
    const kafkaLike = existsSync(join(dataDir, 'default-app.json')) || existsSync(join(dataDir, 'audit-key.pem'));
    throw new StartupError(
      `DATA_DIR=${dataDir} holds no log (${path} does not exist); is it the service's data directory?${kafkaLike ? " If it is a service's in Kafka mode, its log is in Kafka: give KAFKA_BROKERS and CLICKHOUSE_URL as the service has them" : ''}`,
    );
  }
  try {
    const db = new Database(path, { readonly: true, fileMustExist: true });
    try {
      db.pragma('schema_version'); // reads the header: a file that is not SQLite fails here
    } finally {
      db.close();
    }
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'SQLITE_READONLY_DIRECTORY') {
      // An auditor's account that may read DATA_DIR but not write it, with the service stopped.
      throw new StartupError(
        `${path} cannot be opened by this user: with the service stopped, SQLite makes log.db-wal and log.db-shm beside log.db to read it, and ${dataDir} is not writable here; run as the service's user, or read a copy of DATA_DIR (SQLITE_READONLY_DIRECTORY)`,
      );
    }
    throw new StartupError(`${path} cannot be read as a log: ${(err as Error).message}${code ? ` (${code})` : ''}; is it the service's data directory, or restore the file from a backup`);
  }
  return path;
}
