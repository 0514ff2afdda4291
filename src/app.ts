import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyPluginCallback, type FastifyRequest, type onRequestHookHandler } from 'fastify';
import { unpackValue } from './codec/msgpack.js';
import { ServiceError } from './errors.js';
import { toErrorBody } from './http/error-body.js';
import { resolveContext, headerOf, type ReplyCounter } from './http/request-context.js';
import { sendError } from './http/reply.js';
import { queryCredentialOf } from './http/query-credentials.js';
import type { Authenticator } from './auth/authenticate.js';
import type { Clock } from './clock.js';
import { dataSize } from './domain/message.js';
import type { PublishingConnection } from './messages/message.js';
import type { Limits } from './limits.js';
import { BodyBudget } from './http/body-budget.js';
import { ResponseBudget } from './http/response-budget.js';
import { clientError, frameworkError } from './http/framework-errors.js';
import { jsonShape, msgpackShape, type ShapeLimits } from './codec/value-shape.js';
import { isUtf8 } from 'node:buffer';
import { jsonTextWellFormed } from './codec/well-formed-text.js';
import { parseFormBody } from './http/form-body.js';
import { bodyStillArriving, lingerOnClose } from './http/lingering-close.js';
import type { Publisher } from './messages/publisher.js';
import { timeRoutes } from './routes/time.js';
import { channelMessagesRoutes, type HistoryReader } from './routes/channel-messages.js';
import { sandboxAppRoutes } from './routes/sandbox-apps.js';
import { requestTokenRoutes } from './routes/request-token.js';
import { revokeTokensRoutes } from './routes/revoke-tokens.js';
import type { AppAdmin, TokenRevoker } from './apps/app-writers.js';
import { appKeysRoutes } from './routes/app-keys.js';
import type { KeyAdmin } from './apps/key-admin.js';
import { batchPublishRoutes } from './routes/batch-publish.js';
import type { TokenService } from './auth/tokens.js';
import { channelPresenceRoutes, type PresenceReader } from './routes/channel-presence.js';
import { batchPresenceRoutes } from './routes/batch-presence.js';
import { statsRoutes } from './routes/stats.js';
import type { StatsReader } from './stats/stats-read.js';
import type { StatsFixtureWriter } from './stats/stats-fixture.js';
import { dashboardRoutes } from './routes/dashboard.js';
import { consoleRoutes } from './routes/console.js';
import { homeRoutes } from './routes/home.js';
import type { UsageMeter } from './stats/usage-meter.js';
import type { AppRegistry } from '../projections/apps/app-registry.js';
import { channelsRoutes, type ChannelsReader } from './routes/channels.js';
import { limitHttpConnections } from './http/connection-limit.js';
import cors, { type FastifyCorsOptions } from '@fastify/cors';
import type { Metrics } from './metrics/metrics.js';
import { opsRoutes, type ReadinessCheck } from './routes/ops.js';
import { cometRoutes } from './routes/comet.js';
import type { CometTransport } from './realtime/comet/comet-transport.js';

export interface AppDeps {
  clock: Clock;
  authenticator: Authenticator;
  tokens: TokenService;
  apps: AppRegistry;
  /** Token revocation (POST /keys/<keyName>/revokeTokens): appends and applies revocations. */
  revoker: TokenRevoker;
  /** Key management (/apps/<appId>/keys): key events on the apps topic. */
  keys?: KeyAdmin;
  publisher: Publisher;
  /** The realtime connection a publish's connectionKey names (the realtime gateway). */
  connectionOf?: (appId: string, connectionKey: string) => PublishingConnection | undefined;
  /** The realtime gateway's comet transport (HTTP long polling), once it has started; and a send's body limit. */
  comet?: { transport: () => CometTransport | undefined; maxSendBytes: number };
  history: HistoryReader;
  presence: PresenceReader;
  stats: StatsReader;
  /** Channel status and enumeration (projections/channels). */
  channels: ChannelsReader;
  usage: UsageMeter;
  /** Whether a channel's history is persisted (for counting history reads). */
  isPersisted: (appId: string, channel: string) => boolean;
  /** Present when SANDBOX=1: POST /stats fixtures. */
  statsFixtures?: StatsFixtureWriter;
  limits: Limits;
  /** Present when SANDBOX=1: enables POST /apps and DELETE /apps/:appId. */
  sandbox?: AppAdmin;
  logger?: FastifyBaseLogger;
  /** Counts every route's replies and latency (GET /metrics). */
  metrics?: Metrics;
  /** GET /ready's checks; without them /ready answers ready. */
  readiness?: () => ReadinessCheck[];
  /**
   * Origins browsers may call from (CORS): `true` for any, a list of exact origins, or `false` for
   * no CORS headers at all (CORS_ORIGINS).
   */
  corsOrigins?: boolean | string[];
}

