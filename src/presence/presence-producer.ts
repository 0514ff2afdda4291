import { randomBytes } from 'node:crypto';
import type { AppendBatcher } from '../log/append-batcher.js';
import { Topics } from '../log/port.js';
import { channelKey, encodeEvent } from '../log/events.js';
import type { PresenceEvent } from './presence-event.js';

export type PresenceChange = Omit<PresenceEvent, 'id' | 'timestamp'> & { id?: string };

/**
 * Appends presence changes to the `presence` topic. The sandbox fixtures and the tests use it
 * today; the realtime gateway will append the same events.
 */
export class PresenceProducer {
  constructor(private readonly batcher: AppendBatcher) {}

  async append(appId: string, channel: string, changes: PresenceChange[]): Promise<void> {
    const base = randomBytes(6).toString('base64url');
    await this.batcher.append(
      Topics.presence,
      changes.map((change, i) => ({
        key: channelKey(appId, channel),
        build: (timestamp) =>
          encodeEvent({ type: 'presence.changed', appId, channel, event: { ...change, id: change.id ?? `${base}:${i}`, timestamp } }),
      })),
    );
  }
}
