// Fuzz tier, below the HTTP client libraries: bytes on a raw TCP connection, so the HTTP parser's
// and the router's refusals are covered (malformed request lines and headers, smuggling-shaped
// framing, over-long URLs and headers, raw non-UTF-8 bytes, bad percent-encodings), plus valid
// requests with random bytes changed. Every response must keep the same rules as the routes'
// (no 5xx, the spec's error shape); GET /time must keep answering. Seeded like routes.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { startTestService, type TestService, listening } from '../helpers/service.js';
import { fuzzSettings, replayHint } from './settings.js';
import { parseRawResponse, rawExchange } from './http-client.js';
import { violationsOf } from './invariants.js';
import { describeFailures, Tally } from './tally.js';
import { TimeWatch } from './time-watch.js';

const settings = fuzzSettings();
const tally = new Tally();
let t: TestService;
let port: number;
let watch: TimeWatch;

const b = (s: string): Buffer => Buffer.from(s, 'latin1');

/** Hand-made malformed requests, each named for what it breaks. */
function malformed(auth: string): [string, Buffer][] {
  const h = `Host: 127.0.0.1\r\nAuthorization: ${auth}\r\nConnection: close`;
  return [
    ['garbage request line', b('GARBAGE\r\n\r\n')],
    ['unknown method', b(`FOO /time HTTP/1.1\r\n${h}\r\n\r\n`)],
    ['lower-case method', b(`get /time HTTP/1.1\r\n${h}\r\n\r\n`)],
    ['HTTP/9.9', b(`GET /time HTTP/9.9\r\n${h}\r\n\r\n`)],
    ['no HTTP version', b(`GET /time\r\n${h}\r\n\r\n`)],
    ['bare LF line ends', b(`GET /time HTTP/1.1\nHost: x\nConnection: close\n\n`)],
    ['header without a colon', b(`GET /time HTTP/1.1\r\n${h}\r\nBad Header\r\n\r\n`)],
    ['NUL in a header value', b(`GET /time HTTP/1.1\r\n${h}\r\nX-A: a\u0000b\r\n\r\n`)],
    ['space before a header colon', b(`GET /time HTTP/1.1\r\n${h}\r\nX-A : b\r\n\r\n`)],
    ['two Content-Length headers that differ', b(`POST /channels/raw/messages HTTP/1.1\r\n${h}\r\nContent-Type: application/json\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n{"a":1}`)],
    ['negative Content-Length', b(`POST /channels/raw/messages HTTP/1.1\r\n${h}\r\nContent-Type: application/json\r\nContent-Length: -1\r\n\r\n`)],
    ['Transfer-Encoding and Content-Length together', b(`POST /channels/raw/messages HTTP/1.1\r\n${h}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n`)],
    ['a chunk size that is not hex', b(`POST /channels/raw/messages HTTP/1.1\r\n${h}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`)],
    ['unknown Transfer-Encoding', b(`POST /channels/raw/messages HTTP/1.1\r\n${h}\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked, foo\r\n\r\n0\r\n\r\n`)],
    ['a URL of 100,000 bytes', b(`GET /channels/${'a'.repeat(100_000)}/messages HTTP/1.1\r\n${h}\r\n\r\n`)],
    ['a header of 20,000 bytes', b(`GET /time HTTP/1.1\r\n${h}\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`)],
    ['1,000 headers', b(`GET /time HTTP/1.1\r\n${h}\r\n${Array.from({ length: 1000 }, (_, i) => `X-H${i}: v`).join('\r\n')}\r\n\r\n`)],
    ['bad percent-encoding in a channel name', b(`GET /channels/%zz/messages HTTP/1.1\r\n${h}\r\n\r\n`)],
    ['a lone % in a channel name', b(`GET /channels/a%/messages HTTP/1.1\r\n${h}\r\n\r\n`)],
    ['percent-encoded invalid UTF-8 in a channel name', b(`GET /channels/%C3%28/messages HTTP/1.1\r\n${h}\r\n\r\n`)],
    ['raw invalid UTF-8 bytes in the path', Buffer.concat([b('GET /channels/'), Buffer.from([0xff, 0xfe, 0xc3]), b(`/messages HTTP/1.1\r\n${h}\r\n\r\n`)])],
    ['raw UTF-8 bytes in the path', Buffer.concat([b('GET /channels/'), Buffer.from('é€', 'utf8'), b(`/messages HTTP/1.1\r\n${h}\r\n\r\n`)])],
    ['a channel name over the length limit', b(`GET /channels/${'x'.repeat(5000)}/messages HTTP/1.1\r\n${h}\r\n\r\n`)],
    ['absolute-form target', b(`GET http://elsewhere.example/time HTTP/1.1\r\n${h}\r\n\r\n`)],
    ['asterisk target', b(`OPTIONS * HTTP/1.1\r\n${h}\r\n\r\n`)],
    ['target without a leading slash', b(`GET time HTTP/1.1\r\n${h}\r\n\r\n`)],
    ['dot segments', b(`GET /channels/../../time HTTP/1.1\r\n${h}\r\n\r\n`)],
    ['invalid UTF-8 in a query value', b(`GET /channels/raw/messages?limit=%FF%FE HTTP/1.1\r\n${h}\r\n\r\n`)],
    ['bad percent-encoding in the query', b(`GET /channels/raw/messages?limit=%zz HTTP/1.1\r\n${h}\r\n\r\n`)],
    ['a GET with a body', b(`GET /time HTTP/1.1\r\n${h}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`)],
    ['a body shorter than its Content-Length, then close', b(`POST /channels/raw/messages HTTP/1.1\r\n${h}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a"`)],
  ];
}

