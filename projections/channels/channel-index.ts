import { compareStrings, lowerBound } from '../sorted-strings.js';

/**
 * One app's channel names in order, for enumeration by name (GET /channels): a page is a binary
 * search and a scan, so paging 100,000 channels costs each page its own length, not the app's.
 * Names added since the last scan are merged in at the next one (one sort of the new names, one
 * merge), and removed names are dropped when they outnumber the rest, so a burst of new channels
 * costs no sort per channel. The plain shape it replaces: sorting every name on every request.
 * A name may have an alias (`aliasOf`: the cursor of a name too long for a Link header), found
 * again by a map read, not by computing every name's alias at each request.
 */
export class ChannelIndex {
  private sorted: string[] = [];
  /** alias -> name, for the names in `sorted` that have one */
  private readonly aliases = new Map<string, string>();
  private added: string[] = [];
  /** names in `sorted` or `added` that are live */
  private readonly live = new Set<string>();
  private removed = 0;

  constructor(private readonly aliasOf: (name: string) => string | undefined = () => undefined) {}

  add(name: string): void {
    if (this.live.has(name)) return;
    this.live.add(name);
    this.added.push(name);
    // Names that came and went with no scan since (status requests, channels gone idle, of an
    // app nobody lists) are let go, each once per scan otherwise kept: a name costs its bytes.
    if (this.added.length > 2 * this.live.size + 1024) this.added = [...new Set(this.added)].filter((n) => this.live.has(n));
  }

  /** Names the index keeps, live or not (tests). */
  get kept(): number {
    return this.sorted.length + this.added.length;
  }

  remove(name: string): void {
    if (this.live.delete(name)) this.removed++;
  }

  /**
   * Visits live names from the first one that starts with `prefix` and comes after `after`, in
   * order, while they start with `prefix` and `visit` returns true.
   */
  scan(prefix: string, after: string | undefined, visit: (name: string) => boolean): void {
    this.settle();
    const from = after !== undefined && after >= prefix ? after : prefix;
    let i = lowerBound(this.sorted, from);
    if (after !== undefined && this.sorted[i] === after) i++;
    for (; i < this.sorted.length; i++) {
      const name = this.sorted[i];
      if (!name.startsWith(prefix)) return;
      if (!this.live.has(name)) continue;
      if (!visit(name)) return;
    }
  }

  /** The name (live or not, while the index keeps it) whose alias this is. */
  named(alias: string): string | undefined {
    this.settle();
    return this.aliases.get(alias);
  }

  private settle(): void {
    if (this.removed > 0 && this.removed * 2 > this.sorted.length) {
      this.sorted = this.sorted.filter((n) => {
        if (this.live.has(n)) return true;
        const alias = this.aliasOf(n);
        if (alias !== undefined) this.aliases.delete(alias);
        return false;
      });
      this.removed = 0;
    }
    if (this.added.length === 0) return;
    // A name removed and added again may be in `sorted` already: keep one.
    const fresh = [...new Set(this.added)].filter((n) => this.live.has(n) && this.sorted[lowerBound(this.sorted, n)] !== n).sort(compareStrings);
    this.added.length = 0;
    if (fresh.length === 0) return;
    for (const n of fresh) {
      const alias = this.aliasOf(n);
      if (alias !== undefined) this.aliases.set(alias, n);
    }
    const merged: string[] = new Array(this.sorted.length + fresh.length);
    let a = 0;
    let b = 0;
    let k = 0;
    while (a < this.sorted.length && b < fresh.length) merged[k++] = compareStrings(this.sorted[a], fresh[b]) <= 0 ? this.sorted[a++] : fresh[b++];
    while (a < this.sorted.length) merged[k++] = this.sorted[a++];
    while (b < fresh.length) merged[k++] = fresh[b++];
    this.sorted = merged;
  }
}
