import http from 'node:http';
import https from 'node:https';
import { checkedLookup, checkLiteralHost, TargetRefusedError } from './target-address.js';
import { RESERVED_HEADERS } from './rules.js';

export interface WebhookRequest {
  url: string;
  body: string | Uint8Array;
  /** Default application/json. */
  contentType?: string;
  headers: Record<string, string>;
}

export type SendResult = { ok: true; status: number } | { ok: false; status?: number; error: string; refused?: boolean };

/**
 * Posts one webhook request: http(s) only, the target's address checked at each request
 * (target-address.ts), redirects not followed (a 3xx is a failure), the answer's body read up to
 * 4 KiB and dropped, within `timeoutMs` from the start to the end of the answer.
 */
export function sendWebhook(request: WebhookRequest, options: { timeoutMs: number; allowPrivate: boolean; signal?: AbortSignal }): Promise<SendResult> {
  return new Promise((resolve) => {
    let url: URL;
    try {
      url = new URL(request.url);
      if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TargetRefusedError(`${url.protocol} targets are not served; use http or https`);
      checkLiteralHost(url.hostname, options.allowPrivate);
    } catch (err) {
      resolve({ ok: false, error: (err as Error).message, refused: err instanceof TargetRefusedError });
      return;
    }
    const client = url.protocol === 'https:' ? https : http;
    let settled = false;
    const done = (result: SendResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', abort);
      resolve(result);
    };
    let req: http.ClientRequest;
    try {
      req = client.request(url, {
        method: 'POST',
        // A rule's framing or connection header (rules.ts refuses them; a rule stored before it did may hold one) is not sent.
        headers: { ...Object.fromEntries(Object.entries(request.headers).filter(([name]) => !RESERVED_HEADERS.has(name.toLowerCase()))), 'content-type': request.contentType ?? 'application/json', 'content-length': typeof request.body === 'string' ? Buffer.byteLength(request.body) : request.body.byteLength },
        lookup: checkedLookup(options.allowPrivate),
        agent: false,
      });
    } catch (err) {
      // A header it cannot send (rules.ts checks them; a rule stored before it did may hold one).
      resolve({ ok: false, error: (err as Error).message });
      return;
    }
    const timer = setTimeout(() => {
      req.destroy();
      done({ ok: false, error: `no answer within ${options.timeoutMs} ms` });
    }, options.timeoutMs);
    // Stopping delivery (a shutdown, the rule removed) does not wait for a slow target's answer.
    const abort = (): void => {
      req.destroy();
      done({ ok: false, error: 'delivery stopped' });
    };
    if (options.signal?.aborted) abort();
    else options.signal?.addEventListener('abort', abort);
    req.on('response', (res) => {
      let read = 0;
      res.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (read > 4096) res.destroy();
      });
      const status = res.statusCode ?? 0;
      const finish = (): void =>
        done(status >= 200 && status < 300 ? { ok: true, status } : { ok: false, status, error: status >= 300 && status < 400 ? `answered ${status} (redirects are not followed)` : `answered ${status}` });
      res.on('end', finish);
      res.on('close', finish);
      res.on('error', finish);
    });
    req.on('error', (err) => done({ ok: false, error: err.message, refused: err instanceof TargetRefusedError || (err as { cause?: unknown }).cause instanceof TargetRefusedError }));
    req.end(request.body);
  });
}
