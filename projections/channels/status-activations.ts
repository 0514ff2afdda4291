/**
 * Channels a status request activated (spec: Channel status, "the channel becomes activated"),
 * held by the instance that answered it, for the idle time, and never written: a read must not
 * grow the disk (issue 22: each `GET /channels/<new name>` wrote a `channel.activated` record and
 * its four lifecycle messages, 1.5 to 2.2 KB). At most `max` channels, all apps together, and a
 * quarter of them for one app, so one app's requests cannot push out the others'; past either,
 * the oldest activation ends early.
 */
export class StatusActivations {
  /** appId -> channel -> request time, oldest first */
  private readonly byApp = new Map<string, Map<string, number>>();
  private count = 0;

  constructor(
    private readonly idleMs: number,
    private readonly max: number,
  ) {}

  /** Activates the channel at `at`; returns the channels whose activation ended to make room. */
  add(appId: string, channel: string, at: number): [string, string][] {
    let held = this.byApp.get(appId);
    if (!held) this.byApp.set(appId, (held = new Map()));
    if (held.delete(channel)) this.count--;
    held.set(channel, at);
    this.count++;
    const dropped: [string, string][] = [];
    const share = Math.max(1, Math.floor(this.max / 4));
    while (held.size > share) dropped.push(this.dropOldest(appId, held));
    while (this.count > this.max) {
      let largest: [string, Map<string, number>] | undefined;
      for (const entry of this.byApp) if (!largest || entry[1].size > largest[1].size) largest = entry;
      dropped.push(this.dropOldest(largest![0], largest![1]));
    }
    return dropped;
  }

  isActive(appId: string, channel: string, now: number): boolean {
    const at = this.byApp.get(appId)?.get(channel);
    return at !== undefined && now - at < this.idleMs;
  }

  /** Ends the activations whose idle time has run out; returns them. */
  expire(now: number): [string, string][] {
    const ended: [string, string][] = [];
    for (const [appId, held] of this.byApp) {
      // Oldest first: stop at the first still active (a clock step back only delays the rest).
      for (const [channel, at] of held) {
        if (now - at < this.idleMs) break;
        held.delete(channel);
        this.count--;
        ended.push([appId, channel]);
      }
      if (held.size === 0) this.byApp.delete(appId);
    }
    return ended;
  }

  get size(): number {
    return this.count;
  }

  private dropOldest(appId: string, held: Map<string, number>): [string, string] {
    const channel = held.keys().next().value as string;
    held.delete(channel);
    this.count--;
    if (held.size === 0) this.byApp.delete(appId);
    return [appId, channel];
  }
}
