import { describe, expect, it } from 'vitest';
import { parsePublishBody } from '../../src/messages/message.js';
import { presenceFields } from '../../src/presence/presence-body.js';
import { parseAppSetup } from '../../src/routes/sandbox-apps.js';
import { DEFAULT_LIMITS } from '../../src/limits.js';

const limits = { maxMessageSize: 1024, maxMessagesPerPublish: 10, maxPublishBytes: 4096, maxDataDepth: 8 };
const nested = (depth: number): unknown => (depth === 0 ? 'leaf' : { d: nested(depth - 1) });
const anyone = (given: string | undefined): string => given ?? 'self';
const presence = (item: Record<string, unknown>) => presenceFields(item, limits, 'presence message 0', anyone);
const publish = (item: Record<string, unknown>) => parsePublishBody(item, limits, { method: 'basic' });
const code = (fn: () => unknown): number | undefined => {
  try {
    fn();
  } catch (err) {
    return (err as { code: number }).code;
  }
  return undefined;
};

// spec: PresenceMessage, encoding and extras "same as on Message": one set of rules, so a field a
// publish refuses a presence message refuses with the same code, and one a publish takes it takes.
const FIELDS: [string, Record<string, unknown>, number | undefined][] = [
  ['data as a JSON object', { data: { a: [1] } }, undefined],
  ['data as bytes', { data: new Uint8Array([1]) }, undefined],
  ['data as a number', { data: 42 }, 40013],
  ['data nested past the limit', { data: nested(9) }, 40013],
  ['a base64 encoding over data that is base64', { data: 'AAH/', encoding: 'base64' }, undefined],
  ['a base64 encoding over data that is not', { data: 'not base64!', encoding: 'base64' }, 40013],
  ['a json encoding over data that is not JSON', { data: '{bad', encoding: 'json' }, 40013],
  ['an encoding that is not a string', { data: 'x', encoding: 7 }, 40013],
  ['extras with a push object', { extras: { push: { notification: { title: 't' } } } }, undefined],
  ['extras with headers and a ref', { extras: { headers: { h: 'v', n: 2, b: true }, ref: { type: 'com.ably.reply', timeserial: 's' } } }, undefined],
  ['extras headers holding an object', { extras: { headers: { h: { o: 1 } } } }, 40032],
  ['extras ref without a timeserial', { extras: { ref: { type: 'com.ably.reply' } } }, 40032],
  ['extras holding a field the service does not know', { extras: { custom: 1 } }, 40032],
  ['extras that are an array', { extras: [1] }, 40032],
  ['an id of 256 characters', { id: 'i'.repeat(256) }, undefined],
  ['an id over 256 characters', { id: 'i'.repeat(257) }, 40031],
  ['an empty id', { id: '' }, 40031],
  ['clientId "*"', { clientId: '*' }, 40012],
  ['a numeric clientId', { clientId: 42 }, 40012],
  ['data over the message size', { data: 'x'.repeat(1025) }, 40009],
];

describe('presence body: the field rules of a message (spec: PresenceMessage)', () => {
  it.each(FIELDS)('%s: a presence message and a publish answer alike', (_name, item, expected) => {
    expect(code(() => presence(item))).toBe(expected);
    expect(code(() => publish(item))).toBe(expected);
  });

  it('keeps the fields given, leaves out the absent ones, and asks the caller whose the member is', () => {
    expect(presence({ data: 'd', encoding: 'utf-8', extras: { push: {} }, id: 'm:0' })).toEqual({ id: 'm:0', clientId: 'self', data: 'd', encoding: 'utf-8', extras: { push: {} } });
    expect(presence({ clientId: 'them' })).toEqual({ clientId: 'them' });
    const refuse = (): string => {
      throw new Error('not yours');
    };
    expect(() => presenceFields({ clientId: 'them' }, limits, 'presence message 0', refuse)).toThrow('not yours');
  });

  it('counts the clientId and extras in the member size, as a message does', () => {
    expect(code(() => presence({ clientId: 'c'.repeat(1025) }))).toBe(40009);
    expect(code(() => presence({ extras: { push: { t: 'x'.repeat(1020) } } }))).toBe(40009);
  });
});

describe('sandbox presence fixtures (POST /apps) take the same rules', () => {
  const fixture = (member: Record<string, unknown>) => () => parseAppSetup({ channels: [{ name: 'c', presence: [member] }] }, 0, DEFAULT_LIMITS);

  it('keeps a member with data, encoding and extras', () => {
    const { presence: fixtures } = fixture({ clientId: 'a', data: 'AAH/', encoding: 'base64', extras: { push: {} } })();
    expect(fixtures[0].members).toEqual([{ clientId: 'a', data: 'AAH/', encoding: 'base64', extras: { push: {} } }]);
  });

  it('refuses a member without a clientId (40001), or with a field a message may not have', () => {
    expect(code(fixture({ data: 'x' }))).toBe(40001);
    expect(code(fixture({ clientId: 'a', data: 42 }))).toBe(40013);
    expect(code(fixture({ clientId: 'a', data: 'x', encoding: 'json' }))).toBe(40013);
    expect(code(fixture({ clientId: 'a', extras: { headers: { h: [1] } } }))).toBe(40032);
  });
});
