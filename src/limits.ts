// Every limit the service enforces, in one place: its default, the variable that changes it, and
// the error a client gets above it (README: Limits). Every resource a client can make the service
// spend (memory, bodies, connections, time, log space) is bounded here.

export interface Limits {
  /** Bytes of one message: name + data + clientId + extras. Above: 40009 (400). MAX_MESSAGE_SIZE */
  maxMessageSize: number;
  /** Messages in one publish (one channel). Above: 40034 (400). MAX_MESSAGES_PER_PUBLISH */
  maxMessagesPerPublish: number;
  /**
   * Bytes of all the messages of one publish, counted as maxMessageSize counts them; one publish is
   * one log record, so this also keeps every record under Kafka's default max.message.bytes
   * (1 MiB). Above: 40009 (400). MAX_PUBLISH_BYTES
   */
  maxPublishBytes: number;
  /** Nesting depth of a message's data and extras (objects and arrays). Above: 40013 / 40032 (400). */
  maxDataDepth: number;
  /**
   * Messages one batch publish (POST /messages) appends, a message counted once per channel it goes
   * to. Above: 40034 (400), before anything is published. MAX_BATCH_MESSAGES
   */
  maxBatchMessages: number;
  /** Bytes one batch publish appends, counted like maxPublishBytes, per channel. Above: 40009 (400). */
  maxBatchBytes: number;
  /** Largest request body on routes that need credentials. Above: 40009 (413). MAX_BODY_BYTES */
  maxBodyBytes: number;
  /**
   * Levels of arrays and objects nested in a request body (JSON or MessagePack), checked on its
   * bytes before it is decoded: a 2 MiB body nested a million deep would otherwise cost the event
   * loop a third of a second to decode, only to be refused. Well above maxDataDepth, whose finer
   * errors the bodies in between get. Above: 40013 (400). MAX_BODY_DEPTH
   */
  maxBodyDepth: number;
  /** Largest request body on routes that need none (token requests). Above: 40009 (413). */
  maxOpenBodyBytes: number;
  /**
   * Bytes of request bodies being received or held by requests in progress, all clients together.
   * A body that would go above it is refused: 50004 (503, retry). MAX_INFLIGHT_BODY_BYTES
   */
  maxInflightBodyBytes: number;
  /**
   * Bytes of response bodies (of 16 KiB and more) handed to Node and not yet read by their
   * clients, all clients together, a quarter of it for one app: a client that asks for large pages
   * and reads nothing holds them for as long as its connections stay open. A large reply that would
   * go above either is refused instead: 50004 (503, retry). MAX_INFLIGHT_RESPONSE_BYTES
   */
  maxInflightResponseBytes: number;
  /** Time to receive a whole request, headers and body. Above: 408, connection closed. REQUEST_TIMEOUT_MS */
  requestTimeoutMs: number;
  /**
   * A request refused before its body arrived is answered with `Connection: close`, and the rest of
   * its body read and dropped for at most this many bytes and this long before the connection is
   * closed (a lingering close, src/http/lingering-close.ts), so the client reads the refusal
   * instead of a reset.
   */
  lingerMaxBytes: number;
  lingerMaxMs: number;
  /** Time to receive a request's headers. Above: 408, connection closed. */
  headersTimeoutMs: number;
  /** An idle keep-alive connection is closed after this. */
  keepAliveTimeoutMs: number;
  /** Open HTTP connections; a connection above it is closed at once. MAX_CONNECTIONS */
  maxConnections: number;

