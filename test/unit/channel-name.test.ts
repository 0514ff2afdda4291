import { describe, expect, it } from 'vitest';
import { checkChannelName } from '../../src/channels/channel-name.js';
import { isMetachannel, namespaceOf } from '../../src/domain/channel.js';

describe('channel names', () => {
  it('accepts ordinary names, namespaces and metachannels', () => {
    for (const ok of ['a', 'news', 'persisted:presence_fixtures', '[meta]channel.lifecycle', 'with space', 'ü/slash', '[?rewind=1]news']) {
      expect(checkChannelName(ok)).toBe(ok);
    }
  });

  it('refuses empty names, control characters, leading colons and unknown qualifiers with 40010', () => {
    for (const bad of ['', 'a\nb', ':x', '[foo]bar', '[meta]', '[meta', 'x'.repeat(3000)]) {
      expect(() => checkChannelName(bad), JSON.stringify(bad.slice(0, 20))).toThrowError(expect.objectContaining({ code: 40010 }));
    }
  });

  it('refuses a [?params] qualifier before another qualifier, as the realtime interface does: "*" reached such a name and it was listed and announced like the metachannel', () => {
    for (const bad of ['[?x][meta]channel.lifecycle', '[?rewind=1][meta]log', '[?x][?y]room', '[?][meta]x']) {
      expect(() => checkChannelName(bad), bad).toThrowError(expect.objectContaining({ code: 40010 }));
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
