// Issue 26, items 2 and 4, the pure parts: a channel name's qualifier ([?params], [filter=...]),
// the channel params an ATTACH may carry, and the subscription filter's expressions (JMESPath over
// name, clientId and extras.headers) with their limits.
import { describe, expect, it } from 'vitest';
import { qualifiedName } from '../../src/channels/channel-qualifier.js';
import { channelParamsOf } from '../../src/realtime/channel-params.js';
import { compileFilter, MAX_FILTER_CHARS, MAX_FILTER_WHOLE_VALUE_CALLS } from '../../src/realtime/message-filter.js';
import type { StoredMessage } from '../../src/domain/message.js';

const b64 = (s: string): string => Buffer.from(s).toString('base64');
const b64url = (s: string): string => Buffer.from(s).toString('base64url');
const msg = (fields: Partial<StoredMessage>): StoredMessage => ({ id: 'm', timestamp: 1, ...fields });
const codeOf = (f: () => unknown): number | undefined => {
  try {
    f();
  } catch (err) {
    return (err as { code?: number }).code;
  }
  return undefined;
};

describe('channel name qualifiers', () => {
  it('a plain name and a [meta] name refer to themselves', () => {
    expect(qualifiedName('room')).toEqual({ name: 'room', base: 'room', params: {} });
    expect(qualifiedName('[meta]channel.lifecycle').base).toBe('[meta]channel.lifecycle');
  });

  it('[?params]room refers to room with those params', () => {
    expect(qualifiedName('[?rewind=2&occupancy=metrics]room')).toEqual({ name: '[?rewind=2&occupancy=metrics]room', base: 'room', params: { rewind: '2', occupancy: 'metrics' } });
  });

  it('[filter=<base64>?params]room is a derived channel of room (the SDK\'s getDerived names)', () => {
    const filter = b64('name == `"a"`');
    expect(qualifiedName(`[filter=${filter}?rewind=1]room`)).toEqual({ name: `[filter=${filter}?rewind=1]room`, base: 'room', filter, params: { rewind: '1' } });
  });

  it('an unknown qualifier, an empty filter, a missing name or a nested qualifier is 40010', () => {
    for (const name of ['[foo]room', '[filter=]room', '[?rewind=1]', '[?a=1][?b=2]room', '[?rewind=1room']) expect(codeOf(() => qualifiedName(name)), name).toBe(40010);
  });
});

describe('channel params', () => {
  it('rewind and occupancy are served and granted as given; the name\'s params count, the frame\'s override', () => {
    const p = channelParamsOf({ rewind: '5' }, { rewind: '1', occupancy: 'metrics.subscribers' });
    expect(p.granted).toEqual({ rewind: '5', occupancy: 'metrics.subscribers' });
    expect(p.rewind).toEqual({ count: 5 });
    expect(p.occupancy).toEqual({ category: 'subscribers' });
    expect(channelParamsOf({ occupancy: 'metrics' }, {}).occupancy).toEqual({});
  });

  it('an unknown param and delta are 40002; a bad value is 40003', () => {
    expect(codeOf(() => channelParamsOf({ foo: 'bar' }, {}))).toBe(40002);
    expect(codeOf(() => channelParamsOf({ delta: 'vcdiff' }, {}))).toBe(40002);
    expect(codeOf(() => channelParamsOf({ occupancy: 'metrics.nothing' }, {}))).toBe(40003);
    expect(codeOf(() => channelParamsOf({ occupancy: 'everything' }, {}))).toBe(40003);
    expect(codeOf(() => channelParamsOf({ rewind: { n: 1 } }, {}))).toBe(40003);
    expect(codeOf(() => channelParamsOf(['rewind'], {}))).toBe(40003);
    expect(codeOf(() => channelParamsOf({ rewind: 'x'.repeat(300) }, {}))).toBe(40003);
  });

  it('more than 16 params is refused', () => {
    const many = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`p${i}`, '1']));
    expect(codeOf(() => channelParamsOf(many, {}))).toBe(40002);
  });
});

