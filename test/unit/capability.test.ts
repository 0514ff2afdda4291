import { describe, expect, it } from 'vitest';
import { intersectCapabilities, parseCapability, permits, permitsAppWide, resourceCovers, resourceMatches, stringifyCapability } from '../../src/auth/capability.js';
import { ServiceError } from '../../src/errors.js';

describe('capabilities (spec: Authentication rules 5 and 6)', () => {
  it('"*" matches every regular channel but no metachannel', () => {
    expect(resourceMatches('*', 'news')).toBe(true);
    expect(resourceMatches('*', 'ns:news')).toBe(true);
    expect(resourceMatches('*', '[meta]channel.lifecycle')).toBe(false);
  });

  it('"[meta]*" matches every metachannel and "[*]*" matches everything', () => {
    expect(resourceMatches('[meta]*', '[meta]log')).toBe(true);
    expect(resourceMatches('[meta]*', 'news')).toBe(false);
    expect(resourceMatches('[*]*', '[meta]log')).toBe(true);
    expect(resourceMatches('[*]*', 'news')).toBe(true);
  });

  it('a metachannel is reached only by a resource that starts with [meta], or by [*]*: [*, [me* or [meta* (prefixes of "[meta]") reach none (the platform: "*" matches all normal channels but no metachannels; a metachannel resource starts with [meta])', () => {
    for (const resource of ['[*', '[*]', '[m*', '[me*', '[meta*', '[*]channel.lifecycle', '*']) {
      for (const channel of ['[meta]channel.lifecycle', '[meta]log', '[meta]log:push']) expect(resourceMatches(resource, channel), `${resource} ${channel}`).toBe(false);
    }
    for (const resource of ['[meta]*', '[*]*', '[meta]log:*']) expect(resourceMatches(resource, '[meta]log:push'), resource).toBe(true);
    expect(resourceMatches('[meta]channel.lifecycle', '[meta]channel.lifecycle')).toBe(true);
    expect(resourceMatches('[meta]*', 'log')).toBe(false);
  });

  it('a token\'s capability is covered by the key\'s under the same rule: only [meta] resources and [*]* cover what reaches metachannels', () => {
    expect(resourceCovers('[*]*', '[meta]*')).toBe(true);
    expect(resourceCovers('[meta]*', '[meta]log')).toBe(true);
    for (const outer of ['*', '[*', '[me*', '[meta*']) {
      expect(resourceCovers(outer, '[meta]*'), outer).toBe(false);
      expect(resourceCovers(outer, '[meta]log'), outer).toBe(false);
      expect(resourceCovers(outer, '[*]*'), outer).toBe(false);
    }
    expect(resourceCovers('[meta]*', '[*]*')).toBe(false);
    const key = parseCapability('{"[*":["*"],"*":["subscribe"]}');
    expect(intersectCapabilities(key, parseCapability('{"[meta]*":["subscribe"]}')).size).toBe(0);
    const all = intersectCapabilities(key, parseCapability('{"[*]*":["subscribe"]}'));
    expect(stringifyCapability(all)).toBe('{"*":["subscribe"],"[*":["subscribe"]}');
    expect(permits(all, '[meta]log', 'subscribe')).toBe(false);
    expect(permits(all, 'news', 'subscribe')).toBe(true);
  });

  it('"prefix:*" matches channels in that namespace only', () => {
    expect(resourceMatches('canpublish:*', 'canpublish:x')).toBe(true);
    expect(resourceMatches('canpublish:*', 'canpublishx')).toBe(false);
    expect(resourceMatches('canpublish:*', 'other:x')).toBe(false);
  });

  it('an exact resource matches only that channel', () => {
    expect(resourceMatches('channel0', 'channel0')).toBe(true);
    expect(resourceMatches('channel0', 'channel01')).toBe(false);
  });

  it('operations are checked per resource, "*" granting all', () => {
    const cap = parseCapability('{"channel0":["publish"],"channel6":["*"],"cansubscribe:*":["subscribe"]}');
    expect(permits(cap, 'channel0', 'publish')).toBe(true);
    expect(permits(cap, 'channel0', 'history')).toBe(false);
    expect(permits(cap, 'channel6', 'history')).toBe(true);
    expect(permits(cap, 'cansubscribe:a', 'publish')).toBe(false);
  });

  it('an app-wide operation (stats) needs it on a resource covering every channel: "*" or "[*]*"', () => {
    for (const granted of ['{"*":["stats"]}', '{"*":["*"]}', '{"[*]*":["*"]}', '{"[*]*":["stats"]}', '{"x":["publish"],"*":["stats"]}']) {
      expect(permitsAppWide(parseCapability(granted), 'stats'), granted).toBe(true);
    }
    for (const refused of ['{"x":["*"]}', '{"x":["stats"]}', '{"ns:*":["*"]}', '{"[meta]*":["*"]}', '{"*":["publish","subscribe"]}', '{"x*":["*"]}']) {
      expect(permitsAppWide(parseCapability(refused), 'stats'), refused).toBe(false);
    }
  });

  it('refuses malformed capabilities with a 400', () => {
    for (const bad of ['not json', '[]', '{}', '{"a":[]}', '{"a":["fly"]}', '{"a":"publish"}', '{"":["*"]}']) {
      expect(() => parseCapability(bad), bad).toThrow(ServiceError);
      try {
        parseCapability(bad);
      } catch (err) {
        expect((err as ServiceError).statusCode).toBe(400);
      }
    }
  });

  it('stringifies canonically (sorted), as the SDKs do', () => {
    expect(stringifyCapability(parseCapability({ b: ['subscribe', 'publish'], a: ['*'] }))).toBe('{"a":["*"],"b":["publish","subscribe"]}');
  });
});
