import type { FastifyReply } from 'fastify';
import { ServiceError } from '../errors.js';

/** Response bodies smaller than this are not counted: they are bounded by connections × this size. */
const COUNTED_FROM = 16 * 1024;

/**
 * The bytes of response bodies handed to Node but not yet written out, all clients together,
 * bounded (limits: maxInflightResponseBytes). A page of history can be 60 MB (1,000 messages of
 * 60 KB), and Node keeps a reply's bytes until the client reads them, with no time limit: 30
 * connections that asked for such a page and read nothing held 1.8 GB for as long as they stayed
 * open. A large reply that would go over the budget, or over its app's quarter of it, is refused
 * with 50004 (503, retry) instead; a reply is always sent when nothing else is held (by anyone, by
 * its app), so one larger than the budget still goes out.
 * The bytes are given back when the reply is done (or the connection closes).
 */
export class ResponseBudget {
  private used = 0;
  /** Bytes held by each app's replies: one app may hold a quarter of the budget, so its clients alone cannot refuse every other app's. */
  private readonly byApp = new Map<string, number>();

  constructor(readonly max: number) {}

  /** Bytes held now: all apps, or one app's. */
  held(appId?: string): number {
    return appId === undefined ? this.used : (this.byApp.get(appId) ?? 0);
  }

  /**
   * Whether a reply body of `bytes` for `appId` (undefined: a route without credentials) may be
   * sent now; if so, its bytes are held until the reply closes.
   */
  hold(reply: FastifyReply, bytes: number, appId: string | undefined): boolean {
    if (bytes < COUNTED_FROM) return true;
    if (this.used > 0 && this.used + bytes > this.max) return false;
    const ofApp = appId === undefined ? 0 : (this.byApp.get(appId) ?? 0);
    if (ofApp > 0 && ofApp + bytes > this.max / 4) return false;
    this.used += bytes;
    if (appId !== undefined) this.byApp.set(appId, ofApp + bytes);
    reply.raw.once('close', () => {
      this.used -= bytes;
      if (appId === undefined) return;
      const left = this.byApp.get(appId)! - bytes;
      if (left === 0) this.byApp.delete(appId);
      else this.byApp.set(appId, left);
    });
    return true;
  }

  refusal(): ServiceError {
    return new ServiceError('serverBusy', 'the service is sending too many large responses to clients that have not read them yet; retry shortly');
  }
}