/** A valid publish, as bytes, for the mutation property. */
const validPublish = (auth: string): Buffer =>
  b(`POST /channels/raw-mutated/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${auth}\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: 25\r\n\r\n{"name":"n","data":"abc"}`);

function check(route: string, input: string, raw: Buffer): void {
  const res = parseRawResponse(raw);
  if (!res) {
    // Closing a connection that sent garbage without answering is allowed; hanging is caught by TimeWatch.
    tally.record(route, 'none', input, []);
    return;
  }
  tally.record(route, res.status, input, violationsOf(res, input.startsWith('HEAD') ? 'HEAD' : 'GET'));
}

beforeAll(async () => {
  t = await startTestService();
  port = await listening(t);
  watch = new TimeWatch(port);
  watch.start();
});

afterAll(async () => {
  const time = watch?.stop();
  console.log(
    `\nfuzz tier, raw HTTP: seed ${settings.seed}\n${tally.table()}\n` +
      (time ? `GET /time during the run: ${time.answered} answered, ${time.failed} failed, slowest ${time.worstMs.toFixed(0)} ms\n` : ''),
  );
  await t?.close();
});

describe('fuzz: malformed HTTP on a raw connection (issue 10)', () => {
  it("hand-made malformed requests: no 5xx, every answer in the spec's error shape", { timeout: 120_000 }, async () => {
    const route = 'raw: malformed requests';
    for (const [name, bytes] of malformed(t.auth)) {
      const { raw } = await rawExchange(port, bytes, 2000);
      check(route, name, raw);
    }
    const failures = tally.failuresOf(route);
    if (failures.length > 0) expect.fail(describeFailures(failures, 'the inputs are fixed (test/fuzz/raw-http.test.ts, malformed())'));
    expect(watch.failures()).toEqual([]);
  });

  it('valid requests with random bytes changed: no 5xx, errors in the shape, /time answers', { timeout: 120_000 }, async () => {
    const route = 'raw: mutated requests';
    const base = validPublish(t.auth);
    const mutation = fc.array(fc.tuple(fc.nat({ max: base.length - 1 }), fc.integer({ min: 0, max: 255 }), fc.constantFrom('set', 'insert', 'delete')), { minLength: 1, maxLength: 4 });
    await fc.assert(
      fc.asyncProperty(mutation, async (edits) => {
        let bytes = Buffer.from(base);
        for (const [at, value, op] of edits) {
          const i = Math.min(at, bytes.length - 1);
          if (op === 'set') bytes[i] = value;
          else if (op === 'insert') bytes = Buffer.concat([bytes.subarray(0, i), Buffer.from([value]), bytes.subarray(i)]);
          else bytes = Buffer.concat([bytes.subarray(0, i), bytes.subarray(i + 1)]);
        }
        // A mutated Content-Length may leave the server waiting for bytes that never come; that is not a hang.
        const { raw } = await rawExchange(port, bytes, 500);
        check(route, `${JSON.stringify(bytes.toString('latin1').slice(0, 160))} (edits ${JSON.stringify(edits)})`, raw);
      }),
      { seed: settings.seed, numRuns: Math.min(settings.runs, 300), plugins: [fc.interruptAfterTimeLimit(20_000)] },
    );
    const failures = tally.failuresOf(route);
    if (failures.length > 0) expect.fail(describeFailures(failures, replayHint(settings)));
    expect(watch.failures()).toEqual([]);
  });
});
