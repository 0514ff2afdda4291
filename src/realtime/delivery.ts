import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Limits } from '../limits.js';
import type { ConsumeOptions, Log, LogRecord, Subscription } from '../log/port.js';
import { Topics } from '../log/port.js';
import { AppliedPositions } from '../log/applied-positions.js';
import type { OwnWrites } from '../log/own-writes.js';
import { partitionFor } from '../log/partitioner.js';
import { decodeEvent, isChannelUsed } from '../log/event-codec.js';
import { channelKey } from '../log/partitioner.js';
import type { MessagesPublished } from '../domain/events.js';
import { isAssignedId } from '../messages/message.js';
import type { StoredMessage } from '../domain/message.js';
import { messageToWire } from '../codec/message-wire.js';
import { pairDigest, RecentKeys } from '../recent-keys.js';
import type { UsageMeter } from '../stats/usage-meter.js';
import type { Attachment } from './attachment.js';
import type { BacklogRecord } from './backlog.js';
import { channelSerial } from '../channels/channel-serial.js';
import { presenceToWire, sizeOf } from './presence-sync.js';
import { Action, Flag, encodeFrame, type Frame, type WireFormat } from './protocol.js';
import type { RealtimeSettings } from './settings.js';
import { LastRecords } from './last-records.js';

/** How long a delivered client-supplied id is remembered: the idempotency window of history's tail. */
const DELIVERED_IDS_WINDOW_MS = 120_000;
/** Channels whose last record delivery remembers, all partitions together (some 100 bytes each). */
const LAST_RECORDS_KEPT = 100_000;

export interface DeliveryDeps {
  log: Log;
  /** Names the delivery consumer (the Kafka adapter makes a consumer group of it). */
  consumerName: string;
  /**
   * How it reads the log: the projection runner's join (projections/runner.ts), which hands it the
   * records the projections' consumer of the topic fetched and decoded; default Log.consume.
   */
  consume?: (options: ConsumeOptions) => Subscription;
  clock: Clock;
  limits: Limits;
  settings: RealtimeSettings;
  logger: Logger;
  usage?: UsageMeter;
  /** What this instance appended: an attach waits for delivery to pass it (README: Consistency of reads). */
  ownWrites?: Pick<OwnWrites, 'of'>;
}

/** A log record's messages as a MESSAGE frame, encoded at most once per format however many receive it. */
class OutgoingMessages {
  private json?: Frame;
  private msgpack?: Frame;
  private bytes?: number;
  readonly connectionId: string | undefined;

  constructor(
    readonly event: MessagesPublished,
    /** The record's offset in its partition. */
    readonly offset: number,
    readonly channelSerial: string,
  ) {
    this.connectionId = event.messages[0]?.connectionId;
  }

  frame(format: WireFormat): Frame {
    if (format === 'json') return (this.json ??= this.build('json'));
    return (this.msgpack ??= this.build('msgpack'));
  }

  /** Payload bytes of the messages, for stats (counted once however many receive them). */
  get data(): number {
    return (this.bytes ??= sizeOf(this.event.messages));
  }

  private build(format: WireFormat, channel = this.event.channel, messages = this.event.messages): Frame {
    return encodeFrame({ action: Action.MESSAGE, channel, channelSerial: this.channelSerial, messages: messages.map((m) => messageToWire(m, format)) }, format);
  }

  /**
   * The record as a channel of another name receives it (`[?params]room`, `[filter=...]room`):
   * under that name, with only the messages its filter matches (undefined when none does).
   * Worked out once per name however many attachments share it.
   */
  variant(attachment: Attachment): Variant | undefined {
    const name = attachment.channel;
    let v = (this.variants ??= new Map()).get(name);
    if (v === undefined) {
      const filter = attachment.filter;
      const messages = filter ? this.event.messages.filter((m) => filter.matches(m)) : this.event.messages;
      v = messages.length === 0 ? null : { messages, frames: {}, bytes: messages === this.event.messages ? this.data : sizeOf(messages) };
      this.variants.set(name, v);
    }
    return v ?? undefined;
  }

  variantFrame(v: Variant, channel: string, format: WireFormat): Frame {
    return (v.frames[format] ??= this.build(format, channel, v.messages));
  }

  private variants?: Map<string, Variant | null>;
}

