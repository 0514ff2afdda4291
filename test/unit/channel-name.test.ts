import { describe, expect, it } from 'vitest';
import { checkChannelName } from '../../src/channels/channel-name.js';
import { restChannelName } from '../../src/channels/channel-qualifier.js';
import { isMetachannel, namespaceOf } from '../../src/domain/channel.js';

describe('channel names', () => {
  it('accepts ordinary names, namespaces and metachannels', () => {
    for (const ok of ['a', 'news', 'persisted:presence_fixtures', '[meta]channel.lifecycle', 'with space', 'ü/slash']) {
      expect(checkChannelName(ok)).toBe(ok);
    }
  });

  it('refuses empty names, control characters, leading colons and unknown qualifiers with 40010', () => {
    for (const bad of ['', 'a\nb', ':x', '[foo]bar', '[meta]', '[meta', 'x'.repeat(3000)]) {
      expect(() => checkChannelName(bad), JSON.stringify(bad.slice(0, 20))).toThrowError(expect.objectContaining({ code: 40010 }));
    }
  });

  it('a channel\'s own name holds no qualifier but [meta]: [?params] names a channel, it is none', () => {
    expect(() => checkChannelName('[?rewind=1]news')).toThrowError(expect.objectContaining({ code: 40010 }));
  });

  it('over REST, [?params]room is the channel room, as over realtime (the SDK\'s realtime channel of that name reads its history over REST with it); the params are dropped', () => {
    expect(restChannelName('[?rewind=1]news')).toBe('news');
    expect(restChannelName('[?rewind=1&occupancy=metrics]ns:x')).toBe('ns:x');
    expect(restChannelName('[?]news')).toBe('news');
    expect(restChannelName('news')).toBe('news');
    expect(restChannelName('[meta]channel.lifecycle')).toBe('[meta]channel.lifecycle');
  });

  it('over REST, a derived channel ([filter=...]room) is refused with 40010 naming the qualifier and the channel: it is served over realtime only', () => {
    expect(() => restChannelName(`[filter=${Buffer.from("name == 'a'").toString('base64')}]room`)).toThrowError(expect.objectContaining({ code: 40010, message: expect.stringMatching(/\[filter=\.\.\.\]room.*realtime only.*"room"/) }));
    for (const bad of ['[foo]room', '[?rewind=1]', '[?rewind=1room', `[?${Array.from({ length: 17 }, (_, i) => `p${i}=1`).join('&')}]room`]) {
      expect(() => restChannelName(bad), bad).toThrowError(expect.objectContaining({ code: 40010 }));
    }
  });

  it('refuses a [?params] qualifier before another qualifier, as the realtime interface does: "*" reached such a name and it was listed and announced like the metachannel', () => {
    for (const bad of ['[?x][meta]channel.lifecycle', '[?rewind=1][meta]log', '[?x][?y]room', '[?][meta]x']) {
      expect(() => restChannelName(bad), bad).toThrowError(expect.objectContaining({ code: 40010 }));
    }
    // A metachannel's own name may hold anything after `[meta]`.
    expect(checkChannelName('[meta][?x]odd')).toBe('[meta][?x]odd');
  });

  it('knows metachannels and namespaces', () => {
    expect(isMetachannel('[meta]log')).toBe(true);
    expect(isMetachannel('meta')).toBe(false);
    expect(namespaceOf('persisted:x:y')).toBe('persisted');
    expect(namespaceOf('plain')).toBeUndefined();
    expect(namespaceOf('[?rewind=1]ns:x')).toBe('ns');
  });
});
