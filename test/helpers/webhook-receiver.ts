// A webhook receiver in the test process: an HTTP server that keeps every item it is sent, checks
// each request's signature as a handler written for the platform would, and can be made to fail,
// answer slowly, or go away and come back on the same port.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { decode } from '@msgpack/msgpack';
import { verifySignature } from '../../src/webhooks/signing.js';

export interface ReceivedItem {
  id: string;
  name: string;
  source: string;
  webhookId: string;
  timestamp: number;
  data: { channelId: string; messages?: { id: string; name?: string; data?: unknown }[]; presence?: { action: number; clientId?: string }[] };
}

export interface Receiver {
  url: string;
  port: number;
  items: ReceivedItem[];
  requests: number;
  /** Requests whose X-Ably-Signature did not verify under the secret of the key X-Ably-Key named. */
  badSignatures: number;
  signedRequests: number;
  /** Requests being answered now, and the most at once. */
  concurrent: number;
  maxConcurrent: number;
  /** Answers each request after this many ms (a slow target). */
  delayMs: number;
  /** The Content-Type of each request answered, in order. */
  contentTypes: string[];
  /** Answers this status instead of 200 while set (a failing target). */
  failWith?: number;
  /** Messages per channel in the order they arrived, repeats dropped by item id (as a receiver would). */
  messagesByChannel(): Map<string, string[]>;
  stop(): Promise<void>;
  /** Listens again on the same port. */
  restart(): Promise<void>;
}

export async function startReceiver(secrets: Record<string, string> = {}, port = 0): Promise<Receiver> {
  let server: Server;
  const receiver: Receiver = {
    url: '',
    port,
    items: [],
    requests: 0,
    badSignatures: 0,
    signedRequests: 0,
    delayMs: 0,
    concurrent: 0,
    maxConcurrent: 0,
    contentTypes: [],
    messagesByChannel() {
      const seen = new Set<string>();
      const byChannel = new Map<string, string[]>();
      for (const item of this.items) {
        if (seen.has(item.id)) continue;
        seen.add(item.id);
        const list = byChannel.get(item.data.channelId) ?? [];
        for (const m of item.data.messages ?? []) list.push(String(m.data));
        byChannel.set(item.data.channelId, list);
      }
      return byChannel;
    },
    stop: () => new Promise<void>((done) => {
      server.closeAllConnections();
      server.close(() => done());
    }),
    restart: () => listen(receiver.port),
  };
  const handle = async (req: IncomingMessage, body: Buffer): Promise<number> => {
    receiver.requests++;
    receiver.maxConcurrent = Math.max(receiver.maxConcurrent, ++receiver.concurrent);
    try {
      if (receiver.delayMs > 0) await new Promise((r) => setTimeout(r, receiver.delayMs));
    } finally {
      receiver.concurrent--;
    }
    if (receiver.failWith) return receiver.failWith;
    const keyName = req.headers['x-ably-key'];
    if (typeof keyName === 'string') {
      receiver.signedRequests++;
      const secret = secrets[keyName];
      if (secret === undefined || !verifySignature(body, secret, req.headers['x-ably-signature'] as string | undefined)) receiver.badSignatures++;
    }
    const contentType = String(req.headers['content-type']);
    receiver.contentTypes.push(contentType);
    const parsed = (contentType === 'application/x-msgpack' ? decode(body) : JSON.parse(body.toString('utf8'))) as { items: ReceivedItem[] };
    receiver.items.push(...parsed.items);
    return 200;
  };
  const listen = (on: number): Promise<void> =>
    new Promise((done, fail) => {
      server = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          handle(req, Buffer.concat(chunks)).then(
            (status) => res.writeHead(status).end(),
            () => res.writeHead(500).end(),
          );
        });
      });
      server.once('error', fail);
      server.listen(on, '127.0.0.1', () => {
        receiver.port = (server.address() as AddressInfo).port;
        receiver.url = `http://127.0.0.1:${receiver.port}/hook`;
        done();
      });
    });
  await listen(port);
  return receiver;
}

/** Polls `condition` until it holds or `timeoutMs` passes; throws saying what it waited for. */
export async function until(what: string, condition: () => boolean, timeoutMs = 60_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
