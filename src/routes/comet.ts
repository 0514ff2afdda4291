import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError } from '../errors.js';
import { sendError } from '../http/reply.js';
import { joinFrames } from '../realtime/comet/comet-frames.js';
import type { CometAnswer, CometTransport } from '../realtime/comet/comet-transport.js';

export interface CometRoutesOptions {
  /** The gateway's comet transport (undefined until the gateway starts: 503). */
  comet: () => CometTransport | undefined;
  /** Bytes of a send's body (REALTIME_COMET_MAX_SEND_BYTES). */
  maxSendBytes: number;
}

type KeyParams = { connectionKey: string };

const CONTENT_TYPES = { json: 'application/json', msgpack: 'application/x-msgpack' } as const;

const queryOf = (request: FastifyRequest): URLSearchParams => {
  const q = request.url.indexOf('?');
  return new URLSearchParams(q < 0 ? '' : request.url.slice(q + 1));
};

/**
 * The realtime gateway's comet transport (HTTP long polling, src/realtime/comet/comet-transport.ts)
 * on the REST port: `/comet/connect`, and `/comet/<connectionKey>/send`, `/recv`, `/close`,
 * `/disconnect`. Credentials go in the query, as for a WebSocket connect. Protocol messages go
 * in-band (status 200, an array the SDK reads as WebSocket frames); only a refusal of the request
 * itself (a body too large, too many requests waiting) is an HTTP error in the spec's format.
 */
export async function cometRoutes(app: FastifyInstance, opts: CometRoutesOptions): Promise<void> {
  // A send's body is cut into frames undecoded (comet-frames.ts), whatever its content type says.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));

  const transport = (): CometTransport => {
    const comet = opts.comet();
    if (!comet) throw new ServiceError('unavailable', 'the realtime gateway is not started yet; retry');
    return comet;
  };

  const answer = (request: FastifyRequest, reply: FastifyReply, result: CometAnswer): FastifyReply => {
    if ('error' in result) return sendError(request, reply, result.error);
    if ('empty' in result) {
      request.ctx?.countReply?.(request, 204);
      return reply.code(204).send();
    }
    const { format, batch } = result;
    // Told once the frames are out (SYNC pages are paced by it), or that they were not.
    reply.raw.once('finish', () => batch.written());
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) batch.written(new Error('comet response not written'));
    });
    // The client gone before the answer (its 'close' passed): the frames are not written.
    if (reply.raw.destroyed || request.raw.socket.destroyed) batch.written(new Error('comet response not written'));
    request.ctx?.countReply?.(request, 200);
    return reply.code(200).header('content-type', CONTENT_TYPES[format]).header('cache-control', 'no-store').send(joinFrames(batch.frames, format));
  };

  const config = { auth: 'none' as const };
  const tooLarge = (): ServiceError => new ServiceError('payloadTooLarge', `a comet send's body may hold at most ${opts.maxSendBytes} bytes (REALTIME_COMET_MAX_SEND_BYTES)`);

  app.get('/comet/connect', { config }, async (request, reply) => answer(request, reply, await transport().connect(queryOf(request), request.socket.remoteAddress)));

  app.post<{ Params: KeyParams }>('/comet/:connectionKey/send', {
    config,
    bodyLimit: opts.maxSendBytes,
    // A send that may not act on the connection its key names is answered before its body is
    // read (comet-transport.ts: refusal), so that only a connection's own client sends large bodies.
    onRequest: async (request, reply) => {
      const refused = await opts.comet()?.refusal(request.params.connectionKey, queryOf(request));
      if (refused) return answer(request, reply, refused);
    },
    // Refused unread (a Content-Length over the limit, or a body that grows past it): the
    // connection fails with the error the request is answered with.
    preParsing: (request, _reply, payload, done) => {
      const length = Number(request.headers['content-length']);
      if (!(length > opts.maxSendBytes)) return done(null, payload);
      const refusal = tooLarge();
      opts.comet()?.refuseSend(request.params.connectionKey, queryOf(request), refusal);
      done(refusal);
    },
    onError: (request, _reply, error, done) => {
      if ((error as { code?: string }).code === 'FST_ERR_CTP_BODY_TOO_LARGE') opts.comet()?.refuseSend(request.params.connectionKey, queryOf(request), tooLarge());
      done();
    },
    handler: async (request, reply) => {
      const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      return answer(request, reply, await transport().send(request.params.connectionKey, queryOf(request), body));
    },
  });

  app.get<{ Params: KeyParams }>('/comet/:connectionKey/recv', { config }, async (request, reply) => {
    const aborted = new AbortController();
    // The client gone before an answer (the response closes unfinished): the recv takes no
    // frames (they wait for the next). Once answered, the abort finds nothing to cancel.
    reply.raw.once('close', () => aborted.abort());
    return answer(request, reply, await transport().recv(request.params.connectionKey, queryOf(request), aborted.signal));
  });

  app.get<{ Params: KeyParams }>('/comet/:connectionKey/close', { config }, async (request, reply) =>
    answer(request, reply, transport().close(request.params.connectionKey, queryOf(request))),
  );

  app.get<{ Params: KeyParams }>('/comet/:connectionKey/disconnect', { config }, async (request, reply) =>
    answer(request, reply, transport().disconnect(request.params.connectionKey, queryOf(request))),
  );
}
