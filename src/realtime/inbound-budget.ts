/**
 * What one connection may send (issue 22): token buckets over its frames and their bytes, each
 * filling at its rate and holding a burst of twice it. Every frame kind counts, before it is
 * decoded; a frame over the budget is not decoded at all, and the gateway disconnects the client
 * (it resumes, and the SDK sends its unacknowledged publishes again).
 */
export class InboundBudget {
  private frames: number;
  private bytes: number;
  private at: number;

  /**
   * `start`: the share of the burst it starts with (1: all of it; a connection from an origin
   * cut for flooding starts with less, flood-cooldown.ts), never less than one frame of
   * `minStartBytes` (the largest frame, which must fit in a burst).
   */
  constructor(
    private readonly frameRate: number,
    private readonly byteRate: number,
    now: number,
    start = 1,
    minStartBytes = 0,
  ) {
    this.frames = Math.max(1, start * 2 * frameRate);
    this.bytes = Math.min(2 * byteRate, Math.max(minStartBytes, start * 2 * byteRate));
    this.at = now;
  }

  /** Takes one frame of `size` bytes from the budget: false, and nothing taken, when it is over. */
  admit(size: number, now: number): boolean {
    const elapsed = Math.max(0, now - this.at) / 1000;
    this.at = now;
    this.frames = Math.min(2 * this.frameRate, this.frames + elapsed * this.frameRate);
    this.bytes = Math.min(2 * this.byteRate, this.bytes + elapsed * this.byteRate);
    if (this.frames < 1 || this.bytes < size) return false;
    this.frames -= 1;
    this.bytes -= size;
    return true;
  }
}
