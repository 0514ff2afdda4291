import { randomBytes } from 'node:crypto';
import type { AppendBatcher } from '../log/append-batcher.js';
import { Topics, type LogPosition } from '../log/port.js';
import { channelKey } from '../log/partitioner.js';
import { encodeEvent } from '../log/event-codec.js';
import type { PresenceEvent } from '../domain/presence-event.js';

export type PresenceChange = Omit<PresenceEvent, 'id' | 'timestamp'> & { id?: string };

/**
 * Appends presence changes to the `presence` topic: the realtime gateway's, the sandbox
 * fixtures' and the tests'.
 */
export class PresenceProducer {
  constructor(private readonly batcher: AppendBatcher) {}

  /** Resolves with the changes' positions once they are durable. */
  append(appId: string, channel: string, changes: PresenceChange[]): Promise<LogPosition[]> {
    return this.appendAcross(appId, [{ channel, changes }]);
  }

  /** Changes on several channels of one app in one log append: all of them land, or none. */
  async appendAcross(appId: string, channels: { channel: string; changes: PresenceChange[] }[]): Promise<LogPosition[]> {
    const records = channels.flatMap(({ channel, changes }) => {
      const base = randomBytes(6).toString('base64url');
      return changes.map((change, i) => ({
        key: channelKey(appId, channel),
        build: (timestamp: number) =>
          encodeEvent({ type: 'presence.changed', appId, channel, event: { ...change, id: change.id ?? `${base}:${i}`, timestamp } }),
      }));
    });
    return records.length > 0 ? this.batcher.append(Topics.presence, records) : [];
  }
}