/** Headers a browser script may read from a reply: the error headers and paging. */
const EXPOSED_HEADERS = ['Link', 'X-Service-ErrorCode', 'X-Service-ErrorMessage', 'X-Ably-ErrorCode', 'X-Ably-ErrorMessage', 'Retry-After'];

/** Builds the HTTP app; it never listens (src/main.ts does), so tests drive it with inject(). */
export function buildApp(deps: AppDeps): FastifyInstance {
  // fastify's own logger only at debug level and below, for its per-request log lines (and a child
  // logger per request that binds its id): with a logger, fastify times every response with two
  // listeners on it, and at thousands of publishes a second that costs more than it tells. At every
  // level, the service logs failures itself (the error handler below, with the request id).
  const perRequestLogs = deps.logger !== undefined && ['debug', 'trace'].includes(deps.logger.level);
  const app = Fastify({
    ...(perRequestLogs ? { loggerInstance: deps.logger } : { logger: false }),
    bodyLimit: deps.limits.maxBodyBytes,
    // A slow client cannot hold a request (and its body) open for ever (src/limits.ts).
    requestTimeout: deps.limits.requestTimeoutMs,
    keepAliveTimeout: deps.limits.keepAliveTimeoutMs,
    // Node checks those timeouts every connectionsCheckingInterval (30 s by default).
    // A request without Host reaches the error handler (Node's own answer has no body).
    http: { headersTimeout: deps.limits.headersTimeoutMs, connectionsCheckingInterval: 1000, requireHostHeader: false },
    // Channel names may be long and may contain encoded slashes.
    routerOptions: { maxParamLength: 4096 },
    frameworkErrors: frameworkError,
    clientErrorHandler: clientError,
  });
  limitHttpConnections(app.server, deps.limits.maxConnections);

  registerBodyParsers(app, deps.limits);
  const bodies = new BodyBudget(deps.limits.maxInflightBodyBytes);
  app.decorate('responseBudget', new ResponseBudget(deps.limits.maxInflightResponseBytes));
  // Declared up front, so requests keep one object shape (fastify: decorateRequest).
  app.decorateRequest('ctx', undefined);


  // Every API request counts in the stats of the app it was made for (spec: stats apiRequests),
  // with the status its reply is sent with (src/http/reply.ts).
  // The route's metrics are counted here too, in plain numbers (src/metrics/metrics.ts).
  const countReply = (tokenRequest: boolean, method: string, url: string): ReplyCounter => {
    const stats = deps.metrics?.route(method, url);
    return (request, status) => {
      if (stats) stats.reply(status, performance.now() - request.ctx!.startedAt);
      const appId =
        request.ctx?.credentials?.app.appId ??
        (tokenRequest ? deps.apps.key((request.params as { keyName: string }).keyName)?.app.appId : undefined);
      if (appId) deps.usage.apiRequest(appId, status, tokenRequest);
    };
  };

  // One onRequest hook per route, in callback style (no promise per request): the request's context
  // (format, version, envelope, how its reply counts), then its credentials where the route needs
  // them. What a route needs is decided once, when it is added, rather than read from
  // request.routeOptions on every request.
  app.addHook('onRoute', (route) => {
    const counter = countReply(route.url === '/keys/:keyName/requestToken', String(route.method), route.url);
    // CORS preflights (OPTIONS, answered by @fastify/cors) carry no credentials.
    const needsAuth = route.config?.auth !== 'none' && route.method !== 'OPTIONS';
    // Routes open to anyone take small bodies only, unless they say otherwise (src/limits.ts).
    if (!needsAuth && route.bodyLimit === undefined) route.bodyLimit = deps.limits.maxOpenBodyBytes;
    if (route.method !== 'GET' && route.method !== 'HEAD') {
      const parsing = route.preParsing === undefined ? [] : Array.isArray(route.preParsing) ? route.preParsing : [route.preParsing];
      route.preParsing = [bodies.hook, ...parsing];
    }
    const existing = route.onRequest === undefined ? [] : Array.isArray(route.onRequest) ? route.onRequest : [route.onRequest];
    route.onRequest = [
      needsAuth
        ? authenticatingHook((request) => resolveContext(request, counter), deps.authenticator, deps.clock)
        : syncHook((request) => resolveContext(request, counter)),
      ...existing,
    ];
  });

  // An error answered while the request's body is still arriving closes its connection, with a
  // linger so that the client reads the answer rather than a reset (src/http/lingering-close.ts).
  const linger = { maxBytes: deps.limits.lingerMaxBytes, maxMs: deps.limits.lingerMaxMs };
  const lingerIfBodyArriving = (request: FastifyRequest, reply: FastifyReply): void => {
    if (!bodyStillArriving(request.raw)) return;
    reply.header('connection', 'close');
    lingerOnClose(request.raw, linger);
  };

  // A log that cannot write fails every publish until it recovers: one line a second says so,
  // with how many failures it stands for, instead of thousands.
  let unavailableLoggedAt = 0;
  let unavailableSince = 0;
  app.setErrorHandler((err, request, reply) => {
    const error = toErrorBody(err);
    const fields = { reqId: request.id, method: request.method, url: request.url.split('?')[0] };
    if (error.statusCode === 503) {
      unavailableSince++;
      const now = Date.now();
      if (now - unavailableLoggedAt >= 1000) {
        deps.logger?.error({ err, ...fields, failures: unavailableSince }, 'request failed');
        unavailableLoggedAt = now;
        unavailableSince = 0;
      }
    } else if (error.statusCode >= 500) deps.logger?.error({ err, ...fields }, 'request failed');
    else deps.logger?.debug({ code: error.code, message: error.message, ...fields }, 'request refused');
    lingerIfBodyArriving(request, reply);
    return sendError(request, reply, error);
  });

  // An unknown route has no onRequest hook of its own: its context is resolved here, and a bad
  // format or version parameter is answered (by the error handler) as on every route.
  app.setNotFoundHandler((request, reply) => {
    resolveContext(request);
    lingerIfBodyArriving(request, reply);
    return sendError(request, reply, new ServiceError('notFound', `no route ${request.method} ${request.url.split('?')[0]}`).toJSON());
  });

  if (deps.corsOrigins !== undefined && deps.corsOrigins !== false) {
    app.register(corsForBrowsers, {
      origin: deps.corsOrigins === true ? '*' : deps.corsOrigins,
      // Strings, not arrays: @fastify/cors joins an array on every request.
      methods: 'GET, HEAD, POST, PUT, DELETE, PATCH',
      exposedHeaders: EXPOSED_HEADERS.join(', '),
      maxAge: 600,
    });
  }
  app.register(timeRoutes, { clock: deps.clock });
  if (deps.metrics) app.register(opsRoutes, { metrics: deps.metrics, readiness: deps.readiness ?? (() => []) });
  app.register(channelMessagesRoutes, {
    publisher: deps.publisher,
    history: deps.history,
    limits: deps.limits,
    connectionOf: deps.connectionOf,
    onHistoryRead: (appId, channel, messages) =>
      deps.usage.historyRead(appId, messages.length, messages.reduce((n, m) => n + dataSize(m.data, m.encoding), 0), deps.isPersisted(appId, channel)),
  });
  app.register(statsRoutes, { stats: deps.stats, clock: deps.clock, fixtures: deps.statsFixtures, maxFixtures: deps.limits.maxSandboxStatsFixtures });
  app.register(dashboardRoutes);
  app.register(consoleRoutes);
  app.register(homeRoutes);
  app.register(batchPublishRoutes, { publisher: deps.publisher, limits: deps.limits });
  app.register(channelPresenceRoutes, { presence: deps.presence });
  app.register(channelsRoutes, { channels: deps.channels, clock: deps.clock });
  app.register(batchPresenceRoutes, { presence: deps.presence, limits: deps.limits });
  app.register(requestTokenRoutes, { tokens: deps.tokens, authenticator: deps.authenticator, apps: deps.apps, clock: deps.clock });
  app.register(revokeTokensRoutes, { apps: deps.apps, revoker: deps.revoker, clock: deps.clock, limits: deps.limits });
  if (deps.comet) app.register(cometRoutes, { comet: deps.comet.transport, maxSendBytes: deps.comet.maxSendBytes });
  if (deps.keys) app.register(appKeysRoutes, { keys: deps.keys, apps: deps.apps, limits: deps.limits });
  if (deps.sandbox) app.register(sandboxAppRoutes, { admin: deps.sandbox, clock: deps.clock, limits: deps.limits });
  return app;
}

