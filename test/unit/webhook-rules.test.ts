import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseRule } from '../../src/webhooks/rules.js';
import { matcherOf } from '../../src/webhooks/envelope.js';
import { isPrivateAddress } from '../../src/webhooks/target-address.js';
import { loadAppsFile } from '../../src/apps/apps-file.js';
import { signBody, verifySignature } from '../../src/webhooks/signing.js';
import { sendWebhook } from '../../src/webhooks/sender.js';
import { startReceiver } from '../helpers/webhook-receiver.js';

const rule = { ruleType: 'http', requestMode: 'batch', source: { type: 'channel.message', channelFilter: '^a' }, target: { url: 'https://example.com/h', enveloped: true, format: 'json' } };

describe('webhook rules in the platform shape', () => {
  it('reads the platform rule JSON and gives it an id', () => {
    const parsed = parseRule(rule);
    expect(parsed).toMatchObject({ ruleType: 'http', requestMode: 'batch', source: { type: 'channel.message', channelFilter: '^a' }, target: { url: 'https://example.com/h', enveloped: true, format: 'json' } });
    expect(parsed.id).toMatch(/^[A-Za-z0-9_-]{6}$/);
  });

  it.each([
    [{ ...rule, ruleType: 'amqp' }, /ruleType must be "http"/],
    [{ ...rule, source: { type: 'channel.annotation' } }, /source.type must be one of/],
    [{ ...rule, source: { type: 'channel.message', channelFilter: '(' } }, /not a regular expression/],
    [{ ...rule, source: { type: 'channel.message', channelFilter: '^(a)\\1' } }, /linear time/],
    [{ ...rule, source: { type: 'channel.message', channelFilter: '^a(?!b)' } }, /linear time/],
    [{ ...rule, target: { url: 'file:///etc/passwd' } }, /http or https/],
    [{ ...rule, target: { url: 'https://u:p@example.com/' } }, /credentials/],
    [{ ...rule, target: { url: 'https://example.com/', headers: [{ name: 'X-A', value: 'a\r\nb' }] } }, /headers/],
    // Characters an HTTP header cannot carry: Node's request refused them at each delivery.
    [{ ...rule, target: { url: 'https://example.com/', headers: [{ name: 'X-A', value: 'a\u0000b' }] } }, /headers/],
    [{ ...rule, target: { url: 'https://example.com/', headers: [{ name: 'X-A', value: 'caf\u0100' }] } }, /headers/],
    // The request's framing and connection are the sender's: Transfer-Encoding went out beside Content-Length.
    [{ ...rule, target: { url: 'https://example.com/', headers: [{ name: 'Transfer-Encoding', value: 'chunked' }] } }, /headers may not set Transfer-Encoding/],
    [{ ...rule, target: { url: 'https://example.com/', headers: [{ name: 'host', value: 'internal' }] } }, /headers may not set host/],
    [{ ...rule, target: { url: 'https://example.com/', headers: [{ name: 'Content-Length', value: '0' }] } }, /headers may not set Content-Length/],
  ])('refuses %j naming the field', (raw, message) => {
    expect(() => parseRule(raw)).toThrow(message);
  });

  it('matches a channelFilter in time linear in the channel name: ^(a+)+$ (2^n steps for n a\'s and a "!" when backtracking: one publish blocked the process) answers at once', () => {
    const { filter } = matcherOf('a1', parseRule({ ...rule, source: { type: 'channel.message', channelFilter: '^(a+)+$' } }));
    // On the backtracking engine alone the next line would not return: past 50,000 backtracks V8 passes it to the linear one.
    expect(filter.test(`${'a'.repeat(2000)}!`)).toBe(false);
    expect(filter.test('a'.repeat(2000))).toBe(true);
    expect(matcherOf('a1', parseRule(rule)).filter.test('abc')).toBe(true);
  });

  it('matches a channelFilter without its capturing groups (the linear engine carried each group along every path: `(((a*)*)*)` 25 times took 130 ms a 2 KB name), and matches what the filter matches', () => {
    const groups = (re: RegExp): number => new RegExp(`${re.source}|`).exec('')!.length - 1;
    const filters = ['^(orders|payments):(eu|us)-[0-9]+$', '(((a*)*)*)'.repeat(25) + '$', '^(?<kind>orders|users)\\((x)\\)$', '^[(]a(b)[)]$', '^[\\](]+(c)$', '^(?:a)(b)?$', '[]|(q)', '^\\p{L}(z)'];
    const names = ['orders:eu-12', 'payments:us-', 'users(x)', 'orders(y)', '(ab)', '(a)', ']](c', ')c', 'a', 'ab', 'q', 'p{L}z', 'pLz', 'a'.repeat(300) + '!', ''];
    for (const source of filters) {
      const { filter } = matcherOf('a1', parseRule({ ...rule, source: { type: 'channel.message', channelFilter: source } }));
      expect(groups(new RegExp(source)), source).toBeGreaterThan(0);
      expect(groups(filter), source).toBe(0);
      for (const name of names) expect(filter.test(name), `${source} on ${name}`).toBe(new RegExp(source).test(name));
    }
  });

  it('APPS_FILE holds rules per app, and a bad one names its place in the file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cm-rules-'));
    const file = join(dir, 'apps.json');
    writeFileSync(file, JSON.stringify({ apps: [{ appId: 'a1', keys: [{ key: 'a1.k:s' }], rules: [{ ...rule, id: 'r1' }] }] }));
    expect(loadAppsFile(file, 0)[0].rules).toEqual([expect.objectContaining({ id: 'r1', requestMode: 'batch' })]);
    writeFileSync(file, JSON.stringify({ apps: [{ appId: 'a1', keys: [{ key: 'a1.k:s' }], rules: [{ ...rule, target: { url: 'gopher://x' } }] }] }));
    expect(() => loadAppsFile(file, 0)).toThrow(/apps\[0\]\.rules\[0\]\.target\.url must be http or https/);
  });
});

