import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { logAndStores, type Config } from './config.js';
import type { Adapters } from './adapters.js';
import { ServiceError } from './errors.js';
import { buildApp } from './app.js';
import { systemClock, MonotonicClock, type Clock } from './clock.js';
import { Authenticator } from './auth/authenticate.js';
import { DEFAULT_TOKEN_POLICY, TokenService } from './auth/tokens.js';
import { Topics, type Log } from './log/port.js';
import { EmbeddedLog } from './log/embedded/embedded-log.js';
import { AppendBatcher } from './log/append-batcher.js';
import { OwnWrites } from './log/own-writes.js';
import { decodeEvent, encodeEvent } from './log/event-codec.js';
import type { AppDeleted, KeyEvent, TokensRevoked } from './domain/events.js';
import { Publisher } from './messages/publisher.js';
import { ChannelAdmission } from './channels/channel-admission.js';
import { APPS_CHECK_WAIT_MS, checkAppsLeftOutOnceWritten, configuredApps } from './apps/configured-apps.js';
import { appWriters } from './apps/app-writers.js';
import { randomId } from './apps/default-app.js';
import { AppliedPositions } from './log/applied-positions.js';
import { keysCatchUpOf } from './apps/keys-catch-up.js';
import { parseCapability } from './auth/capability.js';
import { AppRegistry } from '../projections/apps/app-registry.js';
import { RevocationRegistry } from '../projections/revocations/revocation-registry.js';
import { APPS_SNAPSHOT, APPS_SNAPSHOT_VERSION, restoreAppsSnapshot, takeAppsSnapshot } from '../projections/apps/apps-snapshot.js';
import type { HistoryProjection } from '../projections/history/history-projection.js';
import { PresenceProjection } from '../projections/presence/presence-projection.js';
import { PresenceProducer } from './presence/presence-producer.js';
import type { StatsProjection } from '../projections/stats/stats-projection.js';
import { CachedStatsStore } from '../projections/stats/stats-cache.js';
import { UsageMeter } from './stats/usage-meter.js';
import { Gateway } from './realtime/gateway.js';
import { openFileLimit, realtimeConnectionsFor } from './realtime/settings.js';
import { ConnectionEvents } from './realtime/connection-events.js';
import { ChannelsProjection } from '../projections/channels/channels-projection.js';
import { ProjectionRunner } from '../projections/runner.js';
import { ProjectionSet, STATS_TOPICS } from '../projections/projection-set.js';
import { logResetMessage, resetSince, storePositions } from '../projections/store-log-check.js';
import type { StatsReader } from '../projections/stats/stats-reader.js';
import { StatsWritersBehind, statsWritten } from '../projections/stats/stats-read-wait.js';
import { snapshotStoreFor } from '../projections/snapshots.js';
import { SnapshotSchedule } from '../projections/snapshot-schedule.js';
import { LifecycleAnnouncer } from '../projections/channels/lifecycle-announcer.js';
import { startWebhookDelivery } from '../projections/webhooks/webhook-delivery.js';
import { packageVersion } from './build-info.js';
import { Metrics } from './metrics/metrics.js';
import type { ReadinessCheck } from './routes/ops.js';


export { embeddedAdapters, adaptersFor, type Adapters } from './adapters.js';

export interface Service {
  app: FastifyInstance;
  config: Config;
  log: Log;
  registry: AppRegistry;
  revocations: RevocationRegistry;
  history: HistoryProjection;
  presence: PresenceProjection;
  presenceProducer: PresenceProducer;
  stats: StatsProjection;
  /** Every projection's consumer: which partitions, how far behind (projections/runner.ts). */
  runner: ProjectionRunner;
  /** The rows GET /stats reads, held in memory (its counts are in GET /metrics). */
  statsCache: CachedStatsStore;
  /** Production mode: what follows every stats partition for the cache and read-your-writes (its stand-ins: tests). */
  statsReader?: StatsReader;
  channels: ChannelsProjection;
  usage: UsageMeter;
  batcher: AppendBatcher;
  gateway: Gateway;
  metrics: Metrics;
  /** GET /ready's checks: not shutting down, the log writable, every consumer reading and within READY_MAX_LAG. */
  readiness(): ReadinessCheck[];
  /** The default app's root key when this start created it (printed once by main.ts). */
  createdDefaultKey?: string;
  close(): Promise<void>;
}

