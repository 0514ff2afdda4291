// Sorted arrays of strings in code-unit order, the order of JavaScript's comparison operators (and
// of `startsWith` ranges): the channel index's names (channels/channel-index.ts) and the presence
// member keys (presence/sorted-member-keys.ts) are searched with these.

export const compareStrings = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** The first index whose string is not less than `key`. */
export function lowerBound(sorted: readonly string[], key: string): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid] < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The first index whose string is greater than `key`. */
export function upperBound(sorted: readonly string[], key: string): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid] <= key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
