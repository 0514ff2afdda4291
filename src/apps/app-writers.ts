// The writers of the `apps` topic on behalf of routes: sandbox apps (POST and DELETE /apps), key
// and webhook rule changes (KeyAdmin's append) and token revocations. Each takes from its app's
// budget (app-events-budget.ts: that topic is kept for good) and answers once what it appended is
// durable, key changes once this instance applied them. Apart from service.ts, which wires these
// and holds the topic's consumer (which applies the same events on every instance); the routes
// reach them through the ports below.
import { ServiceError } from '../errors.js';
import type { Clock } from '../clock.js';
import type { Limits } from '../limits.js';
import { Topics } from '../log/port.js';
import type { AppendBatcher } from '../log/append-batcher.js';
import type { OwnWrites } from '../log/own-writes.js';
import { positionsAfter, type AppliedPositions } from '../log/applied-positions.js';
import { encodeEvent } from '../log/event-codec.js';
import type { TokensRevoked } from '../domain/events.js';
import type { AppDefinition } from '../domain/app.js';
import type { PresenceFields } from '../presence/presence-body.js';
import type { PresenceProducer } from '../presence/presence-producer.js';
import type { AppRegistry } from '../../projections/apps/app-registry.js';
import type { RevocationRegistry } from '../../projections/revocations/revocation-registry.js';
import type { PresenceProjection } from '../../projections/presence/presence-projection.js';
import { AppEventsBudget, SANDBOX_BUDGET } from './app-events-budget.js';
import { KeyAdmin } from './key-admin.js';
import { randomId } from './default-app.js';

export interface PresenceFixture {
  channel: string;
  members: PresenceFields[];
}

export interface AppAdmin {
  /**
   * Appends the presence fixtures and app.created, all or nothing, and resolves once durable and
   * applied locally. The input is valid (parseAppSetup); a failure of the log leaves no app.
   */
  create(app: AppDefinition, presence: PresenceFixture[]): Promise<void>;
  delete(appId: string): Promise<void>;
  /** Sandbox apps the service holds (created here and not deleted). */
  held(): number;
}

export interface TokenRevoker {
  /** Revocations held: all apps, or one app's. */
  held(appId?: string): number;
  /** How many more revocations would be held once `event` applies (a repeat takes no room). */
  growth(event: TokensRevoked): number;
  /** Whether `event` would change what is revoked; one that would not is answered without a log append. */
  changes(event: TokensRevoked): boolean;
  /** Appends the revocation to the log and applies it here; resolves once it is durable. */
  revoke(event: TokensRevoked): Promise<void>;
}

export interface AppWritersDeps {
  registry: AppRegistry;
  revocations: RevocationRegistry;
  batcher: AppendBatcher;
  presenceProducer: PresenceProducer;
  presence: Pick<PresenceProjection, 'progress' | 'connectionsOfApp'>;
  ownWrites: OwnWrites;
  /** How far this instance applied the apps topic (its consumer in service.ts). */
  appsApplied: AppliedPositions;
  clock: Clock;
  limits: Limits;
  /** A webhook rule created or deleted: the webhook consumers follow the rules before the answer. */
  rulesChanged: () => Promise<void>;
  /** A revocation applied here: what it does to realtime connections. */
  onRevoked: (event: TokensRevoked) => void;
}

export function appWriters(deps: AppWritersDeps): { admin: AppAdmin; keys: KeyAdmin; revoker: TokenRevoker } {
  const { registry, revocations, batcher, presenceProducer, presence, ownWrites, appsApplied, clock, limits } = deps;
  // What clients add to the apps topic, kept for good: budgeted per app (app-events-budget.ts).
  const appEvents = new AppEventsBudget(limits, clock);
  const admin: AppAdmin = {
    create: async (app: AppDefinition, fixtures: PresenceFixture[]) => {
      appEvents.take(SANDBOX_BUDGET, 'the app');
      // All or nothing: the fixtures first, in one append, then the app. The app exists only once
      // both are durable; if either fails there is no app (fixtures of an app no key can reach are inert).
      // Fixture members are held by no realtime connection: they share one connectionId of their
      // own, and without an instanceId no instance's cleanup makes them leave.
      const connectionId = randomId(8);
      await presenceProducer.appendAcross(
        app.appId,
        fixtures.map((f) => ({ channel: f.channel, changes: f.members.map((m) => ({ action: 'enter' as const, connectionId, ...m })) })),
      );
      await batcher.append(Topics.apps, [{ key: app.appId, build: () => encodeEvent({ type: 'app.created', app }) }]);
      registry.put(app);
    },
    delete: async (appId: string) => {
      // Its members leave first (its fixtures' would stay for good: no connection holds them), so
      // they count no more against the presence limits and its channels close.
      await ownWrites.reflectedIn(presence.progress, [Topics.presence], 'presence projection');
      const drops = presence.connectionsOfApp(appId).map(({ channel, connectionId }) => ({ channel, changes: [{ action: 'drop' as const, connectionId }] }));
      await presenceProducer.appendAcross(appId, drops);
      await batcher.append(Topics.apps, [{ key: appId, build: () => encodeEvent({ type: 'app.deleted', appId }) }]);
      registry.remove(appId);
    },
    held: () => registry.all().filter((a) => a.source === 'sandbox').length,
  };

  // Key management: an event on the apps topic, answered once this instance's consumer applied it.
  const keys = new KeyAdmin({
    registry,
    clock,
    limits,
    append: async (event) => {
      appEvents.take(event.appId, event.type.startsWith('rule.') ? 'the webhook rule change' : 'the key change');
      const positions = await batcher.append(Topics.apps, [{ key: event.appId, build: () => encodeEvent(event) }]);
      if (!(await appsApplied.until(Topics.apps, positionsAfter(positions), limits.keyChangeVisibleMs))) {
        throw new ServiceError('timeout', `the key change is on the log but this instance did not apply it within ${limits.keyChangeVisibleMs} ms; it holds once applied`);
      }
      if (event.type === 'rule.created' || event.type === 'rule.deleted') await deps.rulesChanged();
    },
  });

  const revoker: TokenRevoker = {
    held: (appId) => revocations.held(appId),
    growth: (event) => revocations.growth(event),
    changes: (event) => revocations.changes(event),
    // Applied here as soon as it is durable (this instance answers with it in force); the
    // consumer in service.ts gets it again from the log, a repeat that changes nothing.
    revoke: async (event) => {
      appEvents.take(event.appId, 'the revocation');
      await batcher.append(Topics.apps, [{ key: event.appId, build: () => encodeEvent(event) }]);
      if (revocations.evolve(event)) deps.onRevoked(event);
    },
  };
  return { admin, keys, revoker };
}