  // Authentication and the sandbox (hardening-auth).
  /**
   * Token request nonces remembered for replay protection, all apps together (about 120 bytes
   * each; one per signed token request, kept until its timestamp leaves the 10-minute window).
   * When full, a signed token request is refused, not let through unchecked: 42910 (429, retry).
   * MAX_TOKEN_NONCES
   */
  maxTokenNonces: number;
  /** The share of maxTokenNonces one app may hold, so one app's flood cannot refuse the others'. Above: 42910 (429). MAX_TOKEN_NONCES_PER_APP */
  maxTokenNoncesPerApp: number;
  /**
   * How long the publisher remembers a client-supplied message id it appended, so that a repeat
   * the history projection has not consumed yet is not appended again (src/messages/publisher.ts).
   */
  recentIdsWindowMs: number;
  /**
   * Such ids remembered per app (about 100 bytes each; a window's worth, at most twice this): an
   * app publishing more client ids than this in a window keeps the protection of the history
   * projection's index alone for the older ones; other apps are not affected.
   */
  maxRecentIdsPerApp: number;
  /** Targets in one token revocation request (POST /keys/<keyName>/revokeTokens). Above: 40003 (400), nothing revoked. */
  maxRevocationTargets: number;
  /**
   * Token revocations held, all apps together (one per key and target, about 200 bytes each; a
   * revocation is dropped once every token it can reach has expired: 24 hours after its
   * issuedBefore). When full, a revocation request is refused: 42910 (429, retry later). MAX_REVOCATIONS
   */
  maxRevocations: number;
  /** The share of maxRevocations one app may hold. Above: 42910 (429). */
  maxRevocationsPerApp: number;
  /**
   * Events one app may add to the apps topic, which is kept for good (token revocations that change
   * something, key and webhook rule changes; the sandbox's app creations share one budget): a token
   * bucket of appEventsBurst refilled at appEventsPerMinute (src/apps/app-events-budget.ts). Above:
   * 42910 (429), nothing appended. APP_EVENTS_PER_MINUTE, APP_EVENTS_BURST
   */
  appEventsPerMinute: number;
  appEventsBurst: number;
  /**
   * Keys one app holds, revoked ones included (a revoked key is kept: it answers 40131, and the
   * apps topic that holds it is replayed at every start). Above, a new key (POST
   * /apps/<appId>/keys, `npm run keys -- create`) is refused: 40127 (403). MAX_KEYS_PER_APP
   */
  maxKeysPerApp: number;
  /** Bytes of a key's capability (JSON) and characters of its name, in key management. Above: 40003 (400). */
  maxKeyCapabilityBytes: number;
  maxKeyNameLength: number;
  /**
   * Time a key change (key management) has to be applied by this instance's apps consumer before
   * the call answers (read-your-writes). Above: 50003 (504); the change is on the log and holds once applied.
   */
  keyChangeVisibleMs: number;
  /**
   * Time a sandbox stats fixture (POST /stats) has to be applied by the stats projection before
   * the call answers (read-your-writes). Above: 50003 (504); the fixture is on the log and counts
   * once the projection gets to it.
   */
  statsFixtureVisibleMs: number;
  /**
   * Time a read waits for the projection it reads to apply the writes its instance acknowledged
   * (read your own writes: src/log/own-writes.ts). Above: 50003 (504), retry. A realtime presence
   * change waits as long for its ACK, then is acknowledged anyway (it is durable), with a warning.
   * READ_YOUR_WRITES_TIMEOUT_MS
   */
  readYourWritesMs: number;
  /**
   * Rows of stats (rollups and 6-second samples) held in memory for GET /stats, all apps together
   * (some hundreds of bytes each: 233 measured with three counters), a quarter of them for one app.
   * Past it the apps read longest ago are dropped and read from the store again when asked. 0 holds
   * none. No client error. STATS_CACHE_ROWS
   */
  statsCacheRows: number;
  /**
   * Age after which an app's held stats rows are read from the store again: the bound on how long
   * a write this process did not make (a rebuild run beside it) takes to show. STATS_CACHE_MAX_AGE_MS
   */
  statsCacheMaxAgeMs: number;
  /**
   * Channels status requests (GET /channels/<id>) keep active, in memory and on the instance that
   * answered, all apps together, a quarter of them for one app (a few hundred bytes each, with the
   * name). Past it the oldest activation ends early. No client error. CHANNEL_STATUS_ACTIVATIONS
   */
  maxStatusActivations: number;
  /**
   * Channels the log keeps in use (active, or idle and not yet swept: projections/channels), all
   * apps together and for one app. Each costs every instance some 5 KB (its state, its history
   * tail, its lifecycle messages): one message to each of 100,000 new channels took the embedded
   * service from 137 to 689 MB of RSS, where 100,000 messages to one channel add some 40 MB. A
   * publish, attach or presence change that would begin a channel past either is refused: 40114
   * (403), until channels close. MAX_ACTIVE_CHANNELS, MAX_ACTIVE_CHANNELS_PER_APP
   */
  maxActiveChannels: number;
  maxActiveChannelsPerApp: number;
  /**
   * Presence members one batch presence reply (GET /presence) holds, all its channels together:
   * each channel's whole set, built at once (100,000 members: 13 MB and 0.3 to 0.5 s of the event
   * loop a request). A channel whose members would pass it fails on its own: 91003 (400), read it
   * page by page (GET /channels/<id>/presence). MAX_BATCH_PRESENCE_MEMBERS
   */
  maxBatchPresenceMembers: number;
  /** Presence members in one sandbox app's fixtures (POST /apps). Above: 40001 (400), nothing created. */
  maxSandboxFixtureMembers: number;
  /** Largest POST /apps body (no credentials needed, sandbox only). Above: 40009 (413). */
  maxSandboxAppBodyBytes: number;
  /**
   * Sandbox apps held at once (POST /apps needs no credentials; DELETE /apps/<appId> frees room):
   * each holds up to maxSandboxAppBodyBytes of fixtures in memory on every instance, for good, and
   * its fixture members count against the realtime presence limits of every app. Above: 40128
   * (403), no app. MAX_SANDBOX_APPS
   */
  maxSandboxApps: number;
  /**
   * Stats fixture records in one sandbox POST /stats. Above: 40001 (400), nothing appended. A
   * 2 MiB body held 25,000, whose samples and rollups one write stored at once: 0.7 s without an
   * answer to any other request (review finding).
   */
  maxSandboxStatsFixtures: number;

