// Real HTTP against the listening service. node:http sends a request target exactly as given
// (bytes 0x21-0xff, so bad percent-encodings and raw non-UTF-8 bytes reach the server's router);
// fetch would normalise the URL first (resolving `..`, re-encoding), hiding what the fuzzer made.
import { Agent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { connect } from 'node:net';

export interface FuzzRequest {
  method: string;
  /** The request target as sent: path and query, already encoded (or deliberately mis-encoded). */
  target: string;
  headers: Record<string, string>;
  body?: Buffer;
  /** What the body is, for failure reports (a 2 MB body is not printed). */
  label?: string;
  /** Set when the input must be refused (a 2xx for it is a failure): why. */
  mustRefuse?: string;
}

export interface FuzzResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** A request that got no response: the connection failed, or nothing came back in time. */
export class NoResponse extends Error {}

const HANG_MS = 15_000;

export class HttpClient {
  // A connection per request: a bad request may rightly end its connection, and a kept-alive
  // socket would carry that into the next input's result.
  private readonly agent = new Agent({ keepAlive: false });

  constructor(private readonly port: number) {}

  send(req: FuzzRequest): Promise<FuzzResponse> {
    return new Promise((resolve, reject) => {
      const headers: Record<string, string | number> = { ...req.headers };
      if (req.body !== undefined) headers['content-length'] = req.body.length;
      let outgoing;
      try {
        outgoing = httpRequest({ host: '127.0.0.1', port: this.port, method: req.method, path: req.target, headers, agent: this.agent });
      } catch (err) {
        // node:http refused to send it (a character it will not put on the wire): not the server's doing.
        reject(new TypeError(`node:http refused the request: ${(err as Error).message}`));
        return;
      }
      let answered = false;
      outgoing.setTimeout(HANG_MS, () => outgoing.destroy(new NoResponse(`TIMEOUT: no response within ${HANG_MS} ms`)));
      outgoing.on('response', (res) => {
        answered = true;
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', (err) => reject(new NoResponse(`response broke off: ${err.message}`)));
      });
      outgoing.on('error', (err) => {
        if (!answered) reject(err instanceof NoResponse ? err : new NoResponse(`${(err as NodeJS.ErrnoException).code ?? ''} ${err.message}`));
      });
      outgoing.end(req.body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/**
 * Bytes written to a fresh TCP connection, and what came back until the server closed it (or
 * `waitMs` passed): for requests no HTTP client library will send.
 */
export function rawExchange(port: number, bytes: Buffer, waitMs = 5000): Promise<{ raw: Buffer; closed: boolean }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (closed: boolean): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ raw: Buffer.concat(chunks), closed });
    };
    const timer = setTimeout(() => finish(false), waitMs);
    socket.on('data', (c) => chunks.push(c));
    socket.on('end', () => finish(true));
    socket.on('close', () => finish(true));
    // A reset after the response (the server gave up on the rest of our bytes) still counts.
    socket.on('error', () => finish(true));
    socket.write(bytes);
  });
}

/** The first HTTP response in raw bytes (Content-Length or chunked body), or undefined. */
export function parseRawResponse(raw: Buffer): FuzzResponse | undefined {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const head = raw.subarray(0, end).toString('latin1').split('\r\n');
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(head[0])?.[1];
  if (!status) return undefined;
  const headers: IncomingHttpHeaders = {};
  for (const line of head.slice(1)) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  let rest = raw.subarray(end + 4);
  let body: Buffer;
  if (headers['transfer-encoding'] === 'chunked') {
    const parts: Buffer[] = [];
    for (;;) {
      const lineEnd = rest.indexOf('\r\n');
      if (lineEnd < 0) break;
      const size = parseInt(rest.subarray(0, lineEnd).toString('latin1'), 16);
      if (!(size > 0)) break;
      parts.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
      rest = rest.subarray(lineEnd + 2 + size + 2);
    }
    body = Buffer.concat(parts);
  } else {
    const length = Number(headers['content-length'] ?? rest.length);
    body = rest.subarray(0, length);
  }
  return { status: Number(status), headers, body };
}
