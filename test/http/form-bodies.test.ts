import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, listening, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';

/**
 * Form bodies (spec: Publish messages to a channel, "Request body format"): a form is what curl
 * sends when -d has no Content-Type, so a JSON text sent that way must be refused (400, nothing
 * appended), never stored as an empty message. Over real HTTP, the first test with curl itself.
 */

const run = promisify(execFile);
let t: TestService;
let base: string;
beforeAll(async () => {
  t = await startTestService();
  base = `http://127.0.0.1:${await listening(t)}`;
});
afterAll(() => t.close());

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

const post = (path: string, body: string, headers: Record<string, string> = FORM, auth: string | undefined = t.auth) =>
  fetch(`${base}${path}`, { method: 'POST', headers: { ...(auth ? { authorization: auth } : {}), ...headers }, body });

const history = async (channel: string): Promise<Record<string, unknown>[]> => {
  const res = await fetch(`${base}/channels/${channel}/messages`, { headers: { authorization: t.auth } });
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, unknown>[];
};

async function expectRefusal(res: Response, status: number, code: number, message: RegExp): Promise<void> {
  const body = (await res.json()) as { error: { code: number; statusCode: number; message: string } };
  expect(res.status).toBe(status);
  expect(body.error).toMatchObject({ code, statusCode: status });
  expect(body.error.message).toMatch(message);
  expect(res.headers.get('x-ably-errorcode')).toBe(String(code));
}

describe('publish with a form body (spec: Publish messages to a channel)', () => {
  it('curl -d with JSON and no Content-Type: 400 naming application/json, and nothing is appended', async () => {
    const channel = uniqueChannel();
    const key = t.key;
    const { stdout } = await run('curl', [
      '-s', '-w', '\n%{http_code}', '-u', key,
      '-d', '{"name":"greeting","data":"hello"}',
      `${base}/channels/${channel}/messages`,
    ]);
    const [body, status] = stdout.trimEnd().split('\n');
    expect(status).toBe('400');
    const error = (JSON.parse(body) as { error: { code: number; message: string } }).error;
    expect(error.code).toBe(40001);
    expect(error.message).toMatch(/Content-Type: application\/json/);
    expect(await history(channel)).toEqual([]);
  });

  it('the same command with the JSON header publishes the message', async () => {
    const channel = uniqueChannel();
    const { stdout } = await run('curl', [
      '-s', '-o', '/dev/null', '-w', '%{http_code}', '-u', t.key,
      '-H', 'Content-Type: application/json',
      '-d', '{"name":"greeting","data":"hello"}',
      `${base}/channels/${channel}/messages`,
    ]);
    expect(stdout).toBe('201');
    expect(await history(channel)).toMatchObject([{ name: 'greeting', data: 'hello' }]);
  });

  it('a form with the Message fields publishes them', async () => {
    const channel = uniqueChannel();
    expect((await post(`/channels/${channel}/messages`, 'name=form&data=a+b%C3%A9&clientId=c1')).status).toBe(201);
    expect(await history(channel)).toMatchObject([{ name: 'form', data: 'a bé', clientId: 'c1' }]);
  });

  it('a form with an unknown field: 400 naming the field and the fields a form may hold; nothing appended', async () => {
    const channel = uniqueChannel();
    await expectRefusal(await post(`/channels/${channel}/messages`, 'name=a&colour=red'), 400, 40001, /unknown form field "colour".*name, data/);
    expect(await history(channel)).toEqual([]);
  });

  it('an empty form or one with no known field: 400; nothing appended', async () => {
    const channel = uniqueChannel();
    await expectRefusal(await post(`/channels/${channel}/messages`, ''), 400, 40001, /application\/json/);
    await expectRefusal(await post(`/channels/${channel}/messages`, '&&'), 400, 40001, /none of the fields/);
    expect(await history(channel)).toEqual([]);
  });

  it('a JSON array sent as a form: 400', async () => {
    const channel = uniqueChannel();
    await expectRefusal(await post(`/channels/${channel}/messages`, '[{"name":"a"}]'), 400, 40001, /holds JSON/);
    expect(await history(channel)).toEqual([]);
  });
});

describe('token request with a form body (spec: Request an access token)', () => {
  it('a form with the token request fields issues a token', async () => {
    const res = await post(`/keys/${t.key.split(':')[0]}/requestToken`, `timestamp=${Date.now()}&clientId=form-client`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ clientId: 'form-client', keyName: t.key.split(':')[0] });
  });

  it('a JSON token request sent as a form: 400 naming application/json', async () => {
    const res = await post(`/keys/${t.key.split(':')[0]}/requestToken`, JSON.stringify({ timestamp: Date.now() }));
    await expectRefusal(res, 400, 40001, /Content-Type: application\/json/);
  });
});

describe('routes whose bodies a form cannot express refuse forms (415)', () => {
  const keyName = () => t.key.split(':')[0];
  const routes: [string, () => string, () => string | undefined][] = [
    ['POST /messages (batch publish)', () => '/messages', () => t.auth],
    ['POST /keys/<keyName>/revokeTokens', () => `/keys/${keyName()}/revokeTokens`, () => t.auth],
    ['POST /stats', () => '/stats', () => t.auth],
    ['POST /apps (sandbox)', () => '/apps', () => undefined],
  ];
  it.each(routes)('%s: 415 naming the JSON type', async (_name, path, auth) => {
    await expectRefusal(await post(path(), 'channels=a&messages=b', FORM, auth()), 415, 40001, /application\/json/);
  });

  it('the credentials are checked before the form is refused', async () => {
    const res = await post('/messages', 'channels=a', FORM, basic('nope:secret'));
    expect(res.status).toBe(401);
  });
});
