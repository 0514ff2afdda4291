// The embedded log's writer thread: owns one SQLite connection and commits each batch of rows in
// one transaction with synchronous=FULL, so the event loop never waits on an fsync.
// Plain JavaScript: a worker starts outside the TypeScript loader (tsx, vitest).
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

const db = new Database(workerData.path);
db.pragma('journal_mode = WAL');
db.pragma('synchronous = FULL');
db.pragma('busy_timeout = 5000');
const insert = db.prepare('INSERT INTO log_records (topic, partition, offset, key, ts, value) VALUES (?, ?, ?, ?, ?, ?)');
const commit = db.transaction((rows) => {
  for (const r of rows) insert.run(r[0], r[1], r[2], r[3], r[4], r[5]);
});

parentPort.on('message', (message) => {
  if (message.close) {
    db.close();
    parentPort.postMessage({ id: message.id });
    return;
  }
  try {
    commit(message.rows);
    parentPort.postMessage({ id: message.id });
  } catch (err) {
    parentPort.postMessage({ id: message.id, error: err instanceof Error ? err.message : String(err) });
  }
});
