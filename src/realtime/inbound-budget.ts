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

  constructor(
    private readonly frameRate: number,
    private readonly byteRate: number,
    now: number,
  ) {
    this.frames = 2 * frameRate;
    this.bytes = 2 * byteRate;
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
