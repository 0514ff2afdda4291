import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { startTestService, uniqueChannel } from '../helpers/service.js';
import { replayScope } from '../../src/audit/replay-scope.js';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';

const run = promisify(execFile);

describe('replay for audits (ARCHITECTURE: beyond the spec)', () => {
  it("streams one channel's messages between two instants from the log, in order, as the CLI prints them", async () => {
    let now = Date.UTC(2030, 0, 1);
    const t = await startTestService({}, { clock: { now: () => now } });
    const channel = uniqueChannel('audit');
    const publish = async (ch: string, name: string) => {
      const res = await t.service.app.inject({
        method: 'POST',
        url: `/channels/${ch}/messages`,
        headers: { authorization: t.auth, 'content-type': 'application/json' },
        payload: { name, data: name },
      });
      expect(res.statusCode).toBe(201);
      now += 1000;
    };
    await publish(channel, 'before');
    const from = now;
    await publish(channel, 'a');
    await publish('other', 'noise');
    await publish(channel, 'b');
    const to = now - 1;
    await publish(channel, 'after');
    const appId = t.service.registry.all()[0].appId;
    await t.close();

    const log = new EmbeddedLog({ path: `${t.dataDir}/log.db` });
    const seen: string[] = [];
    let progress = 0;
    const request = { appId, channels: { kind: 'channel' as const, name: channel }, include: new Set(['messages' as const]), from, to };
    for await (const { line } of replayScope(log, request, () => progress++)) seen.push(...(line.event.messages as { name: string }[]).map((m) => m.name));
    await log.close();
    expect(seen).toEqual(['a', 'b']);
    expect(progress).toBeGreaterThan(0);

    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'src/cli/replay.ts', '--app', appId, '--channel', channel, '--from', String(from), '--to', String(to)], {
      env: { ...process.env, KAFKA_BROKERS: '', CLICKHOUSE_URL: '', DATA_DIR: t.dataDir },
    });
    const lines = stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.map((l) => l.event.messages[0].name)).toEqual(['a', 'b']);
    // Each line names its place, its time and the credential that published (the test's root key).
    expect(lines[0]).toMatchObject({ topic: 'messages', partition: expect.any(Number), offset: expect.any(Number), time: from, credential: { keyName: Buffer.from(t.auth.slice('Basic '.length), 'base64').toString().split(':')[0] } });
    // stderr is not a terminal here: no progress bar, one summary line.
    expect(stderr).not.toContain('%');
    expect(stderr).toMatch(/^replay: 2 records of messages of app .* log records read/m);
  }, 60_000);

  it('refuses a call without --app with a usage line', async () => {
    const failed = await run(process.execPath, ['--import', 'tsx', 'src/cli/replay.ts'], { env: { ...process.env, KAFKA_BROKERS: '', CLICKHOUSE_URL: '' } }).catch((e) => e);
    expect(failed.code).toBe(2);
    expect(failed.stderr).toMatch(/--app is required \(see --help\)/);
  });
});
