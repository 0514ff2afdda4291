// SYNC pages (REALTIME-PROTOCOL.md §5.4) paced by the socket: a page waits while the socket holds
// more than a high-water mark unwritten. A SYNC so stalled held a copy of the channel's whole set
// (a client that does not read, attaching a channel of 20,000 members by 200 of its names, held
// 35 MB so, and 400 MB for a set of 250,000): it now reads the set as its pages go.
import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { PresenceSync } from '../../src/realtime/presence-sync.js';
import type { Attachment, Subscriber } from '../../src/realtime/attachment.js';
import { DEFAULT_REALTIME_SETTINGS } from '../../src/realtime/settings.js';
import { Action, type ProtocolMessage } from '../../src/realtime/protocol.js';
import type { PresenceMember } from '../../projections/presence/presence-projection.js';
import type { PresenceProducer } from '../../src/presence/presence-producer.js';

const member = (clientId: string): PresenceMember => ({ id: `conn-${clientId}:0:0`, clientId, connectionId: `conn-${clientId}`, timestamp: 1 });

/** A connection whose socket never writes out on its own: the test says when a page is written. */
function stalledConnection(): { conn: Subscriber; sent: ProtocolMessage[]; writeOut: () => void } {
  const sent: ProtocolMessage[] = [];
  const waiting: (() => void)[] = [];
  const conn: Subscriber = {
    id: 'reader',
    appId: 'app',
    format: 'json',
    echo: true,
    attachments: new Map(),
    socketEpoch: 1,
    bufferedAmount: 10 * 1024 * 1024,
    send(pm, written) {
      sent.push(pm);
      if (written) waiting.push(() => written());
      return true;
    },
    sendFrame: () => true,
    slowConsumer: () => undefined,
  };
  return { conn, sent, writeOut: () => waiting.splice(0).forEach((w) => w()) };
}

describe('presence SYNC pages', () => {
  it('a SYNC stalled on a socket that does not read holds no copy of the set: the pages after the stall are the set as it stands then', async () => {
    const set = new Map(['a', 'b', 'c', 'd', 'e'].map((id) => [id, member(id)]));
    // The projection's two reads of a channel's set: a copy, and the set itself.
    const presence = { present: () => [...set.values()], presentSet: () => set, query: () => ({ members: [] }), connectionsHeldBy: () => [] };
    const sync = new PresenceSync({
      presence,
      presenceProducer: {} as PresenceProducer,
      settings: { ...DEFAULT_REALTIME_SETTINGS, syncPageSize: 2 },
      instanceId: 'i',
      logger: pino({ level: 'silent' }),
    });
    const { conn, sent, writeOut } = stalledConnection();
    const attachment: Attachment = { conn, channel: 'room', base: 'room', recordKey: 'app:room', partition: 0, modes: 0xf0000, from: 0 };
    conn.attachments.set('room', attachment);
    sync.send(attachment, sync.members('app', 'room'));
    expect(sent).toHaveLength(1);
    // Meanwhile d leaves and f enters: their PRESENCE went out as they came.
    set.delete('d');
    set.set('f', member('f'));
    for (let i = 0; i < 5 && sent.length < 4; i++) {
      writeOut();
      await new Promise((resolve) => setImmediate(resolve));
    }
    const pages = sent.map((pm) => ({ cursor: String(pm.channelSerial).split(':')[1], clientIds: (pm.presence as { clientId: string }[]).map((p) => p.clientId) }));
    expect(sent.every((pm) => pm.action === Action.SYNC)).toBe(true);
    expect(pages).toEqual([
      { cursor: '1', clientIds: ['a', 'b'] },
      { cursor: '2', clientIds: ['c', 'e'] },
      { cursor: '', clientIds: ['f'] },
    ]);
  });

  it('a SYNC of an empty set is one page, the last', () => {
    const sync = new PresenceSync({
      presence: { presentSet: () => undefined, query: () => ({ members: [] }), connectionsHeldBy: () => [] },
      presenceProducer: {} as PresenceProducer,
      settings: DEFAULT_REALTIME_SETTINGS,
      instanceId: 'i',
      logger: pino({ level: 'silent' }),
    });
    const { conn, sent } = stalledConnection();
    const attachment: Attachment = { conn, channel: 'room', base: 'room', recordKey: 'app:room', partition: 0, modes: 0xf0000, from: 0 };
    conn.attachments.set('room', attachment);
    sync.resend(attachment);
    expect(sent.map((pm) => [String(pm.channelSerial).split(':')[1], pm.presence])).toEqual([['', []]]);
  });
});
