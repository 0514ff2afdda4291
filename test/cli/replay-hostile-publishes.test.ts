// The audit replay (`replay --all-channels`, its transcoder) and its export with proof
// (`--with-proof`, then `--verify-file`) over what hostile clients can get into a real service's log
// through its routes: REST JSON and MessagePack publishes, a batch publish, realtime MESSAGE and
// PRESENCE frames in JSON and MessagePack; names, ids, client ids and data of every str8/16/32
// boundary length, binary data at the bin8/16/32 ones, U+FEFF first, U+2028, controls and NUL,
// channel names with `:` and non-ASCII. The command's lines must be the generic path's, byte for
// byte, each valid JSON saying the strings that were accepted, and the export must verify.
import { encode } from '@msgpack/msgpack';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, runToEnd } from '../helpers/spawn-service.js';
import { listening, startTestService } from '../helpers/service.js';
import { Actions, RawClient, type Format } from '../helpers/raw-realtime.js';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { replayScope, type ScopeRequest } from '../../src/audit/replay-scope.js';

const PARTITIONS = '3';
const replay = (...args: string[]) => runToEnd(['--import', 'tsx', join(ROOT, 'src/cli/replay.ts'), ...args], { KAFKA_BROKERS: '', CLICKHOUSE_URL: '', EMBEDDED_PARTITIONS: PARTITIONS });

/** A string of `bytes` UTF-8 bytes: `head`, then ASCII. */
const sized = (head: string, bytes: number): string => head + 'p'.repeat(bytes - Buffer.byteLength(head));
const HOSTILE = ['\uFEFF', '\u2028\u2029', '"\\/\b\f\n\r\t', '\u0000\u0001\u001f\u007f', 'é✓😀', '</script>', '\uFFFF'];
const LENGTHS = [1, 31, 32, 33, 200, 201, 255, 256, 65_535, 65_536];

