// A log holding a publish with a map key "__proto__" (realtime JSON frames let one in, ACKed, until
// they were refused): the shared MessagePack decoder refuses the key, and the replay stopped on the
// record ("replay failed: The key __proto__ is not allowed", exit 1): no replay, no export of the
// app. The audit reads it as JSON.parse does, the key an own property; the export verifies.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { replay } from './audited-log.js';
import { checkpointing } from '../../src/audit/checkpointing.js';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { packValue, unpackValue } from '../../src/codec/msgpack.js';
import { unpackOwnKeys } from '../../src/codec/msgpack-own-keys.js';
import { Topics } from '../../src/log/port.js';
import { replayScope, type ScopeRequest } from '../../src/audit/replay-scope.js';
import type { LogEvent } from '../../src/domain/events.js';

// as the publisher built it from the frame {"messages":[{"name":"p","data":{"__proto__":[1]},"extras":{"push":{"__proto__":{"x":1}}}}]}
const poisoned = JSON.parse('{"type":"messages.published","appId":"app1","channel":"c","transport":"realtime","messages":[{"id":"x:0","timestamp":1,"name":"p","data":{"a":{"__proto__":[1]}},"clientId":"me","extras":{"push":{"__proto__":{"x":1},"title":"t"}}}],"keyName":"app1.k"}') as LogEvent;
const plain = (id: string): LogEvent => ({ type: 'messages.published', appId: 'app1', channel: 'c', transport: 'rest', messages: [{ id, timestamp: 2, data: 'fine' }], keyName: 'app1.k' }) as LogEvent;

describe('replay of a record holding a "__proto__" key', () => {
  it('unpackOwnKeys reads what unpackValue reads, and a "__proto__" key as an own property (no prototype set)', () => {
    const values = [null, true, false, 0, 127, 128, -1, -33, 2 ** 53 + 2, 2 ** 64, -(2 ** 40), 1.5, Math.fround(0.1), '', 'é✓😀', '\uFEFF' + 'x'.repeat(300), 'y'.repeat(70_000), new Uint8Array([0, 255]), [1, [2, {}]], { a: { b: [null] }, 3: 'three' }];
    for (const v of values) expect(unpackOwnKeys(packValue(v))).toEqual(unpackValue(packValue(v)));
    const event = unpackOwnKeys(encodeEvent(poisoned).slice()) as { messages: { extras: { push: Record<string, unknown> } }[] };
    const push = event.messages[0].extras.push;
    expect(Object.getPrototypeOf(push)).toBe(Object.prototype);
    expect(Object.keys(push)).toEqual(['__proto__', 'title']);
    expect(JSON.stringify(event)).toBe(JSON.stringify(poisoned));
  });

  it('the replay (its transcoder) prints it as the generic path does, saying the key; the export with proof verifies', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cm-replay-proto-'));
    // its checkpoints signed as the service signs them (its close takes one, over these records)
    const checkpoints = checkpointing({ auditKeyFile: join(dataDir, 'audit-key.pem'), auditCheckpointIntervalMs: 3_600_000 });
    const log = new EmbeddedLog({ path: join(dataDir, 'log.db'), partitions: 1, checkpoints });
    await log.append(Topics.apps, [{ key: 'app1', timestamp: 900, value: packValue({ type: 'app.deleted', appId: 'app1' }) }]);
    await log.append(Topics.messages, [plain('a:0'), poisoned, plain('b:0')].map((e, i) => ({ key: 'app1:c', timestamp: 1_000 + i, value: encodeEvent(e).slice() })));
    const request: ScopeRequest = { appId: 'app1', channels: { kind: 'all' }, include: new Set(['messages']), from: 0, to: Number.MAX_SAFE_INTEGER };
    let want = '';
    for await (const { line } of replayScope(log, request)) want += `${JSON.stringify(line)}\n`;
    await log.close();

    const printed = await replay('--app', 'app1', '--all-channels', '--data-dir', dataDir);
    expect(printed.code, printed.stderr).toBe(0);
    expect(printed.stdout).toBe(want);
    const lines = printed.stdout.trim().split('\n').map((l) => JSON.parse(l) as { event: { messages: { extras?: unknown; data: unknown }[] } });
    expect(lines).toHaveLength(3);
    expect(lines[1].event).toEqual(JSON.parse(JSON.stringify(poisoned)));
    expect(JSON.stringify(lines[1].event.messages[0].extras)).toBe('{"push":{"__proto__":{"x":1},"title":"t"}}');

    const exported = await replay('--app', 'app1', '--all-channels', '--with-proof', '--data-dir', dataDir);
    expect(exported.code, exported.stderr).toBe(0);
    const file = join(dataDir, 'export.ndjson');
    writeFileSync(file, exported.stdout);
    const verified = await replay('--verify-file', file);
    expect(verified.code, verified.stdout + verified.stderr).toBe(0);
    expect(verified.stderr).toMatch(/^replay: verified .*export\.ndjson: 4 records, 1 checkpoints \(1 heads matched\)/m);
  }, 60_000);
});