/** A record's messages under another channel name (OutgoingMessages.variant). */
interface Variant {
  messages: StoredMessage[];
  frames: Partial<Record<WireFormat, Frame>>;
  bytes: number;
}

/**
 * Delivery: one more consumer of the log's messages topic, sending each record to the attachments
 * of its channel here, in log order, whichever instance or route appended it; and the presence
 * messages the presence projection reports as it applies changes (deliverPresence). An attachment
 * whose backlog is being read holds what comes meanwhile, sent after the backlog.
 */
export class Delivery {
  /** Attachments by channel log key. */
  private readonly index = new Map<string, Set<Attachment>>();
  /** Client-supplied message ids delivered lately, per channel (digests): repeats are not delivered again. */
  private readonly deliveredIds: RecentKeys<number>;
  /** Next offset of the messages topic to deliver, per partition. */
  private delivered: number[] = [];
  /** `delivered`, for waits (ownMessagesDelivered). */
  private readonly progress = new AppliedPositions();
  private partitions = 1;
  /** Each channel's last record here (bounded): a resume on a quiet channel needs no read. */
  private lastRecords = new LastRecords(0);
  private subscription: Subscription | undefined;
  private messagesDelivered = 0;
  /** Whether its consumer reads the log (Subscription.reading: on Kafka, once its group is joined). */
  private isReading = false;

  constructor(private readonly deps: DeliveryDeps) {
    // Kept by count: a client may come back with a key at any time (`recover` from a saved page).
    this.deliveredIds = new RecentKeys(2 * deps.limits.maxRecentIdsPerApp, DELIVERED_IDS_WINDOW_MS, () => deps.clock.now());
  }

  /** Starts delivering from the log's current end. */
  async start(): Promise<void> {
    const { log, logger } = this.deps;
    this.partitions = await log.partitions(Topics.messages);
    const ends = await log.endOffsets(Topics.messages);
    const consume = this.deps.consume ?? ((options: ConsumeOptions) => log.consume(options));
    this.subscription = consume({
      topic: Topics.messages,
      consumer: this.deps.consumerName,
      from: ends,
      handle: (records) => this.deliverMessages(records),
      lost: (partition, next) => this.lost(partition, next),
      onError: (err) => logger.error({ err }, 'realtime delivery failed on a batch; retrying'),
    });
    // Where it starts: the end, or later where a shared consumer had handed the records on already.
    const from = this.subscription.positions();
    this.delivered = Array.from({ length: this.partitions }, (_, p) => from.get(p) ?? ends.get(p) ?? 0);
    this.lastRecords = new LastRecords(Math.max(1000, Math.ceil(LAST_RECORDS_KEPT / this.partitions)));
    this.delivered.forEach((offset, p) => this.lastRecords.start(p, offset));
    const reading = this.subscription.reading;
    if (reading) void reading.then(() => (this.isReading = true));
    else this.isReading = true;
    await this.subscription.caughtUp;
  }

  /**
   * Whether its consumer reads the log. On Kafka it joins its group (the projections' feed of the
   * messages topic, or a consumer of its own) some 3 s after the start: an instance that listens
   * before then delivers nothing appended meanwhile until it has (GET /ready says not ready; an
   * ATTACH waits for it: readyToAttach).
   */
  get reading(): boolean {
    return this.isReading;
  }