/**
 * Starts everything but the listener: replays the apps topic, restarts the history projection
 * from its checkpoint, and builds the HTTP app. Read routes are ready when this resolves.
 */
export async function startService(config: Config, logger: Logger, adapters: Adapters, clock: Clock = systemClock): Promise<Service> {
  const { log, historyStore, presenceHistoryStore } = adapters;
  // Pages of stats read rows held in memory; the projection's writes drop what they change.
  const statsStore = new CachedStatsStore(adapters.statsStore, { maxRows: config.limits.statsCacheRows, maxAgeMs: config.limits.statsCacheMaxAgeMs, clock });
  const registry = new AppRegistry();
  const configured = configuredApps({ appsFile: config.appsFile, dataDir: config.dataDir, now: clock.now() });
  for (const app of configured.apps) registry.put(app);
  for (const { message, fields } of configured.warnings) logger.warn(fields, message);

  // The stores' checkpoints are of this log, or the start refuses (projections/store-log-check.ts;
  // README: A log made again): checked while the apps topic is replayed (its read of a marked record
  // joins a reader's group, some seconds on Kafka), awaited before any projection of a store starts.
  const storesChecked = (async () =>
    resetSince(log, await storePositions({ history: historyStore, presenceHistory: presenceHistoryStore, stats: adapters.statsStore }, STATS_TOPICS), (err, store) =>
      logger.warn({ err, store }, 'the record a store marked could not be read to check the log against: not checked'),
    ))();
  storesChecked.catch(() => undefined); // awaited below, unless the apps replay fails first
  const metrics = new Metrics({ version: packageVersion(), log: adapters.log.kind, store: adapters.historyStore.kind });
  const consumerName = (name: string): string => (log.kind === 'kafka' ? `${name}-${config.instanceId}-${randomId(4)}` : name);
  // Every projection's consumer, its lag, errors and retries (projections/runner.ts).
  const runner = new ProjectionRunner({
    log,
    logger,
    consumerName,
    shareConsumers: log.kind === 'kafka', // each Kafka consumer fetches and decodes every record: one per topic for the projections reading all of it
    onBatchFailed: (consumer) => metrics.batchFailed(consumer),
    onStoreWriteFailed: (projection) => metrics.storeWriteFailed(projection),
  });

  // Token revocations, on the same topic: every instance holds them all, a restart included.
  const revocations = new RevocationRegistry(DEFAULT_TOKEN_POLICY.maxTtlMs);
  /** What a revocation does to realtime connections (set once the gateway exists). */
  let onRevoked: ((event: TokensRevoked) => void) | undefined;
  /** What a key change does to realtime connections (likewise). */
  let onKeyChanged: ((event: KeyEvent | AppDeleted) => void) | undefined;
  /** How far the apps topic is applied here: key management answers once its change is (read-your-writes). */
  const appsApplied = new AppliedPositions();

  // The in-memory projections start from their snapshots (README: A bounded start).
  const snapshots = snapshotStoreFor(config, log, logger, adapters.sharedSnapshots);
  // Applications created through the sandbox route, key management and token revocations: restored
  // from their snapshot and the topic after it (or the topic whole), before the others (they ask
  // it which channels persist).
  await runner.start({
    name: 'apps',
    topics: [Topics.apps],
    from: async () => {
      const from = await restoreAppsSnapshot(snapshots, registry, revocations);
      appsApplied.include(Topics.apps, from);
      return from;
    },
    handle: (records) => {
      for (const r of records) {
        const event = decodeEvent(r.value);
        if (registry.canHandle(event)) {
          registry.evolve(event);
          // What it does to connections never holds the topic up (a throw would retry the batch).
          if (event.type === 'key.updated' || event.type === 'key.revoked' || event.type === 'app.deleted') {
            try {
              onKeyChanged?.(event);
            } catch (err) {
              logger.error({ err, appId: event.appId }, 'applying a key change to realtime connections failed');
            }
          }
        } else if (revocations.canHandle(event) && revocations.evolve(event)) onRevoked?.(event);
      }
      appsApplied.advance(records);
    },
    lost: (topic, partition, next) => appsApplied.lost(topic, partition, next),
  });

  const retentionOf = (appId: string, channel: string): number | undefined => {
    const rule = registry.rule(appId, channel);
    return rule?.persisted ? (rule.retentionHours ?? config.persistedRetentionHours) : undefined;
  };
  const isPersisted = (appId: string, channel: string): boolean => retentionOf(appId, channel) !== undefined;
  const reset = await storesChecked.catch(async (err: unknown) => {
    await runner.stop().catch(() => undefined);
    throw err;
  });
  if (reset) {
    await runner.stop().catch(() => undefined);
    throw logResetMessage(reset, logAndStores(config, log.kind === 'kafka'));
  }
  const projections = await ProjectionSet.start({
    config,
    logger,
    clock,
    runner,
    stores: { history: historyStore, presenceHistory: presenceHistoryStore, stats: statsStore },
    retentionOf,
    flushIntervalMs: adapters.projectionFlushMs,
    // Each history, presence-history and stats row written by one instance (README: production mode).
    shareWrites: log.kind === 'kafka',
    statsCache: statsStore,
    snapshots,
  });
  const { history, presence, stats, channels } = projections;
  const snapshotSchedule = snapshots && new SnapshotSchedule(snapshots, [
    { name: PresenceProjection.snapshotName, version: PresenceProjection.snapshotVersion, take: () => presence.snapshot() },
    { name: ChannelsProjection.snapshotName, version: ChannelsProjection.snapshotVersion, take: () => channels.snapshot() },
    { name: APPS_SNAPSHOT, version: APPS_SNAPSHOT_VERSION, take: () => takeAppsSnapshot(registry, revocations, appsApplied.of(Topics.apps)) },
  ], config.snapshotIntervalMs, logger.child({ component: 'snapshots' }));
  snapshotSchedule?.start();
  let closing: Promise<void> | undefined;
  if (config.appsFile) {
    checkAppsLeftOutOnceWritten({
      appsFile: config.appsFile,
      written: () => statsWritten(log, STATS_TOPICS, (targets) => projections.statsReflect(targets, APPS_CHECK_WAIT_MS)),
      closing: () => closing !== undefined,
      withData: () => statsStore.appsWithData(),
      known: (appId) => registry.app(appId) !== undefined,
      logger,
    });
  }

  const appendClock = new MonotonicClock(clock);
  // Every append notes its positions, which reads wait for (README: Consistency of reads).
  const ownWrites = new OwnWrites(config.limits.readYourWritesMs);
  const batcher = new AppendBatcher(ownWrites.recording(log), appendClock, undefined, metrics.appends);
  const presenceProducer = new PresenceProducer(batcher);
  const usage = new UsageMeter(batcher, clock, config.instanceId, logger);
  usage.start();
  // Channels in use are bounded (MAX_ACTIVE_CHANNELS, _PER_APP): a publish, attach or presence change may not begin one past them.
  const admission = new ChannelAdmission(channels, config.limits, clock);
  const publisher = new Publisher(
    batcher,
    (appId, channel, id) => {
      const seen = history.tail.idSeenAt(appId, channel, id);
      return seen !== undefined && clock.now() - seen <= config.historyTailMs;
    },
    clock,
    config.limits,
    metrics.published,
    (appId, channel) => admission.admit(appId, channel),
  );

  const connectionEvents = new ConnectionEvents({
    log, batcher, clock, logger,
    instanceId: config.instanceId,
    consumerName: consumerName('connections'),
    consume: (options) => runner.join(options),
    // One instance per DATA_DIR in the embedded mode: its restart removes what it left (below).
    aliveIntervalMs: log.kind === 'kafka' ? config.realtime.instanceAliveIntervalMs : 0,
    // Its start ends every earlier run's attachments, as removeMembersOfPreviousRun (below) their members (once the resume window has passed).
    soleInstance: log.kind === 'embedded',
    attachmentEvents: { rate: config.realtime.attachmentEventsRate, burst: 2 * config.realtime.maxChannelsPerConnection },
  });
  // One instance announces lifecycle events (the others read them back), so that realtime
  // subscribers do not get each twice; another takes over when it stops saying it is alive.
  const announcer = new LifecycleAnnouncer({ projection: channels, publisher, clock, logger, leads: () => connectionEvents.leads() });
  announcer.start();

  // Webhooks: each rule a consumer of the log from its own checkpoint (README: Webhooks).
  const webhooks = await startWebhookDelivery({ log, runner, logger: logger.child({ component: 'webhooks' }), registry, settings: config.webhooks, checkpoints: adapters.webhookCheckpoints, dataDir: config.dataDir });
  let gateway: Gateway | undefined;
  const consumerLag = (): Map<string, number> => {
    const lags = runner.lag();
    if (gateway) lags.set('realtime-delivery', gateway.metrics().deliveryLag);
    // A reader of the connections feed (runner.join), whose lag the runner does not list.
    lags.set('connection-events', connectionEvents.lag());
    return lags;
  };
  const readiness = (): ReadinessCheck[] => {
    return [
      { name: 'shutdown', ok: closing === undefined, detail: closing === undefined ? 'running' : 'shutting down' },
      metrics.appends.readiness(log.kind, log instanceof EmbeddedLog ? log.unavailable : undefined),
      // A consumer not reading the log yet (its Kafka group joining, some 3 s after a start) fails it
      // too: caught up with what the log held at its start, it is deaf to what comes after.
      runner.consumersCheck(consumerLag(), config.readyMaxLag, [
        ...(gateway?.deliveryReading ? [] : ['realtime-delivery']),
        ...(connectionEvents.reading ? [] : ['connection-events']),
      ]),
      webhooks.readiness(),
    ];
  };

  const keysCatchUp = keysCatchUpOf(log, appsApplied, config.limits, logger);
  const tokens = new TokenService(registry, undefined, config.limits, keysCatchUp);
  const authenticator = new Authenticator(registry, tokens, revocations, keysCatchUp);
  // What routes append to the apps topic: sandbox apps, key and rule changes, revocations.
  const { admin, keys, revoker } = appWriters({
    registry, revocations, batcher, presenceProducer, presence, ownWrites, appsApplied, clock,
    limits: config.limits,
    rulesChanged: () => webhooks.reconcileNow(),
    onRevoked: (event) => onRevoked?.(event),
  });
  const app = buildApp({
    clock,
    authenticator,
    connectionOf: (appId, key) => gateway?.connectionForKey(appId, key),
    comet: { transport: () => gateway?.comet, maxSendBytes: config.realtime.cometMaxSendBytes },
    tokens,
    apps: registry,
    revoker,
    keys,
    publisher,
    history: {
      query: (q) => history.query(q),
      visibleUntil: () =>
        history.visibleUntil(
          projections.historyCaughtUp(),
          batcher.oldestInFlight(Topics.messages),
          appendClock.fence(),
        ),
      ownWrites: () => ownWrites.reflectedIn(history.progress, [Topics.messages], 'history projection'),
    },
    presence: {
      members: (q) => presence.query(q),
      history: (q) => presence.historyQuery(q),
      visibleUntil: () =>
        presence.history.visibleUntil(
          projections.presenceCaughtUp(),
          batcher.oldestInFlight(Topics.presence),
          appendClock.fence(),
        ),
      ownWrites: () => ownWrites.reflectedIn(presence.progress, [Topics.presence], 'presence projection'),
    },
    stats: {
      query: (q) => statsStore.query(q),
      oldest: (appId) => statsStore.oldestInterval(appId),
      // Applied and written to the store (visible() flushes what is pending): what this instance counted is in the answer.
      ownWrites: async () => {
        try {
          await projections.statsReflect(STATS_TOPICS.map((topic) => [topic, ownWrites.last(topic)]), config.limits.readYourWritesMs);
        } catch (err) {
          // A writer that does not write (an instance killed: its partitions wait for the group's
          // session timeout) must not make every instance's stats unanswerable meanwhile: the
          // answer is what the store holds, and the rows follow once a live writer has the partitions.
          if (err instanceof StatsWritersBehind) {
            metrics.statsReadsBehindWriters++;
            logger.warn({ records: err.records }, 'GET /stats answered without rows the stats writers have not written yet (a writer slow or gone)');
            return;
          }
          throw new ServiceError('timeout', `the stats projection did not apply and store what this instance counted within ${config.limits.readYourWritesMs} ms (${(err as Error).message}); the answer would leave it out, so it is not given: retry`, err);
        }
      },
    },
    channels: {
      details: (appId, channel, now) => channels.details(appId, channel, now),
      list: (appId, q, now) => channels.list(appId, q, now),
      activate: (appId, channel, now) => channels.activate(appId, channel, now),
      ownWrites: () => ownWrites.reflectedIn(channels.progress, [Topics.messages, Topics.presence, Topics.connections], 'channels projection'),
    },
    usage,
    isPersisted,
    statsFixtures: config.sandbox
      ? {
          // Read-your-writes: answered once the stats projection has applied the fixtures and
          // written them to its store, so the caller's next GET /stats sees them.
          append: async (appId, fixtures) => {
            const positions = await batcher.append(
              Topics.usage,
              fixtures.map((f) => ({ key: appId, build: () => encodeEvent({ type: 'stats.fixture', appId, ...f }) })),
            );
            try {
              await projections.statsReflect([[Topics.usage, positions]], config.limits.statsFixtureVisibleMs);
            } catch (err) {
              throw new ServiceError('timeout', `the stats fixtures are on the log but the stats projection did not apply them within ${config.limits.statsFixtureVisibleMs} ms; they count once it does`, err);
            }
          },
        }
      : undefined,
    limits: config.limits,
    sandbox: config.sandbox ? admin : undefined,
    logger: logger,
    metrics,
    readiness,
    corsOrigins: config.corsOrigins,
  });

  // The realtime gateway, on the same port. Members a previous run of this instance left present
  // (a crash, a restart) leave first: no connection survives a restart, and a client that
  // resumes here enters again (the SDK re-enters its members on every attach).
  const openFiles = openFileLimit();
  const realtimeSettings = { ...config.realtime, maxConnections: realtimeConnectionsFor(config.realtime.maxConnections, config.limits.maxConnections, openFiles) };
  if (realtimeSettings.maxConnections < config.realtime.maxConnections) {
    // A value set and lowered is a warning; the default is "as many as the open files allow".
    const figures = { configured: config.realtime.maxConnections, effective: realtimeSettings.maxConnections, openFiles, httpConnections: config.limits.maxConnections };
    if (config.realtimeMaxConnectionsSet) {
      logger.warn(figures, 'REALTIME_MAX_CONNECTIONS lowered to what the open-file limit leaves beside MAX_CONNECTIONS; raise the limit (ulimit -n) or lower MAX_CONNECTIONS for more');
    } else {
      logger.info(figures, 'realtime connections bounded by the open-file limit beside MAX_CONNECTIONS (raise ulimit -n for more)');
    }
  }
  gateway = new Gateway({
    authenticator,
    apps: registry,
    publisher,
    presenceProducer,
    presence,
    history,
    log,
    clock,
    limits: config.limits,
    settings: realtimeSettings,
    instanceId: config.instanceId,
    logger,
    usage,
    consumerName: consumerName('delivery'),
    consume: (options) => runner.join(options),
    events: connectionEvents,
    ownWrites,
    occupancy: { metrics: (appId, channel) => channels.metrics(appId, channel), onOccupancyChanged: (listener) => channels.occupancyChanges.subscribe(listener) },
    admitChannel: (appId, channel) => admission.admit(appId, channel),
  });
  // The previous run's members stay for the resume window: those whose clients resume here keep them.
  gateway.removeMembersOfPreviousRun((instanceId) => log.kind === 'embedded' || instanceId === config.instanceId);
  await gateway.start(app.server);
  const realtime = gateway;
  // Realtime connections on a revoked token: DISCONNECTED 40141 once the revocation applies (the
  // SDK renews its token and resumes); with allowReauthMargin, an AUTH first, so a client can
  // renew before then and keep its connection. The margin's end is found by a check every second
  // (below), for revocations this instance saw arrive and those it replayed at its start alike.
  const disconnectRevoked = (): void => void realtime.revokeConnections((c) => revocations.isRevoked(c, clock.now()));
  onRevoked = (event) => {
    if (event.appliesAt <= clock.now()) return disconnectRevoked();
    realtime.revokeConnections((c) => revocations.isRevokedOrPending(c), true);
  };
  onKeyChanged = (event) => {
    if (event.type === 'app.deleted') realtime.appDeleted(event.appId);
    else if (event.type === 'key.revoked') realtime.keyChanged(event.keyName, { revoked: true });
    else if (event.type === 'key.updated' && event.capability !== undefined) realtime.keyChanged(event.keyName, { revoked: false, capability: parseCapability(event.capability) });
  };
  usage.measureConnections(() => realtime.connectionsByApp());
  metrics.attach({
    consumerLag,
    tailEntries: () => new Map([['history', history.tail.count], ['presence-history', presence.history.tail.count]]),
    openConnections: () => new Promise((resolve) => app.server.getConnections((err, n) => resolve(err ? 0 : n))),
    realtime: () => realtime.metrics(),
    statsCache: () => ({ rows: statsStore.size, hits: statsStore.hits, misses: statsStore.misses }),
    webhooks: () => webhooks.targets(),
    skippedRecords: () => log.skippedRecords?.() ?? [],
    lostRecords: () => log.lostRecords?.() ?? [],
    unstoredRows: () => new Map([['history', projections.historyWriter.unstored], ['presence-history', projections.presenceWriter.history.unstored]]),
  });

  const timers = [
    setInterval(() => {
      void projections.evict().catch((err) => logger.warn({ err }, 'in-memory history not evicted: the store did not say how far it holds'));
      revocations.prune(clock.now());
    }, 5_000),
    setInterval(() => {
      if (revocations.takeApplied(clock.now())) disconnectRevoked();
    }, 1_000),
    setInterval(() => {
      for (const store of [historyStore, presenceHistoryStore]) {
        void store.dropExpired(clock.now()).catch((err) => logger.error({ err }, 'history retention failed'));
      }
      if (log instanceof EmbeddedLog) {
        // A full disk, say: never a crash.
        void log.enforceRetention(clock.now()).catch((err) => {
          // A retention cut short by the service's own stop is no failure.
          if (closing !== undefined) logger.info({ err }, 'log retention stopped with the service; it runs again an hour after the next start');
          else logger.error({ err }, 'log retention failed; tried again in an hour');
        });
      }
    }, 3600_000),
  ];
  for (const t of timers) t.unref();

  // Every step runs even when an earlier one fails (a full disk fails the projections' last
  // flush): the log and the data directory's lock are still closed. The first failure is thrown.
  const steps: [string, () => Promise<void>][] = [
    ['realtime gateway', () => gateway!.close()],
    // Requests in flight are answered; a keep-alive connection is closed as soon as it is idle
    // (fastify closes the idle ones once, when closing starts; the rest become idle later).
    ['http', async () => {
      const sweep = setInterval(() => app.server.closeIdleConnections(), 50);
      await app.close().finally(() => clearInterval(sweep));
    }],
    ['usage', () => usage.close()],
    ['lifecycle announcer', () => announcer.close()],
    ['webhooks', () => webhooks.close()],
    // Production: the shared writers first apply their partitions up to the log's end, within half of
    // SHUTDOWN_TIMEOUT_MS, so the stores hold what the snapshots cover (projections/writer-drain.ts),
    // then write their rows and checkpoints before leaving their groups (never after the next holder's).
    ['consumers', () => runner.stop({ drainMs: closeStartedAt + config.shutdownTimeoutMs / 2 - Date.now(), lastWrites: () => projections.sealWriters() })],
    ['snapshots', async () => snapshotSchedule?.close()], // after the consumers: the state is final
    ['projections', () => projections.close()],
    ['history store', () => historyStore.close()],
    ['presence history store', () => presenceHistoryStore.close()],
    ['stats store', () => statsStore.close()],
    // Kafka: its consumers leave their groups (KafkaLog.closeAndLeave) within SHUTDOWN_TIMEOUT_MS, less up to 1 s for the rest.
    ['log', async () => void (await (log.closeAndLeave?.(closeStartedAt + config.shutdownTimeoutMs - Math.min(1_000, config.shutdownTimeoutMs / 10) - Date.now()) ?? log.close()))],
    ['adapters', async () => adapters.close?.()], // last: the data directory's lock
  ];
  let closeStartedAt = 0;
  const close = (): Promise<void> =>
    (closing ??= (async () => {
      closeStartedAt = Date.now();
      for (const t of timers) clearInterval(t);
      let first: unknown;
      for (const [name, step] of steps) {
        try {
          await step();
        } catch (err) {
          logger.error({ err, step: name }, 'shutdown step failed; going on with the others');
          first ??= err;
        }
      }
      if (first !== undefined) throw first;
    })());

  return { app, config, log, runner, registry, revocations, history, presence, presenceProducer, stats, statsCache: statsStore, statsReader: projections.statsReader, channels, usage, batcher, gateway, metrics, readiness, createdDefaultKey: configured.createdDefaultKey, close };
}
