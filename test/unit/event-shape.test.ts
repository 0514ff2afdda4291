// Which records a consumer is handed (README: Records that are not the service's): every event the
// service writes is one (a false refusal would lose it), and what another producer writes that a
// consumer would throw on is not. The whole path runs on Kafka in test/e2e/production-foreign-records.test.ts.
import { describe, expect, it } from 'vitest';
import { encodeEvent } from '../../src/log/event-codec.js';
import { packValue } from '../../src/codec/msgpack.js';
import { unreadable } from '../../src/log/event-shape.js';
import { UnreadableRecords } from '../../src/log/kafka/unreadable-records.js';
import type { LogEvent } from '../../src/domain/events.js';
import type { LogRecord } from '../../src/log/port.js';

const key = { keyName: 'a.k', keySecret: 's', capability: '{"*":["*"]}' };
const rule = { id: 'r1', ruleType: 'http', requestMode: 'single', source: { type: 'channel.message', channelFilter: '' }, target: { url: 'http://127.0.0.1:1/' } };
const serviceEvents: LogEvent[] = [
  { type: 'messages.published', appId: 'a', channel: 'c', transport: 'rest', messages: [{ id: 'x:0', timestamp: 1, name: 'n', data: 'd', extras: { headers: {} } }] },
  { type: 'messages.published', appId: 'a', channel: 'c', transport: 'realtime', clientIds: true, keyName: 'a.k', messages: [{ id: 'x:0', timestamp: 1, action: 2, data: new Uint8Array([1]) }] },
  { type: 'channel.used', appId: 'a', channel: 'c' },
  { type: 'presence.changed', appId: 'a', channel: 'c', event: { action: 'drop', id: 'p:0', timestamp: 1, connectionId: 'cn', instanceId: 'i' } },
  { type: 'app.created', app: { appId: 'a', accountId: 'acc', keys: [key], namespaces: [{ id: 'persisted', persisted: true }], source: 'sandbox' } as never },
  { type: 'app.created', app: { appId: 'a', accountId: 'acc', keys: [], namespaces: [], rules: [rule], source: 'sandbox' } as never },
  { type: 'app.deleted', appId: 'a' },
  { type: 'key.created', appId: 'a', key: key as never },
  { type: 'key.updated', appId: 'a', keyName: 'a.k', capability: '{}', modified: 1 },
  { type: 'key.revoked', appId: 'a', keyName: 'a.k', modified: 1 },
  { type: 'rule.created', appId: 'a', rule: rule as never },
  { type: 'rule.deleted', appId: 'a', ruleId: 'r1' },
  { type: 'tokens.revoked', appId: 'a', keyName: 'a.k', targets: ['clientId:x'], issuedBefore: 1, appliesAt: 1 },
  { type: 'usage.reported', appId: 'a', intervalStart: 0, instanceId: 'i', counters: { 'apiRequests.succeeded': 1 } },
  { type: 'stats.fixture', appId: 'a', intervalStart: 0, counters: {}, channels: 1 },
  { type: 'connection.opened', appId: 'a', connectionId: 'cn', instanceId: 'i', resumed: false },
  { type: 'connection.closed', appId: 'a', connectionId: 'cn', instanceId: 'i' },
  { type: 'instance.alive', instanceId: 'i' },
  { type: 'channel.attached', appId: 'a', channel: 'c', connectionId: 'cn', instanceId: 'i', modes: 1 },
  { type: 'channel.detached', appId: 'a', channel: 'c', connectionId: 'cn' },
  { type: 'channel.activated', appId: 'a', channel: 'c' },
  { type: 'instance.started', instanceId: 'i', endsAll: true },
  { type: 'instance.gone', instanceId: 'i' },
];

