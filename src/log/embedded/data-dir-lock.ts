import { join } from 'node:path';
import Database from '../../stores/sqlite/driver.mjs';

/** Another process (or another service in this one) holds the data directory. */
export class DataDirLockedError extends Error {
  override readonly name = 'DataDirLockedError';
}

/**
 * Holds a DATA_DIR for one service: an exclusive SQLite transaction on DATA_DIR/lock.db, open for
 * as long as the service runs. SQLite takes it with fcntl locks, which the kernel drops when the
 * process dies, however it dies (kill -9 included), and which SQLite also enforces between two
 * connections of one process. A PID file could not tell a live owner from a dead one (in a
 * container every service is PID 1). Two services on one log would assign the same offsets: the
 * second one's commits fail on the first one's rows.
 */
export class DataDirLock {
  private constructor(private readonly db: Database.Database) {}

  /** Takes the lock at once or throws DataDirLockedError (no waiting: the owner may run for days). */
  static acquire(dataDir: string): DataDirLock {
    const path = join(dataDir, 'lock.db');
    const db = new Database(path, { timeout: 0 });
    try {
      db.pragma('locking_mode = EXCLUSIVE');
      db.exec('BEGIN EXCLUSIVE');
    } catch (err) {
      db.close();
      if ((err as { code?: string }).code === 'SQLITE_BUSY') {
        throw new DataDirLockedError(`another process is using the data directory ${dataDir} (it holds ${path}); stop it, or start this one with another DATA_DIR`);
      }
      throw err;
    }
    return new DataDirLock(db);
  }

  release(): void {
    if (!this.db.open) return;
    this.db.exec('ROLLBACK');
    this.db.close();
  }
}
