import { Transform, type TransformCallback } from 'node:stream';
import type { FastifyReply, FastifyRequest, preParsingHookHandler } from 'fastify';
import { ServiceError } from '../errors.js';

/** Bodies smaller than this are not counted: they are bounded by connections × this size. */
const COUNTED_FROM = 16 * 1024;

/**
 * The bytes of request bodies being received or held by requests in progress, all clients
 * together, bounded (limits: maxInflightBodyBytes): slow or large bodies from many connections
 * cannot exhaust memory. A body that would go over the budget is refused with 50004 (503, retry).
 * A body with a Content-Length reserves it up front; a chunked one reserves as its bytes arrive.
 * The bytes are given back when the reply is done (or the connection closes).
 */
export class BodyBudget {
  private used = 0;

  constructor(readonly max: number) {}

  /** The preParsing hook that counts a request's body against the budget. */
  readonly hook: preParsingHookHandler = (request, reply, payload, done) => {
    const declared = request.headers['content-length'];
    if (declared !== undefined) {
      const length = Number(declared);
      // Small bodies are not counted, and one over the route's limit is refused by fastify (413).
      if (!(length >= COUNTED_FROM) || length > request.routeOptions.bodyLimit) return done(null, payload);
      if (!this.reserve(length)) return done(this.refusal(), undefined);
      this.releaseOnReply(reply, length);
      return done(null, payload);
    }
    if (request.headers['transfer-encoding'] === undefined) return done(null, payload);
    const counting = new CountingStream(this, reply);
    payload.pipe(counting);
    done(null, counting as unknown as typeof payload);
  };

  reserve(bytes: number): boolean {
    if (this.used + bytes > this.max) return false;
    this.used += bytes;
    return true;
  }

  release(bytes: number): void {
    this.used -= bytes;
  }

  releaseOnReply(reply: FastifyReply, bytes: number): void {
    reply.raw.once('close', () => this.release(bytes));
  }

  refusal(): ServiceError {
    return new ServiceError('serverBusy', 'the service is receiving too many request bodies at once; retry shortly');
  }
}

/** A chunked body, reserving its bytes from the budget as they arrive. */
class CountingStream extends Transform {
  private reserved = 0;
  /** fastify reads the declared and received lengths of the stream it parses */
  receivedEncodedLength = 0;

  constructor(
    private readonly budget: BodyBudget,
    reply: FastifyReply,
  ) {
    super();
    reply.raw.once('close', () => budget.release(this.reserved));
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    if (!this.budget.reserve(chunk.length)) return callback(this.budget.refusal());
    this.reserved += chunk.length;
    this.receivedEncodedLength += chunk.length;
    callback(null, chunk);
  }
}