/**
 * @fastify/cors, for requests that carry an Origin header only (browsers send one on every
 * cross-origin request and preflight): SDKs and servers send none, and a publish without one
 * skips the plugin's hook (an object spread and two headers per request). Its onRequest hook is
 * wrapped as it is added; registered at the root like the plugin itself (skip-override).
 */
const corsForBrowsers: FastifyPluginCallback<FastifyCorsOptions> = (instance, options, done) => {
  const guarded = Object.create(instance) as FastifyInstance;
  guarded.addHook = ((name: string, hook: onRequestHookHandler) => {
    if (name !== 'onRequest') return instance.addHook(name as 'onRequest', hook);
    return instance.addHook('onRequest', function (this: FastifyInstance, request, reply, next) {
      if (request.headers.origin === undefined) return next();
      return hook.call(this, request, reply, next);
    });
  }) as FastifyInstance['addHook'];
  (cors as unknown as FastifyPluginCallback<FastifyCorsOptions>)(guarded, options, done);
};
(corsForBrowsers as unknown as Record<symbol, boolean>)[Symbol.for('skip-override')] = true;

/**
 * A request's credentials: its Authorization header or, without one, the platform's query forms
 * `?key=<keyName:keySecret>` (as Basic) and `?access_token=<token>` (as Bearer).
 */
