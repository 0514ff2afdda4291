// The SQLite driver for the running Node: better-sqlite3 13 (`better-sqlite3-node22`, an optional
// dependency, installed only where Node >= 22) on Node 22 and later, better-sqlite3 12 on Node 20.
// Neither serves all three lines: 12 aborts the process on Node 24 when a thread that used it
// exits (node::ObjectWrap's cleanup hooks, Node 24.19), and 13 needs Node 22 (it crashes on 20).
// Plain JavaScript, so that the embedded log's writer thread (sqlite-writer.worker.mjs) loads the
// same choice as the TypeScript modules (driver.d.mts gives them its type).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const major = Number(process.versions.node.split('.')[0]);

function load() {
  if (major >= 22) {
    try {
      return require('better-sqlite3-node22');
    } catch (err) {
      if (err?.code !== 'MODULE_NOT_FOUND') throw err;
      process.emitWarning(
        `better-sqlite3-node22 (better-sqlite3 13, an optional dependency) is not installed for Node ${process.versions.node}; using better-sqlite3 12, which may abort on Node 24 at a thread's exit. Reinstall with this Node (npm ci).`,
      );
    }
  }
  return require('better-sqlite3');
}

const Database = load();
export default Database;
