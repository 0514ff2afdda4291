import type { Logger } from 'pino';
import { channelKey } from '../log/partitioner.js';
import type { Attachment, Subscriber } from './attachment.js';
import type { Backlog, BacklogRecord } from './backlog.js';
import { ChannelResume, type ChannelResumeDeps } from './channel-resume.js';
import { channelSerial } from '../channels/channel-serial.js';
import type { ConnectionEvents } from './connection-events.js';
import type { Delivery } from './delivery.js';
import type { PresenceSync } from './presence-sync.js';
import { Action, Flag, toWireError, type ProtocolMessage } from './protocol.js';
import type { AttachRequest } from './channel-requests.js';
import type { InbandOccupancy } from './occupancy.js';

export interface ChannelAttachDeps {
  delivery: Delivery;
  backlog: Backlog;
  /** What a channel's resume reads: each ATTACH makes its ChannelResume with it. */
  resumeDeps: ChannelResumeDeps;
  presenceSync: PresenceSync;
  occupancy: InbandOccupancy;
  /** The log's record of attachments (connection events). */
  events: ConnectionEvents;
  logger: Logger;
}

/**
 * Attaching and detaching a connection's channels (REALTIME-PROTOCOL.md §4), for the gateway: the
 * attachment registered with delivery, ATTACHED, the SYNC, the backlog, in order.
 */
export class ChannelAttach {
  /** ATTACHes reading the log before they register, by connection and channel: a DETACH meanwhile (detach) cancels one. */
  private readonly pendingAttaches = new WeakMap<Subscriber, Map<string, object>>();

  constructor(private readonly deps: ChannelAttachDeps) {}

  /**
   * An attach: registered with delivery at the position delivery has reached, its presence set
   * taken in the same tick; ATTACHED with the position the client reads it at, then the SYNC, the
   * backlog (a resume's replay, or `rewind`) and what delivery held meanwhile, in log order.
   * The modes are `grant`'s in the tick it registers; false, nothing sent, when it grants none.
   */
  async attach(conn: Subscriber, grant: () => number, request: AttachRequest): Promise<boolean> {
    const { delivery } = this.deps;
    const { serial, rewind, filter } = request;
    const { name: channel, base } = request.channel;
    const recordKey = channelKey(conn.appId, base);
    const partition = delivery.partitionOf(recordKey);
    const resume = new ChannelResume(this.deps.resumeDeps, { serial, channel, recordKey, partition });
    if (resume.aheadOfDelivery()) {
      const epoch = conn.socketEpoch;
      const ticket = {};
      let pending = this.pendingAttaches.get(conn);
      if (!pending) this.pendingAttaches.set(conn, (pending = new Map()));
      pending.set(channel, ticket);
      await resume.checkLogEnd();
      // The socket gone meanwhile (a CLOSE right behind the ATTACH): its attachments were let go,
      // and one made now would stay in delivery, and in the channel's occupancy, for good. A DETACH
      // (answered DETACHED) or another ATTACH of the channel meanwhile: this one is answered no more.
      if (pending.get(channel) !== ticket) return true;
      pending.delete(channel);
      if (conn.socketEpoch !== epoch) return true;
    }
    // The modes of the credentials the connection holds now (an AUTH may have come meanwhile).
    const modes = grant();
    if (modes === 0) return false;
    this.detach(conn, channel);
    const target = delivery.position(partition);
    resume.plan(target);
    const attachment: Attachment = { conn, channel, base, recordKey, partition, modes, filter, occupancy: request.params.occupancy, from: resume.from ?? 0 };
    // Whether the channel has members, and the registration, in the same tick: every change after
    // it reaches the attachment. The SYNC reads the set as its pages go (not a copy): a change in
    // both it and a PRESENCE, the SDK merges by newness.
    const members = modes & Flag.PRESENCE_SUBSCRIBE ? this.deps.presenceSync.members(conn.appId, base) : undefined;
    const hasPresence = members !== undefined && members.size > 0;
    if (resume.replays || rewind) attachment.held = [];
    delivery.add(attachment);
    conn.attachments.set(channel, attachment);
    this.deps.events.attached(conn.appId, base, conn.id, modes);

    let backlog: BacklogRecord[] = [];
    if (resume.replays) {
      backlog = await resume.replay(conn, () => conn.attachments.get(channel) !== attachment);
      if (conn.attachments.get(channel) !== attachment) return true; // detached meanwhile
    } else if (rewind) {
      try {
        backlog = await this.deps.backlog.rewind(conn.appId, base, partition, target, rewind);
      } catch (err) {
        this.deps.logger.warn({ err, channel }, 'channel rewind not available; attaching without it');
      }
      if (conn.attachments.get(channel) !== attachment) return true; // detached meanwhile
    }
    let flags = modes;
    if (rewind && backlog.length > 0) flags |= Flag.HAS_BACKLOG;
    if (hasPresence) flags |= Flag.HAS_PRESENCE;
    if (resume.resumed) flags |= Flag.RESUMED;
    const attached: ProtocolMessage = { action: Action.ATTACHED, channel, flags, channelSerial: channelSerial(partition, resume.attachedAt) };
    // The params granted are echoed (RTL4k); the connection refused any other.
    if (Object.keys(request.params.granted).length > 0) attached.params = request.params.granted;
    if (resume.error) attached.error = toWireError(resume.error);
    conn.send(attached);
    if (attachment.occupancy) this.deps.occupancy.attached(attachment);
    if (hasPresence) this.deps.presenceSync.send(attachment, members);
    // The held deliveries are taken off first: the backlog goes out before them, in log order
    // (sent while `held` was still set, it would have queued behind the live messages that came
    // during its read: a resume on another instance delivered newer messages before older ones).
    const held = attachment.held;
    attachment.held = undefined;
    if (attachment.overflowed) {
      conn.slowConsumer();
      return true;
    }
    delivery.sendBacklog(attachment, backlog);
    for (const send of held ?? []) send();
    return true;
  }

  detach(conn: Subscriber, channel: string): void {
    this.pendingAttaches.get(conn)?.delete(channel);
    const attachment = conn.attachments.get(channel);
    if (!attachment) return;
    conn.attachments.delete(channel);
    // The log knows one attachment per connection and channel: one by another name of it stays.
    if (![...conn.attachments.values()].some((a) => a.base === attachment.base)) this.deps.events.detached(conn.appId, attachment.base, conn.id);
    this.deps.delivery.remove(attachment);
    if (attachment.occupancy) this.deps.occupancy.detached(attachment);
  }
}