describe('subscription filter expressions (JMESPath)', () => {
  it('matches on name, clientId and extras.headers as the platform\'s examples do', () => {
    const f = compileFilter(b64('name == `"ice-cream"` && headers.flavor == `"strawberry"` && headers.cost < `50`'));
    expect(f.matches(msg({ name: 'ice-cream', extras: { headers: { flavor: 'strawberry', cost: 35 } } }))).toBe(true);
    expect(f.matches(msg({ name: 'ice-cream', extras: { headers: { flavor: 'strawberry', cost: 60 } } }))).toBe(false);
    expect(f.matches(msg({ name: 'ice-cream', extras: { headers: { flavor: 'vanilla', cost: 35 } } }))).toBe(false);
    expect(f.matches(msg({ name: 'ice-cream' }))).toBe(false);
    const g = compileFilter(b64url("clientId == 'bob' || starts_with(name, 'alert.')"));
    expect(g.matches(msg({ clientId: 'bob', name: 'x' }))).toBe(true);
    expect(g.matches(msg({ clientId: 'al', name: 'alert.fire' }))).toBe(true);
    expect(g.matches(msg({ clientId: 'al', name: 'chat' }))).toBe(false);
    expect(compileFilter(b64('!(headers.muted)')).matches(msg({ name: 'a', extras: { headers: { muted: false } } }))).toBe(true);
  });

  it('a comparison of the wrong types or a function given the wrong type does not match (never throws)', () => {
    const f = compileFilter(b64("starts_with(headers.n, 'a')"));
    expect(f.matches(msg({ extras: { headers: { n: 3 } } }))).toBe(false);
    expect(compileFilter(b64('headers.n > `3`')).matches(msg({ extras: { headers: { n: 'text' } } }))).toBe(false);
  });

  it('malformed, not base64, too long, too deep, a projection or a costly function is refused with 40010 and says why', () => {
    const refusal = (encoded: string): string => {
      try {
        compileFilter(encoded);
      } catch (err) {
        expect((err as { code?: number }).code).toBe(40010);
        return (err as Error).message;
      }
      throw new Error(`accepted ${encoded}`);
    };
    expect(refusal(b64('name =='))).toMatch(/not JMESPath/);
    expect(refusal('not base64!')).toMatch(/not base64/);
    expect(refusal(b64(`name == '${'x'.repeat(MAX_FILTER_CHARS)}'`))).toMatch(/longer than/);
    expect(refusal(b64(Array.from({ length: 20 }, (_, i) => `h${i}`).join('.')))).toMatch(/deeper than/);
    expect(refusal(b64('headers.*'))).toMatch(/filters do not serve/);
    expect(refusal(b64('pad_left(name, `1000000000`)'))).toMatch(/pad_left/);
    expect(refusal(b64('   '))).toMatch(/empty/);
    // "foo" is a field in JMESPath, not a string: refused rather than matching nothing in silence.
    expect(refusal(b64('name == "foo"'))).toMatch(/reads a field "foo"/);
  });

  it('an expression whose cost a client chooses is refused with 40010: a list of fields (to_string([headers, headers, ...]) walked a value of many messages: 330 ms a message of 64 KiB), more length() or to_string() calls than the bound', () => {
    const refused = (expression: string): string | undefined => {
      try {
        compileFilter(b64(expression));
      } catch (err) {
        expect((err as { code?: number }).code).toBe(40010);
        return (err as Error).message;
      }
      return undefined;
    };
    expect(refused(`length(to_string([${Array(100).fill('headers').join(',')}])) > \`0\``)).toMatch(/literals only/);
    expect(refused("[name, clientId][0] == 'a'")).toMatch(/literals only/);
    const calls = (n: number): string => Array.from({ length: n }, (_, i) => `length(name) == \`${i}\``).join(' || ');
    expect(refused(calls(MAX_FILTER_WHOLE_VALUE_CALLS + 1))).toMatch(/more than 4 times/);
    expect(refused(calls(MAX_FILTER_WHOLE_VALUE_CALLS))).toBeUndefined();
    // What stays: a list of literals, and length() counting code points as the library's does.
    expect(compileFilter(b64("contains(['a', 'b'], name)")).matches(msg({ name: 'b' }))).toBe(true);
    expect(compileFilter(b64('length(name) == `3`')).matches(msg({ name: 'a\u{1F600}\uD800' }))).toBe(true);
    expect(compileFilter(b64('length(headers) == `2`')).matches(msg({ extras: { headers: { a: 1, b: 2 } } }))).toBe(true);
  });
});
