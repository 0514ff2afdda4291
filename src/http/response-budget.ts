import type { FastifyReply } from 'fastify';
import { ServiceError } from '../errors.js';

/** Response bodies smaller than this are not counted: they are bounded by connections × this size. */
const COUNTED_FROM = 16 * 1024;

/**
 * The bytes of response bodies handed to Node but not yet written out, all clients together,
 * bounded (limits: maxInflightResponseBytes). A page of history can be 60 MB (1,000 messages of
 * 60 KB), and Node keeps a reply's bytes until the client reads them, with no time limit: 30
 * connections that asked for such a page and read nothing held 1.8 GB for as long as they stayed
 * open. A large reply that would go over the budget is refused with 50004 (503, retry) instead; a
 * reply is always sent when nothing else is held, so one larger than the budget still goes out.
 * The bytes are given back when the reply is done (or the connection closes).
 */
export class ResponseBudget {
  private used = 0;

  constructor(readonly max: number) {}

  /** Bytes held now. */
  get held(): number {
    return this.used;
  }

  /** Whether a reply body of `bytes` may be sent now; if so, its bytes are held until the reply closes. */
  hold(reply: FastifyReply, bytes: number): boolean {
    if (bytes < COUNTED_FROM) return true;
    if (this.used > 0 && this.used + bytes > this.max) return false;
    this.used += bytes;
    reply.raw.once('close', () => {
      this.used -= bytes;
    });
    return true;
  }

  refusal(): ServiceError {
    return new ServiceError('serverBusy', 'the service is sending too many large responses to clients that have not read them yet; retry shortly');
  }
}
