// A raw comet (HTTP long polling) client of the realtime gateway, request by request, for tests that
// must do what the SDK never would: a recv never made, too many at once, a huge send. Bodies are
// decoded with @msgpack/msgpack and JSON.parse, not with the service's own codec.
import { decode as decodeMsgpack, encode as encodeMsgpack } from '@msgpack/msgpack';
import type { Format, Pm } from './raw-realtime.js';

export interface CometReply {
  status: number;
  /** The protocol messages of a 200 answer. */
  messages: Pm[];
  /** The spec's `{error}` body of a refusal. */
  error?: { code: number; statusCode: number; message: string };
}

const CONTENT_TYPES = { json: 'application/json', msgpack: 'application/x-msgpack' } as const;

export class CometClient {
  private constructor(
    readonly port: number,
    readonly query: URLSearchParams,
    readonly format: Format,
    /** The connectionKey of the CONNECTED, which names the transport's URLs. */
    readonly key: string,
    readonly connected: Pm,
  ) {}

  /** GET /comet/connect: the client, and the connect's answer (CONNECTED, or a refusal). */
  static async connect(port: number, query: Record<string, string>, format: Format = 'json'): Promise<{ client?: CometClient; reply: CometReply }> {
    const params = new URLSearchParams({ v: '6', ...(format === 'msgpack' ? { format } : {}), ...query });
    const reply = await CometClient.read(await fetch(`http://127.0.0.1:${port}/comet/connect?${params}`), format);
    const connected = reply.messages.find((m) => m.action === 4);
    const key = (connected?.connectionDetails as { connectionKey?: string } | undefined)?.connectionKey;
    const credentials = new URLSearchParams();
    for (const name of ['key', 'access_token', 'format']) if (params.has(name)) credentials.set(name, params.get(name)!);
    return { client: key ? new CometClient(port, credentials, format, key, connected!) : undefined, reply };
  }

  static async read(res: Response, format: Format): Promise<CometReply> {
    const bytes = Buffer.from(await res.arrayBuffer());
    if (res.status === 204 || bytes.length === 0) return { status: res.status, messages: [] };
    const value = (res.headers.get('content-type') ?? '').includes('msgpack') ? decodeMsgpack(bytes) : JSON.parse(bytes.toString());
    if (Array.isArray(value)) return { status: res.status, messages: value as Pm[] };
    return { status: res.status, messages: [], error: (value as { error: CometReply['error'] }).error };
  }

  url(path: string, key = this.key): string {
    return `http://127.0.0.1:${this.port}/comet/${encodeURIComponent(key)}/${path}?${this.query}`;
  }

  /** POST /send: ProtocolMessages (encoded in the client's format), or a body as is. */
  async send(messages: Pm[] | Buffer | string): Promise<CometReply> {
    const raw = Array.isArray(messages) ? (this.format === 'msgpack' ? encodeMsgpack(messages) : JSON.stringify(messages)) : messages;
    const body = typeof raw === 'string' ? raw : new Uint8Array(raw);
    const res = await fetch(this.url('send'), { method: 'POST', body, headers: { 'content-type': CONTENT_TYPES[this.format] } });
    return CometClient.read(res, this.format);
  }

  /** GET /recv: waits until the gateway answers (or `signal` aborts it). */
  async recv(signal?: AbortSignal): Promise<CometReply> {
    return CometClient.read(await fetch(this.url('recv'), { signal }), this.format);
  }

  /** Recvs until a message matches (at most `max` recvs); returns every message received. */
  async recvUntil(match: (pm: Pm) => boolean, max = 50): Promise<Pm[]> {
    const all: Pm[] = [];
    for (let i = 0; i < max; i++) {
      const { messages } = await this.recv();
      all.push(...messages);
      if (messages.some(match)) return all;
    }
    throw new Error(`no matching message in ${max} recvs (got ${JSON.stringify(all.slice(0, 3)).slice(0, 500)})`);
  }

  async close(): Promise<CometReply> {
    return CometClient.read(await fetch(this.url('close')), this.format);
  }
}
