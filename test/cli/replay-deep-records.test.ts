// Records whose lists and maps nest deep (no record the service writes: its values nest 32 levels
// at most, Limits maxDataDepth; one produced to Kafka by another producer, or a row edited in
// log.db): the replay's three paths (the WebAssembly transcoder, the JavaScript one, the generic
// lines) write the same line for each record they take, and leave out, counted as not the
// service's, one nested deeper than the consumers take (RECORD_MAX_DEPTH), as the consumers do
// (src/log/event-shape.ts). Before, a record nested some thousands deep ran each path out of stack
// (RangeError) and ended the replay.
import { describe, expect, it } from 'vitest';
import { NdjsonChunks } from '../../src/audit/ndjson.js';
import { lineOf, type ScopeRequest } from '../../src/audit/replay-scope.js';
import { RECORD_MAX_DEPTH, unreadable } from '../../src/log/event-shape.js';
import { Topics, type LogRecord } from '../../src/log/port.js';

const request: ScopeRequest = { appId: 'app1', channels: { kind: 'all' }, include: new Set(['messages']), from: 0, to: Number.MAX_SAFE_INTEGER };

const str = (s: string): Buffer => {
  const b = Buffer.from(s);
  return Buffer.concat([Buffer.from([0xd9, b.length]), b]);
};

/** A publish of one message whose `field` is `levels` lists one in the other (a map each, with `maps`), holding null. */
function nested(field: 'data' | 'extras' | 'name', levels: number, maps = false): Uint8Array {
  const open = Buffer.alloc(levels * (maps ? 3 : 1));
  for (let i = 0; i < levels; i++) {
    if (maps) {
      open[3 * i] = 0x81;
      open[3 * i + 1] = 0xa1;
      open[3 * i + 2] = 0x6b; // "k"
    } else open[i] = 0x91;
  }
  return new Uint8Array(
    Buffer.concat([
      Buffer.from([0x85]),
      str('type'),
      str('messages.published'),
      str('appId'),
      str('app1'),
      str('channel'),
      str('ch-1'),
      str('transport'),
      str('rest'),
      str('messages'),
      Buffer.from([0x91, 0x83]),
      str('id'),
      str('m:0'),
      str('timestamp'),
      Buffer.from([0x01]),
      str(field),
      open,
      Buffer.from([0xc0]),
    ]),
  );
}

const DEPTHS = [1, 30, 63, 64, 65, 100, RECORD_MAX_DEPTH - 3, RECORD_MAX_DEPTH - 2, RECORD_MAX_DEPTH, 2_000, 15_000, 200_000];
const record = (value: Uint8Array, offset: number): LogRecord => ({ topic: Topics.messages, partition: 0, offset, timestamp: 1_700_000_000_000 + offset, key: 'app1:ch-1', value });
const text = (out: NdjsonChunks): string => Buffer.concat(out.take()).toString('utf8');

describe('the replay: records nested deep', () => {
  for (const field of ['data', 'extras', 'name'] as const) {
    for (const maps of [false, true]) {
      it(`${field} of ${maps ? 'maps' : 'lists'}: every path writes the same line, or leaves the record out as not the service's, and none throws`, () => {
        const records = DEPTHS.map((d, i) => record(nested(field, d, maps), i));
        const paths = { wasm: new NdjsonChunks(), js: new NdjsonChunks(false), generic: new NdjsonChunks(false) };
        const taken: Record<string, boolean[]> = { wasm: [], js: [], generic: [] };
        for (const r of records) {
          taken.wasm.push(paths.wasm.record(r, request));
          taken.js.push(paths.js.record(r, request));
          taken.generic.push(paths.generic.record(r, request, false));
        }
        expect(taken.js).toEqual(taken.generic);
        expect(taken.wasm).toEqual(taken.generic);
        const lines = text(paths.generic);
        expect(text(paths.wasm)).toBe(lines);
        expect(text(paths.js)).toBe(lines);
        // the generic lines are lineOf's (the replay's own view of a record)
        expect(lines).toBe(records.map((r) => lineOf(r, request)).filter((l) => l !== undefined).map((l) => `${JSON.stringify(l)}\n`).join(''));
        // taken up to the consumers' depth (the event, its messages and the message are 3 levels), left out past it
        expect(taken.generic).toEqual(DEPTHS.map((d) => d + 3 <= RECORD_MAX_DEPTH));
        const leftOut = taken.generic.filter((t) => !t).length;
        for (const out of Object.values(paths)) expect(out.foreign).toBe(leftOut);
      });
    }
  }

  it('one nested deeper than RECORD_MAX_DEPTH is not handed to the consumers (a shape fault, as another producer\'s record), one within it is', () => {
    expect(unreadable(nested('extras', RECORD_MAX_DEPTH - 3))).toBeUndefined();
    expect(unreadable(nested('extras', RECORD_MAX_DEPTH - 2))).toMatchObject({ reason: 'shape', detail: expect.stringContaining(`nests deeper than ${RECORD_MAX_DEPTH} levels`) });
    expect(unreadable(nested('data', 200_000, true))).toMatchObject({ reason: 'shape' });
  });
});
