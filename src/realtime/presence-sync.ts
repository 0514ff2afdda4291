import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { dataSize, type StoredMessage } from '../domain/message.js';
import { messageToWire } from '../codec/message-wire.js';
import type { PresenceProducer } from '../presence/presence-producer.js';
import type { PresenceMember, PresenceProjection } from '../../projections/presence/presence-projection.js';
import type { UsageMeter } from '../stats/usage-meter.js';
import type { Attachment } from './attachment.js';
import { Action, Flag, type ProtocolMessage, type WireFormat } from './protocol.js';
import type { RealtimeSettings } from './settings.js';

/** Bytes a socket may hold unwritten before the next SYNC page waits for them to be written. */
const SYNC_HIGH_WATER_BYTES = 256 * 1024;

const NO_MEMBERS: ReadonlyMap<string, PresenceMember> = new Map();

export const sizeOf = (items: readonly { data?: StoredMessage['data']; encoding?: string }[]): number => items.reduce((n, m) => n + dataSize(m.data, m.encoding), 0);

export function presenceToWire(m: StoredMessage | PresenceMember, format: WireFormat, action?: number): Record<string, unknown> {
  const wire = messageToWire(m as StoredMessage, format);
  if (action !== undefined) wire.action = action;
  return wire;
}

export interface PresenceSyncDeps {
  presence: Pick<PresenceProjection, 'query' | 'presentSet' | 'connectionsHeldBy'>;
  presenceProducer: PresenceProducer;
  settings: RealtimeSettings;
  instanceId: string;
  logger: Logger;
  usage?: UsageMeter;
}

/**
 * The presence set sent to attachments (SYNC pages, §5.4), and the members that leave for
 * connections gone: dropped or ended here, or held by an instance that died.
 */
export class PresenceSync {
  constructor(private readonly deps: PresenceSyncDeps) {}

  /**
   * The members present on a channel, unsorted and not copied (no sort or copy per ATTACH or SYNC
   * request: a SYNC stalled on a socket that does not read held a copy of the set, and a client
   * attaching a channel of 20,000 members by 200 names held 35 MB so).
   */
  members(appId: string, channel: string): ReadonlyMap<string, PresenceMember> {
    return this.deps.presence.presentSet(appId, channel) ?? NO_MEMBERS;
  }

  /** Whether a member is present here with that id (held by this instance, not one it moved from). */
  isPresentWithId(appId: string, channel: string, clientId: string, connectionId: string, id: string): boolean {
    const member = this.deps.presence.query({ appId, channel, clientId, connectionId, limit: 1 }).members[0];
    return member?.id === id && member.instanceId === this.deps.instanceId;
  }

  /**
   * The whole presence set, again (a client's SYNC request). While a SYNC of the attachment is still
   * being sent on this socket, the request joins it: that one ends with the whole set too (changes
   * go out as they come), and a client asking again and again costs a copy of the set once per
   * complete SYNC, not once per request.
   */
  resend(attachment: Attachment): void {
    if (!(attachment.modes & Flag.PRESENCE_SUBSCRIBE)) return;
    if (attachment.sync !== undefined && attachment.sync.epoch === attachment.conn.socketEpoch) return;
    this.send(attachment, this.members(attachment.conn.appId, attachment.base));
  }

  /**
   * SYNC pages of `present` members; the last page's cursor is empty (§5.4). Paced by the socket:
   * a page waits while the socket holds more than a high-water mark unwritten, so a set of any
   * size reaches a client that reads (written in one burst, 130,000 members went over the
   * slow-reader cut-off, maxBufferedBytes, for a client reading promptly: issue 22). Changes that
   * come meanwhile go out as they come; the SDK's sync merges them by newness (§5.4). A newer SYNC
   * of the attachment, a detach or a lost socket ends this one; so does an AUTH that took the
   * presence_subscribe mode away (with an empty last page).
   */
  send(attachment: Attachment, members: ReadonlyMap<string, PresenceMember>): void {
    const { conn, channel } = attachment;
    const epoch = conn.socketEpoch;
    const syncId = randomBytes(6).toString('base64url');
    const sync = (attachment.sync = { epoch });
    const size = this.deps.settings.syncPageSize;
    const highWater = Math.min(SYNC_HIGH_WATER_BYTES, this.deps.settings.maxBufferedBytes / 4);
    // Read as the pages go (the set as it stands then); the one after a page says whether it was the last.
    const reading = members.values();
    let ahead = reading.next();
    let page = 0;
    const next = (): void => {
      // At least one page, the last (an empty set ends the sync the ATTACHED began too).
      while (page === 0 || !ahead.done) {
        if (conn.socketEpoch !== epoch || conn.attachments.get(channel) !== attachment || attachment.sync !== sync) return;
        // An AUTH took presence_subscribe away meanwhile: no member more; an empty last page ends
        // the sync, or the SDK's presence.get() would wait for it for ever (§5.5).
        if (!(attachment.modes & Flag.PRESENCE_SUBSCRIBE)) {
          attachment.sync = undefined;
          conn.send({ action: Action.SYNC, channel, channelSerial: `${syncId}:`, presence: [] });
          return;
        }
        const present: PresenceMember[] = [];
        for (; !ahead.done && present.length < size; ahead = reading.next()) present.push(ahead.value);
        const last = ahead.done === true;
        const pm: ProtocolMessage = { action: Action.SYNC, channel, channelSerial: `${syncId}:${last ? '' : page + 1}`, presence: present.map((m) => presenceToWire(m, conn.format, 1)) };
        page++;
        let waiting = false;
        const sent = conn.send(pm, () => {
          if (waiting) setImmediate(next);
        });
        if (!sent) return;
        // Each `present` member sent counts as a presence message (spec: Events, `present`).
        this.deps.usage?.realtimeOutbound(conn.appId, 'presence', present.length, sizeOf(present));
        // Over the mark, the rest goes on once this page is written out.
        if (conn.bufferedAmount > highWater) {
          waiting = true;
          return;
        }
      }
      if (attachment.sync === sync) attachment.sync = undefined;
    };
    next();
  }

  /**
   * The members of every connection held by an instance `held` matches leave: one that died, or
   * this one's previous run after a restart.
   */
  async removeMembersHeldBy(held: (instanceId: string) => boolean, keep: (connectionId: string) => boolean = () => false): Promise<void> {
    const found = this.deps.presence.connectionsHeldBy(held).filter((c) => !keep(c.connectionId));
    if (found.length === 0) return;
    this.deps.logger.info({ connections: found.length, instances: [...new Set(found.map((c) => c.instanceId))] }, 'presence members of connections an instance lost leave');
    await Promise.all(found.map((c) => this.drop(c.appId, c.channel, c.connectionId, c.instanceId)));
  }

  /** The members a connection of this instance entered on `channel` leave (a `drop` on the log: one leave per member). */
  leave(appId: string, channel: string, connectionId: string): void {
    this.drop(appId, channel, connectionId, this.deps.instanceId).catch((err) =>
      this.deps.logger.error({ err, connectionId, channel }, 'presence leave of a gone connection failed; its members stay until the instance restarts'),
    );
  }

  private async drop(appId: string, channel: string, connectionId: string, instanceId: string): Promise<void> {
    const id = `${this.deps.instanceId}-${randomBytes(6).toString('base64url')}`;
    await this.deps.presenceProducer.append(appId, channel, [{ action: 'drop', id, connectionId, instanceId }]);
  }
}
