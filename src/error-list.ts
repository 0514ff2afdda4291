import { ErrorCodes } from './errors.js';

/**
 * What each error code of this service means and what a client should do about it: served at
 * `GET /errors` (every error's `href` points there, `/errors#<code>`), and the README's error table
 * is generated from it (a test keeps the two equal). Codes follow the platform's public catalogue,
 * so that its SDKs react to them as they do against the platform.
 */
export const ErrorList: Record<number, { title: string; what: string }> = {
  40000: { title: 'Bad request', what: 'The request could not be read (a malformed HTTP request, a path that does not decode, a request that took longer than REQUEST_TIMEOUT_MS to arrive). Fix the request; the message says what was wrong.' },
  40001: { title: 'Invalid request body', what: 'The body is not what the route takes: malformed JSON or MessagePack, text that is not UTF-8, a form with unknown fields (curl -d without -H "Content-Type: application/json" sends a form), or a Content-Type the route does not take (415). Nothing was appended.' },
  40002: { title: 'Invalid request parameter name', what: 'A query parameter the route does not know.' },
  40003: { title: 'Invalid request parameter value', what: 'A query parameter or field with a value out of range or of the wrong form (a limit over 1000, a start after end, an unknown unit); the message names it.' },
  40004: { title: 'Invalid request header', what: 'A header with a bad value (Accept, X-Ably-Version, X-Ably-ClientId), or headers over 16 KiB (431).' },
  40009: { title: 'Message too large', what: 'A message over MAX_MESSAGE_SIZE, a publish over MAX_PUBLISH_BYTES, a body over MAX_BODY_BYTES (413), a comet send over REALTIME_COMET_MAX_SEND_BYTES (413; the connection fails), or one holding a ProtocolMessage over REALTIME_MAX_FRAME_BYTES (the connection fails). Send less at a time.' },
  40010: { title: 'Invalid channel name', what: 'The channel name is empty, too long, or uses a reserved prefix or qualifier the way the platform does not allow.' },
  40012: { title: 'Invalid client ID', what: "The clientId is empty, '*' where a real id is needed, or differs from the one the credentials or the connection carry." },
  40013: { title: 'Invalid message data or encoding', what: 'Data of a type a message cannot hold, an encoding that does not match the data, or a value nested deeper than 32 levels (a body deeper than MAX_BODY_DEPTH is refused before it is read).' },
  40016: { title: 'Invalid message name', what: 'A message name that is not a string.' },
  40017: { title: 'Unsupported protocol version', what: 'The X-Ably-Version header (or v parameter) names a protocol version this service does not speak.' },
  40020: { title: 'Batch request error', what: 'Some of a batch request failed: each failed item carries its own error in the batch result, the others succeeded.' },
  40030: { title: 'Invalid publish request', what: 'The publish names a connectionKey that is not a realtime connection of this app, asks for what this service does not serve (a message update, delete or append, an annotation, a LiveObjects operation), or is otherwise not a valid publish.' },
  40031: { title: 'Invalid client-specified message id', what: 'A message id that does not have the form the idempotent publish needs.' },
  40032: { title: 'Invalid message extras field', what: 'extras may hold push (an object), headers (a flat map of at most 100 names to strings, numbers, booleans or null) and ref ({ type, timeserial }), nested at most 32 levels.' },
  40034: { title: 'Too many messages in one publish', what: 'More messages than MAX_MESSAGES_PER_PUBLISH in one publish, or than MAX_BATCH_MESSAGES in one batch, or more changes in one realtime PRESENCE than REALTIME_MAX_MEMBERS_PER_CONNECTION. Nothing was published; split it.' },
  40100: { title: 'Unauthorized', what: 'The credentials do not allow this request.' },
  40101: { title: 'Authentication failed', what: 'The key secret, token or token request signature is wrong. Check the key (name:secret) and the clock (GET /time).' },
  40102: { title: 'Incompatible credentials', what: "The credentials belong to another key or app than the one the request names, or their clientId does not match the connection's (a realtime AUTH may renew a connection's credentials, not change its key or clientId)." },
  40104: { title: 'Token request timestamp outside permitted window', what: 'The token request was signed more than 10 minutes from the service time: sign with the time from GET /time (the SDK option queryTime).' },
  40105: { title: 'Nonce value replayed', what: 'A signed token request was sent twice. Make a new one for each token.' },
  40106: { title: 'No valid authentication method provided', what: 'No Authorization header (Basic or Bearer) and no key or access_token parameter.' },
  40114: { title: 'Active channel limit reached', what: 'The app (MAX_ACTIVE_CHANNELS_PER_APP) or the service (MAX_ACTIVE_CHANNELS) has the most active channels it may: a publish, attach or presence change that would begin another channel is refused, until channels close (CHANNEL_IDLE_MS after their last use). Channels in use are not affected. 403, as the platform answers.' },
  40121: { title: 'Token revocation not enabled', what: 'Revoking tokens needs a key with revocableTokens.' },
  40127: { title: 'Key limit reached', what: 'The app holds the most keys it may (MAX_KEYS_PER_APP, revoked keys included): no key was made. 403, not 401, so that clients do not take it as a request to authenticate again.' },
  40128: { title: 'Sandbox app limit reached', what: 'The sandbox holds the most apps it may (MAX_SANDBOX_APPS): no app was made. Delete apps the harness no longer needs (DELETE /apps/<appId>) to make room.' },
  40130: { title: 'API key not recognized', what: 'No app has a key of that name on this service.' },
  40131: { title: 'API key revoked', what: 'The key was revoked: use another key.' },
  40140: { title: 'Token not accepted', what: 'The token is malformed or was not issued by this service.' },
  40141: { title: 'Token revoked', what: 'The token was revoked: get a new one (the SDK does so with authCallback or authUrl).' },
  40142: { title: 'Token expired', what: 'The token has expired: get a new one (the SDK does so with authCallback or authUrl).' },
  40143: { title: 'Token not recognized', what: 'The token names a key this service does not know.' },
  40144: { title: 'Invalid JWT', what: 'The JWT could not be read or verified: it must be HS256, its kid the key name (appId.keyId) whose secret signed it, with iat and exp, and x-ably-capability a JSON string within the key capability.' },
  40160: { title: 'Client lacks the required capability', what: "The key's or token's capability does not grant this operation on this channel." },
  40162: { title: 'Operation requires Basic authentication', what: 'This operation needs the key itself, not a token.' },
  40163: { title: 'Token revocation not enabled for API key', what: "The key's tokens are not revocable: give the key revocableTokens." },
  40400: { title: 'Resource not found', what: 'No such route, channel or app; a method the path does not serve also gets 404, with an Allow header (as the platform answers).' },
  40500: { title: 'HTTP method not allowed', what: 'The method is not served on this path.' },
  42910: { title: 'Rate or capacity limit exceeded', what: 'A limit shared by many clients is full (token nonces, revocations, realtime connections: 503), an app made more changes kept on the log for good than APP_EVENTS_BURST and APP_EVENTS_PER_MINUTE allow (revocations, key and webhook rule changes, sandbox apps), or a realtime connection has more comet requests waiting than REALTIME_COMET_MAX_PENDING_REQUESTS, or an address more comet transports with no recv waiting than REALTIME_COMET_MAX_UNPOLLED_PER_ADDRESS (503). Retry after a short wait.' },
  42911: { title: 'Per-connection rate exceeded', what: 'A realtime connection sent more frames or bytes a second than REALTIME_MAX_INBOUND_RATE / _BYTES_RATE: it was disconnected and may resume (the SDK does so).' },
  50000: { title: 'Internal server error', what: 'A fault of the service; its log has the details. Retrying may help. Please report it.' },
  50003: { title: 'Request timed out server-side', what: 'The service could not answer in time (a sandbox stats fixture waiting for its projection). Retry.' },
  50004: { title: 'Server temporarily busy', what: 'Too many request bodies in flight at once (MAX_INFLIGHT_BODY_BYTES), or too many large responses not yet read by their clients (MAX_INFLIGHT_RESPONSE_BYTES). Retry shortly.' },
  50005: { title: 'Service temporarily unavailable', what: 'The log did not acknowledge the publish (Kafka down, disk full), or the store is unreachable: nothing was acknowledged. Retry; the same message ids keep the publish idempotent.' },
  80003: { title: 'Connection disconnected', what: 'The service is shutting down: the SDK resumes the connection on another instance.' },
  80008: { title: 'Connection could not be resumed', what: 'The connection was closed or not resumed within its connection state TTL: a new connection was made, and channels re-attach without continuity.' },
  80013: { title: 'Protocol error', what: 'A realtime frame that could not be read, or an action that makes no sense in the connection state.' },
  80014: { title: 'Connection timed out', what: 'Nothing was received from the client within its idle interval.' },
  80017: { title: 'Connection closed', what: 'The connection was closed; or a comet request names a connection no comet transport is open for on this instance (DISCONNECTED: the SDK resumes it, here or elsewhere).' },
  80018: { title: 'Invalid connection key', what: 'The connection key given to resume is not valid for these credentials: a new connection was made.' },
  80020: { title: 'Continuity lost: delivery rate exceeded', what: 'The client did not read what it was sent (more than REALTIME_MAX_BUFFERED_BYTES waiting): it was disconnected, and resumes.' },
  90003: { title: 'Channel continuity lost', what: "An ATTACH's channelSerial could not be resumed from: its first missed record is older than REALTIME_CONNECTION_STATE_TTL_MS (a resume keeps continuity for 2 minutes, as the platform's), it is not a position of the channel (unreadable, another partition, past the log's end), more than REALTIME_MAX_REPLAY_SCAN records or 10,000 messages lie after it, or the log no longer holds them. The channel attaches without RESUMED and stays attached (the SDK emits it on the state change, or as an `update`); read what was missed from history (untilAttach)." },
  90010: { title: 'Too many channels', what: 'A realtime connection attached to more than REALTIME_MAX_CHANNELS_PER_CONNECTION channels.' },
  91000: { title: 'Cannot enter presence without a clientId', what: 'Entering presence needs a clientId, from the credentials or the message.' },
  91003: { title: 'Too many presence members', what: 'The channel, app or service holds the most presence members it may (REALTIME_MAX_PRESENCE_MEMBERS...); in a batch presence reply, the channel has more members than the reply can still hold (MAX_BATCH_PRESENCE_MEMBERS): read them page by page with GET /channels/<id>/presence.' },
};

export interface ErrorListEntry {
  code: number;
  statusCodes: number[];
  title: string;
  what: string;
}

/** Every code the service answers with, in order, with the HTTP statuses it comes with. */
export function errorList(): ErrorListEntry[] {
  const statuses = new Map<number, Set<number>>();
  for (const { code, statusCode } of Object.values(ErrorCodes)) {
    if (!statuses.has(code)) statuses.set(code, new Set());
    statuses.get(code)!.add(statusCode);
  }
  return [...statuses]
    .sort(([a], [b]) => a - b)
    .map(([code, s]) => ({ code, statusCodes: [...s].sort(), title: ErrorList[code]?.title ?? 'Error', what: ErrorList[code]?.what ?? '' }));
}

/** The README's table of errors (generated: `npm run -s errors:readme`). */
export function errorTableMarkdown(): string {
  const rows = errorList().map((e) => `| <a id="error-${e.code}"></a>${e.code} | ${e.statusCodes.join(', ')} | ${e.title} | ${e.what.replace(/\|/g, '\\|')} |`);
  return ['| code | HTTP status | title | what it means, what to do |', '|---:|---|---|---|', ...rows].join('\n');
}
