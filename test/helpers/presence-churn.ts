/**
 * A presence churn on a real log, shared by the presence projection tests: members enter (with data),
 * update, leave (most without data: the row carries the last) and connections drop, over `channels`
 * channels `persisted:room-<n>`, one event every `stepMs` from `start`.
 */
import type { PresenceChanged } from '../../src/domain/events.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { channelKey } from '../../src/log/partitioner.js';
import { Topics, type Log } from '../../src/log/port.js';
import type { SqliteHistoryStore } from '../../projections/history/sqlite-history-store.js';

export interface Churn { events: number; channels: number; start: number; stepMs: number }

export const churnChannel = (c: number): string => `persisted:room-${c}`;

export async function appendPresenceChurn(log: Pick<Log, 'append'>, { events, channels, start, stepMs }: Churn): Promise<void> {
  for (let i = 0; i < events; i++) {
    const channel = churnChannel(i % channels);
    const r = (i * 7919) % 100;
    const clientId = `client-${(i * 31) % 9}`;
    const connectionId = `conn-${(i * 13) % 5}`;
    const action = r < 45 ? 'enter' : r < 60 ? 'update' : r < 95 ? 'leave' : 'drop';
    const timestamp = start + i * stepMs;
    const event: PresenceChanged['event'] = action === 'drop'
      ? { action, id: `e${i}`, timestamp, connectionId }
      : { action, id: `e${i}`, timestamp, clientId, connectionId, ...(action === 'leave' && r < 90 ? {} : { data: `data ${i}` }) };
    await log.append(Topics.presence, [{ key: channelKey('app', channel), timestamp, value: encodeEvent({ type: 'presence.changed', appId: 'app', channel, event }) }]);
  }
}

/** Every presence-history row a store holds for the churn's channels, channel by channel, oldest first. */
export async function churnRows(store: SqliteHistoryStore, channels: number): Promise<unknown[]> {
  const out: unknown[] = [];
  for (let c = 0; c < channels; c++) {
    const entries = await store.query({ appId: 'app', channel: churnChannel(c), start: 0, end: Number.MAX_SAFE_INTEGER, limit: 10_000, direction: 'forwards' });
    out.push(...entries.map((e) => e.message));
  }
  return out;
}