describe('replay of hostile publishes made through the routes', () => {
  it('REST (JSON, MessagePack, batch) and realtime (JSON, MessagePack; MESSAGE, PRESENCE): the command prints the generic lines, each saying what was accepted, and the export with proof verifies', async () => {
    const t = await startTestService({ EMBEDDED_PARTITIONS: PARTITIONS, MAX_MESSAGE_SIZE: '300000', MAX_PUBLISH_BYTES: '4000000' });
    const appId = t.service.registry.all()[0].appId;
    /** what each accepted message said, by id */
    const sent = new Map<string, Record<string, unknown>>();
    let n = 0;
    const channels = ['plain', 'with:colons:in:it', 'ünï-✓-😀', 'a:', 'x'.repeat(200)];
    try {
      const rest = async (channel: string, body: Record<string, unknown>, msgpack = false): Promise<void> => {
        const id = `rest-${n++}`;
        const message = { id, ...body };
        const res = await t.service.app.inject({
          method: 'POST',
          url: `/channels/${encodeURIComponent(channel)}/messages`,
          headers: { authorization: t.auth, 'content-type': msgpack ? 'application/x-msgpack' : 'application/json' },
          payload: msgpack ? Buffer.from(encode(message)) : JSON.stringify(message),
        });
        expect(res.statusCode, res.body).toBe(201);
        sent.set(id, message);
      };
      for (const [k, head] of HOSTILE.entries()) {
        for (const bytes of LENGTHS) {
          const s = sized(head, Math.max(bytes, Buffer.byteLength(head)));
          const channel = channels[(k + bytes) % channels.length];
          await rest(channel, { name: s, data: s, clientId: s, extras: { headers: { h: s.slice(0, 256), f: 1.5, big: 2 ** 53 + 2, neg: -0, t: true, z: null } } }, bytes % 2 === 0);
        }
      }
      for (const bytes of [0, 1, 255, 256, 65_535, 65_536, 70_000]) {
        const data = new Uint8Array(bytes).map((_, i) => (i * 37) & 0xff);
        await rest('binary', { name: 'bin', data, encoding: bytes % 2 === 0 ? 'utf-8' : '\uFEFFcipher' }, true);
        await rest('binary', { name: 'bin-no-encoding', data }, true);
      }
      const batch = await t.service.app.inject({
        method: 'POST',
        url: '/messages',
        headers: { authorization: t.auth, 'content-type': 'application/json' },
        payload: JSON.stringify({ channels: channels.slice(0, 3), messages: [{ id: 'batch-0', name: '\uFEFF' + 'b'.repeat(300), data: '\u2028' }] }),
      });
      expect(batch.statusCode, batch.body).toBe(201);
      sent.set('batch-0', { name: '\uFEFF' + 'b'.repeat(300), data: '\u2028' });

      const port = await listening(t);
      for (const format of ['json', 'msgpack'] as Format[]) {
        const clientId = sized('\uFEFF😀"', 300) + format;
        const c = await RawClient.connect(port, { key: t.key, clientId }, format);
        try {
          for (const bytes of [31, 32, 255, 256, 65_536]) {
            const id = `rt-${format}-${bytes}`;
            const s = sized('\u2029\uFEFF', bytes);
            const ack = await c.publish('realtime', [{ id, name: s, data: s, extras: { push: { notification: { title: s.slice(0, 100) } } } }]);
            expect(ack.action, JSON.stringify(ack).slice(0, 300)).toBe(Actions.ACK);
            sent.set(id, { name: s, data: s, clientId });
          }
          if (format === 'json') {
            // a "__proto__" key: refused, else a record no decoder reads (the replay stopped on it)
            const msgSerial = c.nextSerial();
            const answer = c.ackOf(msgSerial);
            c.sendRaw(`{"action":15,"channel":"realtime","msgSerial":${msgSerial},"messages":[{"name":"p","data":"d","extras":{"push":{"__proto__":{"x":1}}}}]}`);
            expect((await answer).action).toBe(Actions.NACK);
          }
          const enter = await c.presence('realtime', [{ action: 2, data: sized('\uFEFF', 400) }]);
          expect(enter.action, JSON.stringify(enter).slice(0, 300)).toBe(Actions.ACK);
        } finally {
          c.ws.close();
          await c.closed;
        }
      }
    } finally {
      await t.close();
    }

    const args = ['--app', appId, '--all-channels', '--include', 'messages,presence,app-events', '--data-dir', t.dataDir];
    const printed = await replay(...args);
    expect(printed.code, printed.stderr).toBe(0);
    // the generic path's lines, read from the same log
    const log = new EmbeddedLog({ path: join(t.dataDir, 'log.db'), partitions: Number(PARTITIONS) });
    let want = '';
    try {
      const request: ScopeRequest = { appId, channels: { kind: 'all' }, include: new Set(['messages', 'presence', 'app-events']), from: 0, to: Number.MAX_SAFE_INTEGER };
      for await (const { line } of replayScope(log, request)) want += `${JSON.stringify(line)}\n`;
    } finally {
      await log.close();
    }
    expect(printed.stdout === want, 'the command\'s lines are not the generic path\'s').toBe(true);

    // each line valid JSON; each accepted message's strings said as they were sent
    const said = new Map<string, Record<string, unknown>>();
    let presence = 0;
    for (const text of printed.stdout.split('\n').filter((l) => l !== '')) {
      const line = JSON.parse(text) as { topic: string; event: { messages?: Record<string, unknown>[]; event?: Record<string, unknown> } };
      for (const m of line.event.messages ?? []) said.set(String(m.id), m);
      if (line.topic === 'presence') {
        presence++;
        expect(line.event.event?.data).toBe(sized('\uFEFF', 400));
      }
    }
    expect(presence).toBeGreaterThanOrEqual(2);
    for (const [id, message] of sent) {
      const got = said.get(id) ?? [...said.values()].find((m) => m.name === message.name);
      expect(got, id).toBeDefined();
      for (const field of ['name', 'data', 'clientId'] as const) {
        const v = message[field];
        if (typeof v === 'string') expect(got![field] === v, `${id}: ${field}`).toBe(true);
        else if (v instanceof Uint8Array) expect(got![field], `${id}: ${field}`).toBe(Buffer.from(v).toString('base64'));
      }
    }

    const exported = await replay(...args, '--with-proof');
    expect(exported.code, exported.stderr).toBe(0);
    const file = join(t.dataDir, 'export.ndjson');
    writeFileSync(file, exported.stdout);
    const verified = await replay('--verify-file', file);
    expect(verified.code, verified.stdout + verified.stderr).toBe(0);
    expect(verified.stderr).toMatch(/^replay: verified .*export\.ndjson: \d+ records/m);
  }, 180_000);
});
