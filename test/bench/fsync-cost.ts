// What one fsync costs on this disk: the floor under every embedded commit (SQLite in WAL mode with
// synchronous=FULL syncs the WAL at each commit). Writes 4 KiB and fdatasync()s it, N times, in a
// file under DATA_DIR's parent or the temp dir, and prints the mean and percentiles.
//   npx tsx test/bench/fsync-cost.ts [count] [dir]
import { closeSync, fdatasyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const count = Number(process.argv[2] ?? 2000);
const dir = mkdtempSync(join(process.argv[3] ?? tmpdir(), 'cm-fsync-'));
const fd = openSync(join(dir, 'f'), 'w');
const page = Buffer.alloc(4096, 1);
const us: number[] = [];
try {
  for (let i = 0; i < count; i++) {
    writeSync(fd, page);
    const t = process.hrtime.bigint();
    fdatasyncSync(fd);
    us.push(Number(process.hrtime.bigint() - t) / 1000);
  }
} finally {
  closeSync(fd);
  rmSync(dir, { recursive: true, force: true });
}
us.sort((a, b) => a - b);
const at = (q: number): string => us[Math.min(us.length - 1, Math.floor(q * us.length))].toFixed(0);
const mean = us.reduce((s, v) => s + v, 0) / us.length;
console.log(`fdatasync after a 4 KiB write, ${count} times in ${dir}: mean ${mean.toFixed(0)} µs, p50 ${at(0.5)}, p99 ${at(0.99)}`);
