// REALTIME_MAX_CONNECTIONS within what the process can open (README: Resource limits and
// isolation): above the open-file limit, accept fails and the SDK sees a reset, not 42910.
import { describe, expect, it } from 'vitest';
import { openFileLimit, realtimeConnectionsFor } from '../../src/realtime/settings.js';

const limits = (soft: string): string =>
  `Limit                     Soft Limit           Hard Limit           Units     \nMax cpu time              unlimited            unlimited            seconds   \nMax open files            ${soft}                20000                files     \n`;

describe('the open-file limit caps realtime connections', () => {
  it('reads the soft limit of open files, and nothing where it cannot be read', () => {
    expect(openFileLimit(() => limits('20000'))).toBe(20_000);
    expect(openFileLimit(() => limits('unlimited'))).toBeUndefined();
    expect(openFileLimit(() => 'no such line')).toBeUndefined();
    expect(openFileLimit(() => {
      throw new Error('ENOENT');
    })).toBeUndefined();
  });

  it('leaves the configured limit when the files are there for it and the HTTP connections', () => {
    expect(realtimeConnectionsFor(20_000, 10_000, 1_048_576)).toBe(20_000);
    expect(realtimeConnectionsFor(20_000, 10_000, undefined)).toBe(20_000);
  });

  it('lowers it to the open files left after the HTTP connections and a reserve', () => {
    expect(realtimeConnectionsFor(20_000, 1_000, 20_000)).toBe(20_000 - 256 - 1_000);
    expect(realtimeConnectionsFor(20_000, 5_000, 20_000)).toBe(20_000 - 256 - 5_000);
  });

  it('keeps half of the usable files for realtime when MAX_CONNECTIONS alone would take them all', () => {
    expect(realtimeConnectionsFor(20_000, 10_000, 20_000)).toBe((20_000 - 256) / 2);
    expect(realtimeConnectionsFor(20_000, 10_000, 1_024)).toBe(384);
    expect(realtimeConnectionsFor(100, 10_000, 1_024)).toBe(100);
  });
});