  /**
   * What an ATTACH waits for before it registers at delivery's position (undefined: nothing):
   * delivery reading the log, so that what is published after ATTACHED arrives as it is published,
   * not once the consumer has joined its group; and for a fresh attach (`ownWrites`), delivery past
   * what this instance acknowledged on the channel's partition (ownMessagesDelivered). Bounded by
   * limits.readYourWritesMs in all; false: it gave up (the attach goes on, delivery late).
   */
  readyToAttach(appId: string, channel: string, ownWrites: boolean): Promise<boolean> | undefined {
    if (this.isReading) return ownWrites ? this.ownMessagesDelivered(appId, channel) : undefined;
    const reading = this.subscription?.reading;
    if (!reading) return undefined;
    return (async () => {
      const started = Date.now();
      const limit = this.deps.limits.readYourWritesMs;
      let timer: NodeJS.Timeout | undefined;
      const joined = await Promise.race([reading.then(() => true), new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), limit)))]).finally(() => clearTimeout(timer));
      if (!joined) return false;
      const own = ownWrites ? this.ownMessagesDelivered(appId, channel, Math.max(1, limit - (Date.now() - started))) : undefined;
      return own ? await own : true;
    })();
  }

  async stop(): Promise<void> {
    await this.subscription?.stop();
  }

  /** The partition of a channel's log key. */
  partitionOf(recordKey: string): number {
    return partitionFor(recordKey, this.partitions);
  }

  /** The next offset of `partition` to deliver: everything before it was. */
  position(partition: number): number {
    return this.delivered[partition] ?? 0;
  }

  /** Whether the channel of `recordKey` certainly has no record from `offset` up to position(partition) (LastRecords). */
  nothingSince(partition: number, recordKey: string, offset: number): boolean {
    return this.lastRecords.nothingSince(partition, recordKey, offset);
  }

  add(attachment: Attachment): void {
    let set = this.index.get(attachment.recordKey);
    if (!set) this.index.set(attachment.recordKey, (set = new Set()));
    set.add(attachment);
  }

  remove(attachment: Attachment): void {
    const set = this.index.get(attachment.recordKey);
    set?.delete(attachment);
    if (set?.size === 0) this.index.delete(attachment.recordKey);
  }

  /** Sends a backlog (replay or rewind) to an attachment, each record with its own position. */
  sendBacklog(attachment: Attachment, backlog: readonly BacklogRecord[]): void {
    for (const { event, offset } of backlog) this.sendMessages(attachment, new OutgoingMessages(event, offset, channelSerial(attachment.partition, offset + 1)));
  }

  /**
   * The log deleted records before `next` that delivery had yet to read (ConsumeOptions.lost): they
   * count as delivered (an attach waiting for them goes on), and what came before is not known.
   */
  private lost(partition: number, next: number): void {
    if ((this.delivered[partition] ?? 0) >= next) return;
    this.delivered[partition] = next;
    this.lastRecords.start(partition, next);
    this.progress.lost(Topics.messages, partition, next);
  }

  private deliverMessages(records: LogRecord[]): void {
    for (const r of records) {
      const set = this.index.get(r.key);
      if (set) {
        const decoded = decodeEvent(r.value);
        const event = decoded.type === 'messages.published' ? this.notRepeated(r.key, decoded) : undefined;
        if (event) {
          const out = new OutgoingMessages(event, r.offset, channelSerial(r.partition, r.offset + 1));
          for (const attachment of set) this.sendMessages(attachment, out);
        }
      }
      // What a client may have missed is a publish: a channel's `channel.used` (every 6 s while
      // attached anywhere) does not make a quiet channel busy.
      if (!isChannelUsed(r.value)) this.lastRecords.seen(r.partition, r.key, r.offset);
      this.delivered[r.partition] = r.offset + 1;
    }
    this.progress.advance(records);
  }

  /**
   * Undefined when delivery has passed every message this instance acknowledged on the channel's
   * partition; else resolves once it has, or after limits.readYourWritesMs (false). An attach
   * waits for it, so that what the instance acknowledged before the ATTACH is before the attach
   * position: history untilAttach and rewind have it, live delivery does not send it again.
   */
  ownMessagesDelivered(appId: string, channel: string, timeoutMs = this.deps.limits.readYourWritesMs): Promise<boolean> | undefined {
    const partition = this.partitionOf(channelKey(appId, channel));
    const next = this.deps.ownWrites?.of(Topics.messages).get(partition);
    if (next === undefined || (this.delivered[partition] ?? 0) >= next) return undefined;
    return this.progress.until(Topics.messages, new Map([[partition, next]]), timeoutMs);
  }

  /**
   * The event without messages whose client-supplied id this instance delivered on the channel
   * lately (undefined when none is left): a repeat that reached the log anyway (appended by two
   * instances, or racing re-sends) is delivered once, as history keeps it once.
   */
  private notRepeated(recordKey: string, event: MessagesPublished): MessagesPublished | undefined {
    if (!event.clientIds) return event;
    const now = this.deps.clock.now();
    const fresh = event.messages.filter((m) => {
      if (isAssignedId(m.id)) return true;
      const key = pairDigest(recordKey, m.id);
      const seen = this.deliveredIds.get(key);
      if (seen !== undefined && now - seen <= DELIVERED_IDS_WINDOW_MS) return false;
      this.deliveredIds.set(key, now);
      return true;
    });
    if (fresh.length === event.messages.length) return event;
    return fresh.length === 0 ? undefined : { ...event, messages: fresh };
  }

  private sendMessages(attachment: Attachment, out: OutgoingMessages): void {
    if (attachment.held) {
      if (attachment.held.length >= this.deps.settings.maxReplayRecords) attachment.overflowed = true;
      else attachment.held.push(() => this.sendMessages(attachment, out));
      return;
    }
    if (out.offset < attachment.from) return;
    const conn = attachment.conn;
    if (!(attachment.modes & Flag.SUBSCRIBE)) return;
    if (!conn.echo && out.connectionId === conn.id) return;
    // base is the very string of channel for a plain name: a pointer comparison on the hot path.
    if (attachment.channel !== attachment.base) return this.sendVariant(attachment, out);
    if (conn.sendFrame(out.frame(conn.format))) {
      this.messagesDelivered += out.event.messages.length;
      this.deps.usage?.realtimeOutbound(conn.appId, 'messages', out.event.messages.length, out.data);
    }
  }

  /** A record to an attachment by another name of its channel (a qualified or derived name). */
  private sendVariant(attachment: Attachment, out: OutgoingMessages): void {
    const conn = attachment.conn;
    const v = out.variant(attachment);
    if (!v) return;
    if (conn.sendFrame(out.variantFrame(v, attachment.channel, conn.format))) {
      this.messagesDelivered += v.messages.length;
      this.deps.usage?.realtimeOutbound(conn.appId, 'messages', v.messages.length, v.bytes);
    }
  }

  /** Presence messages of a change the presence projection applied, to the channel's attachments here. */
  deliverPresence(appId: string, channel: string, entries: StoredMessage[]): void {
    const set = this.index.get(channelKey(appId, channel));
    if (!set || entries.length === 0) return;
    for (const attachment of set) this.sendPresence(attachment, entries);
  }

  /** `channelSerial`: the position when the change came; held, it goes out behind messages before it. */
  private sendPresence(attachment: Attachment, entries: StoredMessage[], channelSerial = this.serialFor(attachment)): void {
    if (attachment.held) {
      if (attachment.held.length >= this.deps.settings.maxReplayRecords) attachment.overflowed = true;
      else attachment.held.push(() => this.sendPresence(attachment, entries, channelSerial));
      return;
    }
    const conn = attachment.conn;
    // A connection always gets its own members' events: the SDK learns its members from them (§5.2).
    const subscribed = (attachment.modes & Flag.PRESENCE_SUBSCRIBE) !== 0;
    const items = subscribed ? entries : entries.filter((e) => e.connectionId === conn.id);
    if (items.length === 0) return;
    const sent = conn.send({
      action: Action.PRESENCE,
      channel: attachment.channel,
      channelSerial,
      presence: items.map((e) => presenceToWire(e, conn.format)),
    });
    if (sent) this.deps.usage?.realtimeOutbound(conn.appId, 'presence', items.length, sizeOf(items));
  }

  /**
   * A `[meta]occupancy` message (the `occupancy` channel param, REALTIME-PROTOCOL.md §9) to one
   * attachment, at its position; held, it goes out behind the messages before it.
   */
  sendOccupancy(attachment: Attachment, message: StoredMessage, channelSerial = this.serialFor(attachment)): void {
    if (attachment.held) {
      if (attachment.held.length >= this.deps.settings.maxReplayRecords) attachment.overflowed = true;
      else attachment.held.push(() => this.sendOccupancy(attachment, message, channelSerial));
      return;
    }
    const conn = attachment.conn;
    conn.send({ action: Action.MESSAGE, channel: attachment.channel, channelSerial, messages: [messageToWire(message, conn.format)] });
  }

  /** The attachment's position: never behind what its client already has. */
  private serialFor(attachment: Attachment): string {
    return channelSerial(attachment.partition, Math.max(attachment.from, this.delivered[attachment.partition]));
  }

  numbers(): { attachments: number; delivered: number; deliveryLag: number } {
    let attachments = 0;
    for (const set of this.index.values()) attachments += set.size;
    let deliveryLag = 0;
    for (const [p, end] of this.subscription?.highWatermarks() ?? []) deliveryLag += Math.max(0, end - (this.delivered[p] ?? 0));
    return { attachments, delivered: this.messagesDelivered, deliveryLag };
  }
}