function authorizationOf(request: FastifyRequest): string | undefined {
  const header = headerOf(request, 'authorization');
  if (header !== undefined) return header;
  const credential = queryCredentialOf(request);
  if (credential === undefined) return undefined;
  return `${credential.param === 'key' ? 'Basic' : 'Bearer'} ${Buffer.from(credential.value).toString('base64')}`;
}

/** An onRequest hook from a synchronous step: what it throws becomes the request's error. */
function syncHook(step: (request: FastifyRequest) => void): onRequestHookHandler {
  return (request, _reply, done) => {
    try {
      step(request);
    } catch (err) {
      done(err as Error);
      return;
    }
    done();
  };
}

/**
 * The onRequest hook of a route that needs credentials: synchronous, except while a credential
 * whose check is asynchronous (a JWT seen for the first time: src/auth/jwt.ts) is checked. The
 * credentials (header or query form), the clientId header and the time are read once per request,
 * for both the pending check and the authentication that follows it without a wait.
 */
function authenticatingHook(context: (request: FastifyRequest) => void, authenticator: Authenticator, clock: Clock): onRequestHookHandler {
  const finish = (request: FastifyRequest, authorization: string | undefined, clientId: string | undefined, now: number, done: (err?: Error) => void): void => {
    try {
      request.ctx!.credentials = authenticator.authenticate(authorization, clientId, now);
    } catch (err) {
      done(err as Error);
      return;
    }
    done();
  };
  return (request, _reply, done) => {
    try {
      context(request);
    } catch (err) {
      done(err as Error);
      return;
    }
    const authorization = authorizationOf(request);
    const clientId = headerOf(request, 'x-ably-clientid');
    const now = clock.now();
    const wait = authenticator.pending(authorization, clientId, now);
    if (wait === undefined) return finish(request, authorization, clientId, now, done);
    // pending never rejects: what the check found, authenticate throws (at the time it answers).
    void wait.then(() => finish(request, authorization, clientId, clock.now(), done));
  };
}

/** plainJson's answer for a text it leaves to the full parser. */
const NOT_PLAIN = Symbol('not plain JSON');

/**
 * The value of a JSON text that needs none of the checks of fastify's parser and of
 * jsonTextWellFormed, or NOT_PLAIN: a text with no \u escape, no `__proto__` and no `constructor`
 * cannot match secure-json-parse's poisoning patterns (which look for those names, spelt plainly or
 * escaped), has no BOM, and, decoded from valid UTF-8, holds no lone surrogate. Most publishes are
 * such texts; three substring scans cost less than the parser's two regular expressions and the
 * surrogate one. Anything else (and any text JSON.parse refuses, for the parser's own error) goes
 * through the full parser.
 */
function plainJson(text: string): unknown {
  if (text.length === 0 || text.charCodeAt(0) === 0xfeff) return NOT_PLAIN;
  if (text.indexOf('\\u') !== -1 || text.indexOf('__proto__') !== -1 || text.indexOf('constructor') !== -1) return NOT_PLAIN;
  try {
    return JSON.parse(text);
  } catch {
    return NOT_PLAIN;
  }
}

/** Whether JSON.parse takes the text (a text fastify's parser refused for prototype poisoning does). */
function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * Whether a decoded MessagePack value holds what fastify's JSON parser refuses as prototype
 * poisoning (secure-json-parse, constructorAction 'error'): an object with an own `constructor`
 * that is an object with an own `prototype`. (A `__proto__` key the MessagePack decoder refuses
 * itself.) Only called on a body whose bytes hold "prototype"; its depth is bounded by msgpackShape.
 */