  // Faults of the embedded mode (hardening-embedded-faults)
  /**
   * 6-second intervals of usage counters a meter keeps while the log refuses them (a full disk);
   * past it the oldest are dropped, and logged with what they held. No client error.
   */
  usageBacklogIntervals: number;

  // Faults of the production parts (prod-faults).
  /**
   * Time Kafka has to acknowledge one append. Above: the publish answers 50005 (503, retry); a
   * publish waits at most twice this (the append in flight when it came, then its own).
   * LOG_APPEND_TIMEOUT_MS
   */
  logAppendTimeoutMs: number;
  /**
   * Persisted history rows (messages, presence) a projection holds for a store that does not take
   * them (ClickHouse down). Past it the projection stops consuming until the store catches up:
   * publishes are still accepted, in-memory history waits with it. No client error.
   */
  maxUnstoredRows: number;
  /**
   * Bytes of those rows (their log records' encoded size): large messages reach it before the rows'
   * count does (200,000 rows of 64 KiB would be 12.5 GiB). Past it, the same as maxUnstoredRows.
   */
  maxUnstoredBytes: number;
}

export const DEFAULT_LIMITS: Limits = {
  maxMessageSize: 65_536,
  maxMessagesPerPublish: 1000,
  maxPublishBytes: 512 * 1024,
  maxDataDepth: 32,
  maxBatchMessages: 10_000,
  maxBatchBytes: 8 * 1024 * 1024,
  maxBodyBytes: 2 * 1024 * 1024,
  maxBodyDepth: 512,
  maxOpenBodyBytes: 16 * 1024,
  maxInflightBodyBytes: 128 * 1024 * 1024,
  maxInflightResponseBytes: 256 * 1024 * 1024,
  requestTimeoutMs: 30_000,
  headersTimeoutMs: 10_000,
  lingerMaxBytes: 64 * 1024 * 1024,
  lingerMaxMs: 5_000,
  keepAliveTimeoutMs: 72_000,
  maxConnections: 10_000,

  maxTokenNonces: 500_000,
  maxTokenNoncesPerApp: 100_000,
  recentIdsWindowMs: 30_000,
  maxRecentIdsPerApp: 100_000,
  maxRevocationTargets: 100,
  maxRevocations: 100_000,
  maxRevocationsPerApp: 10_000,
  appEventsPerMinute: 60,
  appEventsBurst: 120,
  maxKeysPerApp: 200,
  maxKeyCapabilityBytes: 16 * 1024,
  maxKeyNameLength: 256,
  keyChangeVisibleMs: 10_000,
  statsFixtureVisibleMs: 10_000,
  readYourWritesMs: 5_000,
  statsCacheRows: 100_000,
  statsCacheMaxAgeMs: 60_000,
  maxStatusActivations: 100_000,
  maxActiveChannels: 400_000,
  maxActiveChannelsPerApp: 100_000,
  maxBatchPresenceMembers: 10_000,
  maxSandboxFixtureMembers: 1000,
  maxSandboxAppBodyBytes: 256 * 1024,
  maxSandboxApps: 100,
  maxSandboxStatsFixtures: 1000,

  usageBacklogIntervals: 600, // an hour

  logAppendTimeoutMs: 5_000,
  maxUnstoredRows: 200_000,
  maxUnstoredBytes: 256 * 1024 * 1024,
};
