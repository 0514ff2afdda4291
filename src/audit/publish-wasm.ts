// The replay's publish transcoder in WebAssembly (wasm/publish-line.ts, compiled to
// wasm/publish-line.wasm, committed: `npm run build:wasm` makes it again), for ndjson.ts: a
// record's bytes copied into the module's memory (a segment of the embedded log once for all its
// records), its line written there, lines handed to the JSON chunks many at a time. What the
// module declines (a shape it does not know, a record too long) and everything where WebAssembly
// is not to be had is served by the JavaScript transcoder as before, the same bytes.
import { readFileSync } from 'node:fs';

const WASM_FILE = new URL('./wasm/publish-line.wasm', import.meta.url);

/** The module's memory: [0, 64 KiB) its tables and data, then the lines written, then the input. */
const OUT = 64 * 1024;
const OUT_BYTES = 512 * 1024;
const IN = OUT + OUT_BYTES;
/** the most input bytes held at once: a longer segment is copied a record at a time */
const IN_BYTES = 1024 * 1024;
/** the longest record transcoded here (its line fits the output: 12 bytes of JSON a byte at most, and the frame) */
const LONGEST = 16 * 1024;
/** pending lines handed over from this many bytes on (into the 256 KiB chunks, several a chunk) */
const HAND_OVER = 32 * 1024;
/** and a page past the input, for the 8-byte reads and writes past a value's end */
const PAGES = (IN + IN_BYTES) / 65536 + 1;

interface Exports {
  memory: WebAssembly.Memory;
  init(): void;
  publish(start: number, end: number, partition: number, offset: number, timestamp: number, out: number): number;
}

let compiled: WebAssembly.Module | null | undefined;

/** The compiled module, once (null: none to be had: no WebAssembly, or no file). */
function moduleOf(): WebAssembly.Module | null {
  if (compiled === undefined) {
    try {
      compiled = typeof WebAssembly === 'object' ? new WebAssembly.Module(readFileSync(WASM_FILE)) : null;
    } catch {
      compiled = null;
    }
  }
  return compiled;
}

const safe = (n: number): boolean => n >= 0 && n <= Number.MAX_SAFE_INTEGER && Math.floor(n) === n;

/** One replay's instance: the lines it has written and not yet handed over (pending). */
export class PublishWasm {
  private readonly publishAt: Exports['publish'];
  private readonly memory: Uint8Array;
  /** the value whose bytes are at IN, whole (undefined: none; a value copied in part is not kept) */
  private held: Uint8Array | undefined;
  /** bytes of lines written from OUT */
  pending = 0;

  private constructor(exports: Exports) {
    exports.memory.grow(PAGES - exports.memory.buffer.byteLength / 65536);
    exports.init();
    this.publishAt = exports.publish;
    this.memory = new Uint8Array(exports.memory.buffer);
  }

  /** An instance, or undefined where WebAssembly or the module is not to be had. */
  static create(): PublishWasm | undefined {
    const module = moduleOf();
    if (module === null) return undefined;
    try {
      return new PublishWasm(new WebAssembly.Instance(module, {}).exports as unknown as Exports);
    } catch {
      return undefined;
    }
  }

  /**
   * A scan starts: the value held may be written again under the same object. The log's segments
   * are new objects and not written while visited, so within a scan a value is copied once.
   */
  forget(): void {
    this.held = undefined;
  }

  /** Whether there is not room for the line of a value of n bytes: hand the lines over first. */
  full(n: number): boolean {
    return this.pending >= HAND_OVER || this.pending + 12 * n + 1024 > OUT_BYTES;
  }

  /** The lines written, [OUT, OUT + pending), while no other call is made. */
  lines(): Uint8Array {
    return this.memory.subarray(OUT, OUT + this.pending);
  }

  /** The line of the publish b[start, end), appended to the pending lines; false: declined (nothing written). Call full() first. */
  line(b: Uint8Array, start: number, end: number, partition: number, offset: number, timestamp: number): boolean {
    const n = end - start;
    if (n > LONGEST || !safe(offset) || !safe(timestamp) || !(partition >= 0 && partition <= 0x7fffffff && Math.floor(partition) === partition)) return false;
    let base: number;
    if (b === this.held) base = IN;
    else if (b.length <= IN_BYTES) {
      this.memory.set(b, IN);
      this.held = b;
      base = IN;
    } else {
      this.memory.set(b.subarray(start, end), IN);
      this.held = undefined;
      base = IN - start;
    }
    let to: number;
    try {
      to = this.publishAt(base + start, base + end, partition, offset, timestamp, OUT + this.pending);
    } catch {
      // The module's stack (a record's maps and lists nested some thousands deep, skipped by
      // recursion: RangeError): declined like any record it does not know; what it wrote past
      // the pending lines is not kept, and each call starts afresh (begin()).
      return false;
    }
    if (to === 0) return false;
    this.pending = to - OUT;
    return true;
  }
}