function holdsConstructorPrototype(value: unknown): boolean {
  if (typeof value !== 'object' || value === null || ArrayBuffer.isView(value)) return false;
  if (Array.isArray(value)) return value.some(holdsConstructorPrototype);
  const ctor = Object.hasOwn(value, 'constructor') ? (value as { constructor: unknown }).constructor : undefined;
  if (typeof ctor === 'object' && ctor !== null && Object.hasOwn(ctor, 'prototype')) return true;
  return Object.values(value).some(holdsConstructorPrototype);
}

/**
 * Bodies are refused, not rewritten, when their text is not UTF-8 (the parsers of fastify and of
 * MessagePack would replace the bad bytes with U+FFFD), and refused undecoded when they nest deeper
 * than maxBodyDepth (src/codec/value-shape.ts: one pass over the bytes).
 */
function registerBodyParsers(app: FastifyInstance, limits: Limits): void {
  const notUtf8 = (): ServiceError => new ServiceError('invalidRequestBody', 'the request body is not valid UTF-8');
  const shape: ShapeLimits = { maxDepth: limits.maxBodyDepth, maxWidth: Number.MAX_SAFE_INTEGER };
  const tooDeep = (): ServiceError =>
    new ServiceError(
      'invalidDataOrEncoding',
      `the request body nests deeper than ${limits.maxBodyDepth} levels of arrays and objects (MAX_BODY_DEPTH); message data and extras may nest ${limits.maxDataDepth} levels`,
    );
  const loneSurrogate = (): ServiceError => new ServiceError('invalidRequestBody', 'a string in the request body holds a lone surrogate (\\uD800 to \\uDFFF unpaired): it is not valid Unicode text');
  const poisoned = (): ServiceError =>
    new ServiceError('invalidRequestBody', 'the request body holds a "__proto__" key, or a "constructor" key holding "prototype": refused (prototype poisoning); as values those strings are fine');
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  type Done = (err: Error | null, value: unknown) => void;
  // A JSON text, checked alike whatever type carries it; `notJson` answers a text that is not JSON.
  const jsonText = (req: FastifyRequest, text: string, done: Done, notJson: (err: Error) => Error): void => {
    const parsed = plainJson(text);
    if (parsed !== NOT_PLAIN) return done(null, parsed);
    parseJson(req, text, (err: Error | null, value?: unknown) => {
      // Refused by the parser's poisoning check, not for its syntax: say so (JSON.parse only on this error path).
      if (err) return done(isJson(text) ? poisoned() : notJson(err), undefined);
      if (!jsonTextWellFormed(text, value)) return done(loneSurrogate(), undefined);
      done(null, value);
    });
  };
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    if (!isUtf8(body as Buffer)) return done(notUtf8(), undefined);
    if (jsonShape(body as Buffer, shape) === 'depth') return done(tooDeep(), undefined);
    jsonText(req, (body as Buffer).toString(), done, (err) => err);
  });
  app.addContentTypeParser(['application/x-msgpack', 'application/msgpack'], { parseAs: 'buffer' }, (_req, body, done) => {
    try {
      const fault = msgpackShape(body as Buffer, shape);
      if (fault === 'utf8') return done(notUtf8(), undefined);
      if (fault === 'depth') return done(tooDeep(), undefined);
      if ((body as Buffer).length === 0) return done(null, undefined);
      const value = unpackValue(body as Buffer);
      // Refused as the JSON parser refuses it: else a MessagePack body stored what a JSON one may not send.
      if ((body as Buffer).includes('prototype') && holdsConstructorPrototype(value)) return done(poisoned(), undefined);
      done(null, value);
    } catch (err) {
      done(new ServiceError('invalidRequestBody', `malformed MessagePack body: ${(err as Error).message}`), undefined);
    }
  });
  // Only where the route lists the fields a form may hold (src/http/form-body.ts).
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer' }, (req, body, done) => {
    if (!isUtf8(body as Buffer)) return done(notUtf8(), undefined);
    try {
      done(null, parseFormBody((body as Buffer).toString(), req.routeOptions.config.formFields));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
  // Token requests may be sent as text/plain holding JSON (spec: Request an access token).
  // Through the JSON path's checks (a `__proto__` key, a constructor holding prototype): JSON.parse
  // alone let into the log what an application/json body may not send.
  app.addContentTypeParser('text/plain', { parseAs: 'buffer' }, (req, body, done) => {
    if (!isUtf8(body as Buffer)) return done(notUtf8(), undefined);
    if (jsonShape(body as Buffer, shape) === 'depth') return done(tooDeep(), undefined);
    const text = (body as Buffer).toString();
    if (text.trim() === '') return done(null, undefined);
    jsonText(req, text, done, () => new ServiceError('invalidRequestBody', 'the text/plain body must hold JSON'));
  });
}
