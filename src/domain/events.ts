import type { StoredMessage } from './message.js';
import type { PresenceEvent } from './presence-event.js';
import type { AppDefinition, KeyDefinition } from './app.js';
import type { WebhookRule } from './webhook-rule.js';

// The log's event catalog: every record on the log is one of these (src/log/event-codec.ts writes
// and reads them as MessagePack).

/** One publish request to one channel: its messages are appended atomically, in order. */
export interface MessagesPublished {
  type: 'messages.published';
  appId: string;
  channel: string;
  transport: 'rest' | 'realtime';
  messages: StoredMessage[];
  /** Some ids were supplied by the client: only then can a message repeat an earlier one. */
  clientIds?: boolean;
  /**
   * The key whose credentials published (basic auth, or the key a token was issued from), for the
   * audit replay; absent on records appended before it was kept, and on the service's own publishes.
   */
  keyName?: string;
}

export interface PresenceChanged {
  type: 'presence.changed';
  appId: string;
  channel: string;
  event: PresenceEvent;
}

export interface AppCreated {
  type: 'app.created';
  app: AppDefinition;
}

export interface AppDeleted {
  type: 'app.deleted';
  appId: string;
}

/**
 * Key management (/apps/<appId>/keys, `npm run keys`), on the `apps` topic keyed by the app, so
 * every instance learns it, a restart replays it, and the audit replay (`replay --keys`) shows it.
 * A key made here carries its secret: the apps topic is where keys are kept (as `app.created` does).
 * They apply to apps of every source (the apps file and the default app included) once the app is known.
 */
export interface KeyCreated {
  type: 'key.created';
  appId: string;
  key: KeyDefinition;
}

/** A key's capability, name, revocableTokens or management right changed; absent fields are unchanged. */
export interface KeyUpdated {
  type: 'key.updated';
  appId: string;
  keyName: string;
  capability?: string;
  name?: string;
  revocableTokens?: boolean;
  management?: boolean;
  modified: number;
}

/** A key revoked for good: its basic credentials answer 40131, its tokens 40141, its realtime connections end. */
export interface KeyRevoked {
  type: 'key.revoked';
  appId: string;
  keyName: string;
  modified: number;
}

export type KeyEvent = KeyCreated | KeyUpdated | KeyRevoked;

/**
 * A webhook rule added to an app or removed from it (/apps/<appId>/rules), on the `apps` topic
 * like key management: every instance learns it, a restart replays it. A rule added with the id
 * of one the app has replaces it.
 */
export interface RuleCreated {
  type: 'rule.created';
  appId: string;
  rule: WebhookRule;
}

export interface RuleDeleted {
  type: 'rule.deleted';
  appId: string;
  ruleId: string;
}

export type RuleEvent = RuleCreated | RuleDeleted;

/**
 * Tokens revoked (POST /keys/<keyName>/revokeTokens), on the `apps` topic: every instance replays
 * it at start and consumes it live, so a revocation holds on every instance and across restarts.
 * A token of `keyName` issued before `issuedBefore` whose clientId or revocationKey a target names
 * (`clientId:<id>`, `revocationKey:<key>`) is refused from `appliesAt` on.
 */
export interface TokensRevoked {
  type: 'tokens.revoked';
  appId: string;
  keyName: string;
  targets: string[];
  issuedBefore: number;
  appliesAt: number;
}

/**
 * Usage an instance counted during one 6-second interval (API and token requests, messages read
 * from history, messages and presence sent over realtime), appended every 6 seconds so that
 * everything counted flows through the log. Counters use the base keys of
 * src/domain/stats-sample.ts.
 */
export interface UsageReported {
  type: 'usage.reported';
  appId: string;
  intervalStart: number;
  instanceId: string;
  counters: Record<string, number>;
  /**
   * The app's realtime connections open on this instance when it looked during the interval (a
   * reading, not a delta: an instance reports it at most once per interval, and the stats add the
   * instances' readings up). Absent: none open, or not looked.
   */
  connections?: number;
}

/** Sandbox stats fixtures (POST /stats), merged into an app's stats like any other usage. */
export interface StatsFixture {
  type: 'stats.fixture';
  appId: string;
  intervalStart: number;
  counters: Record<string, number>;
  channels?: number;
  /** open connections in the sample (the fixture's peak) */
  connections?: number;
}

/**
 * A realtime connection was made, or resumed, on an instance: the instance that held it before
 * (a resume elsewhere) forgets it without its members leaving.
 */
export interface ConnectionOpened {
  type: 'connection.opened';
  appId: string;
  connectionId: string;
  instanceId: string;
  resumed: boolean;
}

/** A connection ended for good (CLOSE, a fatal error, or not resumed within connectionStateTtl). */
export interface ConnectionClosed {
  type: 'connection.closed';
  appId: string;
  connectionId: string;
  instanceId: string;
}

/**
 * An instance's gateway is alive (production mode, every few seconds): the presence members of
 * an instance that stops saying so are removed by the others.
 */
export interface InstanceAlive {
  type: 'instance.alive';
  instanceId: string;
}

/**
 * A realtime connection attached to a channel here, with the modes it was granted (src/domain/modes.ts:
 * the protocol's flag bits). Keyed by the channel, so a channel's attachments stay in
 * order (projections/channels: occupancy and activity).
 */
export interface ChannelAttached {
  type: 'channel.attached';
  appId: string;
  channel: string;
  connectionId: string;
  instanceId: string;
  modes: number;
}

/** The attachment ended: a DETACH, or the connection's socket went (a resume attaches again). */
export interface ChannelDetached {
  type: 'channel.detached';
  appId: string;
  channel: string;
  connectionId: string;
}

/** `GET /channels/<id>` activated the channel (spec: Channel activity): a use, like a publish. */
export interface ChannelActivated {
  type: 'channel.activated';
  appId: string;
  channel: string;
}

/**
 * A realtime connection attached to the channel (src/realtime/channel-use.ts), on the `messages`
 * topic keyed like the channel's publishes: the stats count the channel as active in the sample
 * (issue 28), once with its publishes. At most one a channel and 6-second interval per instance.
 */
export interface ChannelUsed {
  type: 'channel.used';
  appId: string;
  channel: string;
}

/**
 * An instance's gateway started: no connection survives a restart, so every attachment the
 * instance held before ends here (its detaches may never have reached the log).
 */
export interface InstanceStarted {
  type: 'instance.started';
  instanceId: string;
  /**
   * The embedded mode: the only instance on this log, whose id (the pid) changes at every start,
   * so every attachment held before this record ends, whatever instance id holds it.
   */
  endsAll?: boolean;
}

/**
 * An instance stopped saying it is alive (production mode): the live instance that cleans up
 * after it says so, and the attachments the gone instance held end.
 */
export interface InstanceGone {
  type: 'instance.gone';
  instanceId: string;
}

export type ConnectionEvent = ConnectionOpened | ConnectionClosed | InstanceAlive | ChannelAttached | ChannelDetached | ChannelActivated | InstanceStarted | InstanceGone;

export type LogEvent = MessagesPublished | ChannelUsed | PresenceChanged | AppCreated | AppDeleted | KeyEvent | RuleEvent | TokensRevoked | UsageReported | StatsFixture | ConnectionEvent;