describe('the shape of the service\'s events', () => {
  it('every event type the service writes is handed on, read back from its bytes', () => {
    for (const event of serviceEvents) expect(unreadable(Buffer.from(encodeEvent(event))), event.type).toBeUndefined();
  });

  it.each([
    ['bytes that are not MessagePack', Buffer.from([0xc1, 0x00]), 'undecodable'],
    ['an empty value', Buffer.alloc(0), 'undecodable'],
    ['a value cut short', Buffer.from(encodeEvent(serviceEvents[0])).subarray(0, 20), 'undecodable'],
    ['a list', packValue([1, 2]), 'shape'],
    ['a map without a type', packValue({ appId: 'a' }), 'shape'],
    ['a type this version does not know', packValue({ type: 'messages.edited', appId: 'a' }), 'unknown-type'],
    ['"__proto__" as a type', packValue({ type: '__proto__', appId: 'a' }), 'unknown-type'],
    ['a publish whose messages are not a list', packValue({ type: 'messages.published', appId: 'a', channel: 'c', transport: 'rest', messages: {} }), 'shape'],
    ['a publish with a message without an id', packValue({ type: 'messages.published', appId: 'a', channel: 'c', transport: 'rest', messages: [{ timestamp: 1 }] }), 'shape'],
    ['a presence change without its event', packValue({ type: 'presence.changed', appId: 'a', channel: 'c' }), 'shape'],
    ['an app whose keys hold a null', packValue({ type: 'app.created', app: { appId: 'a', keys: [null], namespaces: [] } }), 'shape'],
    ['an app without namespaces', packValue({ type: 'app.created', app: { appId: 'a', keys: [] } }), 'shape'],
    ['usage whose counters are not numbers', packValue({ type: 'usage.reported', appId: 'a', intervalStart: 0, instanceId: 'i', counters: { x: 'y' } }), 'shape'],
    ['an app event whose appId is a number', packValue({ type: 'app.deleted', appId: 7 }), 'shape'],
  ])('%s is not', (_what, value, reason) => {
    expect(unreadable(value)?.reason).toBe(reason);
  });

  it('a record left out is told of once, however many consumers read it, and counted by topic and reason', () => {
    const lines: Record<string, unknown>[] = [];
    const logger = { debug: () => {}, info: () => {}, warn: () => {}, error: (o: object) => void lines.push(o as Record<string, unknown>) };
    const records = new UnreadableRecords(unreadable, logger, () => 0);
    const garbage: LogRecord = { topic: 'messages', partition: 1, offset: 7, key: 'a:c', timestamp: 1, value: Buffer.from([0xc1]) };
    const event: LogRecord = { ...garbage, offset: 8, value: encodeEvent(serviceEvents[0]) };
    const audit: LogRecord = { ...garbage, topic: 'audit', offset: 9 };
    for (let consumer = 0; consumer < 3; consumer++) {
      expect(records.admits('p-messages', garbage)).toBe(false);
      expect(records.admits('p-messages', event)).toBe(true);
      expect(records.admits('p-audit', audit)).toBe(true);
    }
    expect(lines).toEqual([expect.objectContaining({ topic: 'p-messages', partition: 1, offset: 7, reason: 'undecodable' })]);
    expect(records.skipped()).toEqual([{ topic: 'messages', reason: 'undecodable', count: 1 }]);
  });

  it('an event type of a newer version (a rolling upgrade) is told of once per type, at warn, saying what it means; every record is counted; garbage stays at error', () => {
    const lines: [string, Record<string, unknown>, string][] = [];
    const at = (level: string) => (o: object, msg?: string) => void lines.push([level, o as Record<string, unknown>, msg ?? '']);
    const logger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
    const records = new UnreadableRecords(unreadable, logger, () => 0);
    const newer = (offset: number, type: string): LogRecord => ({ topic: 'messages', partition: 0, offset, key: 'a:c', timestamp: 1, value: packValue({ type, appId: 'a', channel: 'c' }) });
    for (let offset = 0; offset < 100; offset++) {
      for (let consumer = 0; consumer < 3; consumer++) expect(records.admits('p-messages', newer(offset, offset % 2 ? 'messages.edited' : 'messages.deleted'))).toBe(false);
    }
    expect(records.admits('p-messages', { ...newer(100, 'x'), value: Buffer.from([0xc1]) })).toBe(false);
    expect(lines.map(([level, o]) => [level, o.type, o.offset, o.reason])).toEqual([
      ['warn', 'messages.deleted', 0, 'unknown-type'],
      ['warn', 'messages.edited', 1, 'unknown-type'],
      ['error', undefined, 100, 'undecodable'],
    ]);
    expect(lines[0][2]).toMatch(/newer version of the service \(expected during a rolling upgrade\)/);
    expect(records.skipped()).toEqual([
      { topic: 'messages', reason: 'unknown-type', count: 100 },
      { topic: 'messages', reason: 'undecodable', count: 1 },
    ]);
  });

  it('at most 60 lines a minute; every record is counted', () => {
    const lines: unknown[] = [];
    let now = 0;
    const logger = { debug: () => {}, info: () => {}, warn: () => {}, error: (o: object) => void lines.push(o) };
    const records = new UnreadableRecords(unreadable, logger, () => now);
    for (let offset = 0; offset < 100; offset++) records.admits('t', { topic: 'usage', partition: 0, offset, key: '', timestamp: 0, value: Buffer.alloc(0) });
    expect(lines).toHaveLength(60);
    now = 60_000;
    records.admits('t', { topic: 'usage', partition: 0, offset: 100, key: '', timestamp: 0, value: Buffer.alloc(0) });
    expect(lines.slice(60)).toEqual([{ unlogged: 40 }, expect.objectContaining({ offset: 100 })]);
    expect(records.skipped()).toEqual([{ topic: 'usage', reason: 'undecodable', count: 101 }]);
  });
});
