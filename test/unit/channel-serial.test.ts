import { describe, expect, it } from 'vitest';
import { channelSerial, parseChannelSerial } from '../../src/channels/channel-serial.js';

describe('channelSerial: one format for ATTACHED, MESSAGE and from_serial (partition:offset)', () => {
  it('reads back the position it wrote', () => {
    expect(channelSerial(3, 1024)).toBe('3:1024');
    expect(parseChannelSerial(channelSerial(3, 1024))).toEqual({ partition: 3, offset: 1024 });
    expect(parseChannelSerial(channelSerial(0, Number.MAX_SAFE_INTEGER))).toEqual({ partition: 0, offset: Number.MAX_SAFE_INTEGER });
  });

  it.each(['', '3', '3:', ':4', '-1:4', '3:-4', '3:4:5', '3.5:4', 'a:b', ' 3:4', `3:${'9'.repeat(20)}`, `${'9'.repeat(20)}:4`])('is not a position: %j', (serial) => {
    expect(parseChannelSerial(serial)).toBeUndefined();
  });
});
