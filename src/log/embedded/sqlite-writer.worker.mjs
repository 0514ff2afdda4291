// The embedded log's writer thread: owns one SQLite connection and commits appends (their segments)
// in transactions with synchronous=FULL, so the event loop never waits on an fsync. Appends that
// arrived while a commit ran share the next transaction: all of them commit, or none.
// Plain JavaScript: a worker starts outside the TypeScript loader (tsx, vitest).
import { parentPort, workerData, receiveMessageOnPort } from 'node:worker_threads';
import Database from 'better-sqlite3';

const db = new Database(workerData.path);
db.pragma('journal_mode = WAL');
db.pragma('synchronous = FULL');
db.pragma('busy_timeout = 5000');
// The table and its INSERT come from the main thread (embedded-log.ts), which creates the table
// before this thread starts; the INSERT's named parameters are a segment's fields and its topic.
const insert = db.prepare(workerData.insertSegment);
// Packed segments arrive in memory shared with the main thread (at, length), or, when they did not
// fit there, in a buffer of their own (records). SQLite copies the bytes before commit returns,
// and the main thread reuses the shared bytes only once this commit is answered.
const ring = workerData.ring;
const commit = db.transaction((messages) => {
  for (const { topic, segments } of messages) {
    for (const s of segments) insert.run({ ...s, topic, records: s.records ?? new Uint8Array(ring, s.at, s.length) });
  }
});

// After a failed commit every later one fails too: the main thread has already assigned offsets
// after the failed ones, and committing them would leave a gap.
let failure;

parentPort.on('message', (first) => {
  // Appends that queued up while the last commit ran share one transaction, and one fsync.
  const messages = [first];
  for (let next; !messages[messages.length - 1].close && (next = receiveMessageOnPort(parentPort)); ) messages.push(next.message);
  const close = messages[messages.length - 1].close ? messages.pop() : undefined;
  if (messages.length > 0) {
    if (failure === undefined) {
      try {
        commit(messages);
        for (const m of messages) parentPort.postMessage({ id: m.id });
      } catch (err) {
        failure = err instanceof Error ? err.message : String(err);
        for (const m of messages) parentPort.postMessage({ id: m.id, error: failure });
      }
    } else {
      for (const m of messages) parentPort.postMessage({ id: m.id, error: `an earlier commit failed (${failure})` });
    }
  }
  if (close) {
    db.close();
    parentPort.postMessage({ id: close.id });
  }
});
