import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { readPublished, summarizePublished, type PublishedSummary } from '../../src/log/published-summary.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import type { MessagesPublished } from '../../src/domain/events.js';
import { packValue } from '../../src/codec/msgpack.js';
import { dataSize, type StoredMessage } from '../../src/domain/message.js';

/** The bytes as they come back from a log: a copy, with no decoded event attached. */
const fromLog = (bytes: Uint8Array): Uint8Array => new Uint8Array(bytes);

const data = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.uint8Array({ maxLength: 300 }),
  fc.base64String(),
  fc.constant('x'.repeat(70_000)),
  fc.dictionary(fc.string(), fc.integer()),
);
const message = fc.record(
  {
    id: fc.string(),
    timestamp: fc.nat(),
    name: fc.string(),
    data,
    encoding: fc.constantFrom('base64', 'json', 'utf-8/base64', 'cipher+aes/base64', 'utf-8'),
    clientId: fc.string(),
    extras: fc.dictionary(fc.string(), fc.oneof(fc.string(), fc.double(), fc.boolean(), fc.constant(null), fc.array(fc.integer()))),
  },
  { requiredKeys: ['id', 'timestamp'] },
);

describe('summarizePublished (the stats rebuild reads publishes without decoding them)', () => {
  it('gives the same app, channel, transport, count and data size as decoding the event, or nothing (then the event is decoded)', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), fc.constantFrom('rest', 'realtime'), fc.array(message, { maxLength: 5 }), fc.boolean(), fc.boolean(), fc.option(fc.string(), { nil: undefined }), (appId, channel, transport, messages, generic, clientIds, keyName) => {
        const event: MessagesPublished = { type: 'messages.published', appId, channel, transport: transport as 'rest' | 'realtime', messages: messages as StoredMessage[] };
        // The optional fields after the messages: supplied ids, and the publishing key (audit).
        if (clientIds) event.clientIds = true;
        if (keyName !== undefined) event.keyName = keyName;
        // The service's own encoding, and the generic encoder's (another field order is possible there).
        const bytes = fromLog(generic ? packValue(event) : encodeEvent(event));
        const summary = summarizePublished(bytes);
        const jsonData = messages.some((m) => m.data !== undefined && typeof m.data === 'object' && !(m.data instanceof Uint8Array));
        if (summary === undefined) {
          // Only JSON data (counted by its JSON text), text with lone surrogates, or base64 text
          // that is not ASCII (not base64 at all) is left to the decoder.
          const decoded = (m: (typeof messages)[number]): boolean =>
            typeof m.data === 'string' && (/[\uD800-\uDFFF]/.test(m.data) || (/(^|\/)base64$/.test(m.encoding ?? '') && /[^\x00-\x7f]/.test(m.data)));
          expect(jsonData || messages.some(decoded)).toBe(true);
          return;
        }
        expect(jsonData).toBe(false);
        expect(summary).toEqual({
          appId,
          channel,
          transport,
          count: messages.length,
          data: messages.reduce((n, m) => n + dataSize(m.data as StoredMessage['data'], m.encoding), 0),
        });
      }),
      { numRuns: 500 },
    );
  });

  it('names read again are the same strings, whichever others were read between (app ids and channels are kept by their bytes, in a table of bounded size)', () => {
    const channels = Array.from({ length: 20_000 }, (_, i) => (i % 3 === 0 ? `ch-${i}` : i % 3 === 1 ? `kanał-${i}-ü` : `${'x'.repeat(i % 200)}${i}`));
    const summaryOf = (channel: string): string | undefined =>
      summarizePublished(fromLog(encodeEvent({ type: 'messages.published', appId: `app-${channel.length}`, channel, transport: 'rest', messages: [{ id: 'i', timestamp: 1 }] })))?.channel;
    // Twice over, in another order the second time: every slot of the table is reused many times.
    for (const channel of [...channels, ...channels.reverse()]) expect(summaryOf(channel)).toBe(channel);
  });

  it('other events, truncated bytes and garbage give nothing', () => {
    expect(summarizePublished(fromLog(encodeEvent({ type: 'app.deleted', appId: 'a' })))).toBeUndefined();
    expect(summarizePublished(fromLog(encodeEvent({ type: 'presence.changed', appId: 'a', channel: 'c', event: { action: 'enter', id: 'p', timestamp: 1, clientId: 'c', connectionId: 'k' } })))).toBeUndefined();
    const ok = fromLog(encodeEvent({ type: 'messages.published', appId: 'a', channel: 'c', transport: 'rest', messages: [{ id: 'm', timestamp: 1, data: 'hello' }] }));
    expect(summarizePublished(ok)).toEqual({ appId: 'a', channel: 'c', transport: 'rest', count: 1, data: 5 });
    for (let cut = 0; cut < ok.length; cut++) expect(summarizePublished(ok.subarray(0, cut))).toBeUndefined();
    fc.assert(fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => void summarizePublished(bytes)));
  });

  it('a buffer refilled in place and read again is read anew (nothing known of its old bytes is kept)', () => {
    const event = (data: string): Uint8Array =>
      fromLog(encodeEvent({ type: 'messages.published', appId: 'a', channel: 'c', transport: 'rest', messages: [{ id: 'm', timestamp: 1, data }] }));
    const buffer = event('\u4e00');
    expect(summarizePublished(buffer)?.data).toBe(3);
    // The same length of bytes, now with a lone surrogate (ED A0 80): left to the decoder.
    const surrogate = event('\ud800');
    expect(surrogate.length).toBe(buffer.length);
    buffer.set(surrogate);
    expect(summarizePublished(buffer)).toBeUndefined();
  });

  it('read in place (a rebuild visits the values inside a log segment): the same summary as the value alone, and nothing past its end read', () => {
    // Values packed one after another with bytes between them, 0xED among those bytes (the first
    // byte of a lone surrogate, which the reader looks for in text data).
    const between = fc.uint8Array({ maxLength: 8 }).map((b) => Uint8Array.from([0xed, 0xa0, ...b]));
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.string(), fc.array(message, { maxLength: 3 }), between), { minLength: 1, maxLength: 6 }), (events) => {
        const parts: Uint8Array[] = [];
        const spans: [number, number, Uint8Array][] = [];
        let at = 0;
        for (const [channel, messages, gap] of events) {
          const value = encodeEvent({ type: 'messages.published', appId: 'app', channel, transport: 'realtime', messages: messages as StoredMessage[] });
          parts.push(gap, value);
          spans.push([at + gap.length, at + gap.length + value.length, value]);
          at += gap.length + value.length;
        }
        const buffer = Buffer.concat(parts);
        for (const [start, end, value] of spans) {
          const into: PublishedSummary = { appId: '', channel: '', transport: '', count: 0, data: 0 };
          const alone = summarizePublished(fromLog(value));
          expect(readPublished(buffer, start, end, into)).toBe(alone !== undefined);
          if (alone) expect(into).toEqual(alone);
          // Cut short inside the buffer: the bytes after the cut are there, but not the value's.
          expect(readPublished(buffer, start, end - 1, into)).toBe(false);
        }
      }),
      { numRuns: 300 },
    );
  });
});
