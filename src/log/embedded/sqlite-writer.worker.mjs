// The embedded log's writer thread: owns one SQLite connection and commits appends (their segments)
// in transactions with synchronous=FULL, so the event loop never waits on an fsync. Appends that
// arrived while a commit ran share the next transaction: all of them commit, or none.
// Plain JavaScript: a worker starts outside the TypeScript loader (tsx, vitest).
import { parentPort, workerData, receiveMessageOnPort } from 'node:worker_threads';
import Database from '../../stores/sqlite/driver.mjs';
import { chainSegment, lastLink, ZERO_LINK } from './chain.mjs';
import { retentionChunk } from './retention.mjs';

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
// Each stream's chain head (chain.mjs): computed here, where commits are in offset order, from the
// newest row's at first use. Heads move on only once their commit is in: a failed one rolls back.
const lastChain = db.prepare(workerData.lastChain).pluck();
const heads = new Map();
const headOf = (stream, pending) => pending.get(stream) ?? heads.get(stream) ?? lastLink(lastChain.get({ stream })) ?? ZERO_LINK;
const commit = db.transaction((messages, pending) => {
  for (const { topic, segments } of messages) {
    for (const s of segments) {
      const records = s.records ?? new Uint8Array(ring, s.at, s.length);
      const chain = chainSegment(headOf(s.stream, pending), records, s.firstOffset);
      pending.set(s.stream, lastLink(chain));
      insert.run({ ...s, topic, records, chain });
    }
  }
});

// Retention (EmbeddedLog.enforceRetention): a chunk of rows at a time, each its own statement, with
// the commits that queued up meanwhile in between: deleting an hour of expired rows in one statement
// held the write lock (and the event loop, on the main thread) for as long as it took, and commits
// waited, then failed with SQLITE_BUSY. A failed chunk fails the retention, not the commits.
const retainChunk = retentionChunk(db, workerData.retention);
let closed = false;

function retain({ id, retain: { streams, cutoff } }) {
  let deleted = 0;
  let at = 0;
  const step = () => {
    if (closed) return;
    try {
      const chunk = retainChunk(streams[at], cutoff);
      deleted += chunk.deleted;
      if (!chunk.more) at++;
    } catch (err) {
      parentPort.postMessage({ id, error: describe(err) });
      return;
    }
    if (at < streams.length) setImmediate(step);
    else parentPort.postMessage({ id, deleted });
  };
  if (streams.length === 0) parentPort.postMessage({ id, deleted });
  else setImmediate(step);
}

// After a failed commit every later one fails too, until the main thread sends `reset`: it has
// already assigned offsets after the failed ones, and committing them would leave a gap. It resets
// once every commit it sent has been answered and it has read its end offsets again.
let failure;

const describe = (err) => (err && typeof err.code === 'string' ? `${err.code}: ${err.message}` : err instanceof Error ? err.message : String(err));

function commitAll(messages) {
  if (messages.length === 0) return;
  if (failure === undefined) {
    try {
      const pending = new Map();
      commit(messages, pending);
      for (const [stream, head] of pending) heads.set(stream, head);
      for (const m of messages) parentPort.postMessage({ id: m.id });
      return;
    } catch (err) {
      // better-sqlite3 has rolled the transaction back: none of these appends is in the log.
      failure = describe(err);
      for (const m of messages) parentPort.postMessage({ id: m.id, error: failure });
      return;
    }
  }
  for (const m of messages) parentPort.postMessage({ id: m.id, error: `an earlier commit failed (${failure})` });
}

parentPort.on('message', (first) => {
  // Appends that queued up while the last commit ran share one transaction, and one fsync; a
  // reset or a close is taken where it stands among them.
  const queued = [first];
  for (let next; (next = receiveMessageOnPort(parentPort)); ) queued.push(next.message);
  let appends = [];
  for (const m of queued) {
    if (m.retain) {
      retain(m);
      continue;
    }
    if (!m.reset && !m.close) {
      appends.push(m);
      continue;
    }
    commitAll(appends);
    appends = [];
    if (m.reset) {
      failure = undefined;
      heads.clear(); // read again from what SQLite holds
    }
    if (m.close) {
      closed = true;
      db.close();
      parentPort.postMessage({ id: m.id });
      return;
    }
  }
  commitAll(appends);
});