describe('webhook target addresses', () => {
  it.each(['127.0.0.1', '10.1.2.3', '172.20.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '::1', 'fd00::1', 'fe80::1', '::ffff:127.0.0.1', 'not-an-ip'])('%s is refused', (a) => {
    expect(isPrivateAddress(a)).toBe(true);
  });
  it.each(['93.184.216.34', '8.8.8.8', '2606:4700::1111', '::ffff:8.8.8.8'])('%s is allowed', (a) => {
    expect(isPrivateAddress(a)).toBe(false);
  });

  it('a loopback target is refused before any request, by literal and by name; allowed with the operator flag', async () => {
    const receiver = await startReceiver();
    try {
      const body = JSON.stringify({ items: [] });
      for (const url of [receiver.url, `http://localhost:${receiver.port}/hook`]) {
        const result = await sendWebhook({ url, body, headers: {} }, { timeoutMs: 2000, allowPrivate: false });
        expect(result).toMatchObject({ ok: false, refused: true });
      }
      expect(receiver.requests).toBe(0);
      expect(await sendWebhook({ url: receiver.url, body, headers: {} }, { timeoutMs: 2000, allowPrivate: true })).toMatchObject({ ok: true, status: 200 });
    } finally {
      await receiver.stop();
    }
  });

  it('a header the HTTP client refuses (a rule stored before they were checked) fails the request with the reason, as a failing target does: the promise does not reject', async () => {
    const result = await sendWebhook({ url: 'http://127.0.0.1:9/', body: '{}', headers: { 'X-A': 'caf\u0100' } }, { timeoutMs: 2000, allowPrivate: true });
    expect(result).toMatchObject({ ok: false, error: expect.stringMatching(/X-A/) });
  });

  it('a framing or connection header of a rule stored before they were refused is not sent: the request has Content-Length and no Transfer-Encoding (RFC 9112: never both)', async () => {
    const { createServer } = await import('node:net');
    const heads: string[] = [];
    const server = createServer((socket) => {
      let head = '';
      socket.on('data', (d) => {
        head += String(d);
        if (!head.includes('\r\n\r\n')) return;
        heads.push(head.slice(0, head.indexOf('\r\n\r\n')).toLowerCase());
        socket.end('HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as { port: number }).port;
    try {
      const headers = { 'Transfer-Encoding': 'chunked', Host: 'internal.example', 'X-Kept': 'yes' };
      expect(await sendWebhook({ url: `http://127.0.0.1:${port}/`, body: '{"items":[]}', headers }, { timeoutMs: 2000, allowPrivate: true })).toMatchObject({ ok: true });
      expect(heads).toHaveLength(1);
      expect(heads[0]).toContain('content-length: 12');
      expect(heads[0]).toContain(`host: 127.0.0.1:${port}`);
      expect(heads[0]).toContain('x-kept: yes');
      expect(heads[0]).not.toContain('transfer-encoding');
      expect(heads[0]).not.toContain('internal.example');
    } finally {
      server.close();
    }
  });

  it('a redirect is not followed: it fails the request', async () => {
    const { createServer } = await import('node:http');
    const server = createServer((_req, res) => res.writeHead(302, { location: 'http://169.254.169.254/' }).end());
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as { port: number }).port;
    try {
      const result = await sendWebhook({ url: `http://127.0.0.1:${port}/`, body: '{}', headers: {} }, { timeoutMs: 2000, allowPrivate: true });
      expect(result).toMatchObject({ ok: false, status: 302 });
    } finally {
      server.close();
    }
  });
});

describe('webhook signatures', () => {
  it('verify with the secret that signed the body and fail with another, or another body', () => {
    const signature = signBody('{"items":[]}', 'secret');
    expect(verifySignature('{"items":[]}', 'secret', signature)).toBe(true);
    expect(verifySignature('{"items":[]}', 'other', signature)).toBe(false);
    expect(verifySignature('{"items":[1]}', 'secret', signature)).toBe(false);
  });
});
