import { describe, expect, it } from 'vitest';
import { MAX_REWIND_COUNT, MAX_REWIND_MS, parseRewind } from '../../src/realtime/rewind.js';

const code = (value: unknown): number | undefined => {
  try {
    parseRewind(value);
  } catch (err) {
    return (err as { code: number }).code;
  }
  return undefined;
};

describe('the rewind channel param', () => {
  it('takes a count or a time in s, m or h', () => {
    expect(parseRewind('3')).toEqual({ count: 3 });
    expect(parseRewind(7)).toEqual({ count: 7 });
    expect(parseRewind('30s')).toEqual({ sinceMs: 30_000 });
    expect(parseRewind('2m')).toEqual({ sinceMs: 120_000 });
    expect(parseRewind(undefined)).toBeUndefined();
  });

  it('caps what asks past what a channel holds for rewind, rather than refusing it', () => {
    expect(parseRewind('101')).toEqual({ count: MAX_REWIND_COUNT });
    expect(parseRewind('999999999999999')).toEqual({ count: MAX_REWIND_COUNT });
    expect(parseRewind('10m')).toEqual({ sinceMs: MAX_REWIND_MS });
    expect(parseRewind('1h')).toEqual({ sinceMs: MAX_REWIND_MS });
  });

  it('refuses what is not a rewind with 40003', () => {
    for (const bad of ['0', '0s', '-1', '1d', 'soon', '1.5', '', ' 3', '9999999999999999', {}, true]) expect(code(bad), String(bad)).toBe(40003);
  });
});
