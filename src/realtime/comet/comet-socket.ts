import { EventEmitter } from 'node:events';
import type { Frame } from '../protocol.js';
import type { TransportSocket } from '../transport.js';

/** What a recv (or the connect, the first recv) takes of the socket's queue, and whom to tell once it is written. */
export interface Batch {
  frames: Frame[];
  /** Called once the response holding the frames is written out (with an error when it failed). */
  written(err?: Error): void;
}

/** A recv waiting for frames: answered once, with a batch (possibly empty). */
export type Receiver = (batch: Batch) => void;

/** How long a closed socket keeps its last frames (a DISCONNECTED, an ERROR) for the client's next recv. */
const CLOSE_LINGER_MS = 10_000;

const OPEN = 1;
const CLOSING = 2;
const CLOSED = 3;

interface Queued {
  frame: Frame;
  written?: (err?: Error) => void;
}

/**
 * One comet transport (HTTP long polling, README: Comet fallback) seen as a socket: a Connection
 * sends on it as on a WebSocket (transport.ts). What it sends is queued until the client's next
 * recv takes it (a recv waiting is answered at once); bufferedAmount is what waits, so a client
 * that stops polling is cut off at maxBufferedBytes like a WebSocket client that stops reading.
 * `pause` holds the client's sends (the in-flight budget) as a paused WebSocket is not read.
 */
export class CometSocket extends EventEmitter implements TransportSocket {
  readonly OPEN = OPEN;
  private state = OPEN;
  private queue: Queued[] = [];
  private queuedBytes = 0;
  /** Bytes of batches taken by a response not written out yet (a client that does not read its answers). */
  private unwrittenBytes = 0;
  private readonly waiting: Receiver[] = [];
  private paused = false;
  private readonly unpaused: (() => void)[] = [];
  private flushing = false;
  private lingerTimer: NodeJS.Timeout | undefined;
  /** Whether the transport is open with no recv waiting (what `unpolled` was last told). */
  private unpolledNow = false;

  constructor(
    /** Recvs that may wait at once; a client's sends held while paused are bounded by it too. */
    private readonly maxPending: number,
    /** Told +1 when the transport comes to have no recv waiting (as it opens), -1 when one waits again or it closes. */
    private readonly unpolled?: (delta: 1 | -1) => void,
  ) {
    super();
    this.notePolling();
  }

  private notePolling(): void {
    const now = this.state !== CLOSED && this.waiting.length === 0;
    if (now === this.unpolledNow) return;
    this.unpolledNow = now;
    this.unpolled?.(now ? 1 : -1);
  }

  get readyState(): number {
    return this.state;
  }
  /** What waits for the client: queued, or in a response it is not reading (as a WebSocket's unsent bytes). */
  get bufferedAmount(): number {
    return this.queuedBytes + this.unwrittenBytes;
  }
  get isPaused(): boolean {
    return this.paused;
  }
  /** Whether the transport is gone for good (closed and its last frames taken or dropped). */
  get closed(): boolean {
    return this.state === CLOSED;
  }

  send(frame: Frame, written?: (err?: Error) => void): void {
    if (this.state !== OPEN) {
      written?.(new Error('comet transport closed'));
      return;
    }
    this.queue.push({ frame, written });
    this.queuedBytes += frame.length;
    this.scheduleFlush();
  }

  /**
   * A recv: answered now with what is queued, or once something is (frames sent in the same tick
   * go together). False when maxPending recvs wait already (the client is told, not queued).
   */
  recv(receiver: Receiver): boolean {
    if (this.state === CLOSED || (this.state !== OPEN && this.queue.length === 0)) {
      receiver(this.take());
      return true;
    }
    if (this.queue.length > 0 && this.waiting.length === 0) {
      receiver(this.drain());
      return true;
    }
    if (this.waiting.length >= this.maxPending) return false;
    this.waiting.push(receiver);
    this.notePolling();
    return true;
  }

  /** A waiting recv whose client went away: it takes nothing more. */
  cancel(receiver: Receiver): void {
    const i = this.waiting.indexOf(receiver);
    if (i >= 0) this.waiting.splice(i, 1);
    this.notePolling();
  }

  /** Everything queued, now (a close's answer, the connect's); a closing socket is then closed. */
  drain(): Batch {
    const batch = this.take();
    if (this.state === CLOSING) this.finish();
    return batch;
  }

  private take(): Batch {
    const taken = this.queue;
    const bytes = this.queuedBytes;
    this.queue = [];
    this.queuedBytes = 0;
    // Counted until the response holding them is written out: a client answered at once on each
    // recv that never reads the answers would otherwise have the server hold them all, unbounded.
    this.unwrittenBytes += bytes;
    let settled = false;
    return {
      frames: taken.map((q) => q.frame),
      written: (err) => {
        if (settled) return;
        settled = true;
        this.unwrittenBytes -= bytes;
        for (const q of taken) q.written?.(err);
      },
    };
  }

  /** Resolves when the client's sends may be read (at once unless paused); false when too many wait. */
  readable(): Promise<void> | boolean {
    if (!this.paused) return true;
    if (this.unpaused.length >= this.maxPending) return false;
    return new Promise((resolve) => this.unpaused.push(resolve));
  }

  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
    for (const go of this.unpaused.splice(0)) go();
  }

  /** The recv cycle is the client's liveness check (each request counts as heard): nothing to ping. */
  ping(): void {}

  /** Closes once the client took what is queued (a DISCONNECTED, an ERROR), or after a linger. */
  close(): void {
    if (this.state !== OPEN) return;
    this.state = CLOSING;
    if (this.queue.length === 0) return this.finish();
    this.lingerTimer = setTimeout(() => this.finish(), CLOSE_LINGER_MS);
    this.lingerTimer.unref();
    this.scheduleFlush();
  }

  /**
   * Gone now: a waiting recv gets what is queued (a WebSocket terminated has sent what it wrote);
   * what no recv takes is dropped. A close already under way keeps its last frames for the
   * client's next recv, as close() says: a connection that fails closes, then is terminated a
   * second later (connection-life.ts: hangUp), and its ERROR was dropped where the client's next
   * recv came later than that (it then read DISCONNECTED 80017, and resumed onto a new connection).
   */
  terminate(): void {
    if (this.state === CLOSED) return;
    if (this.state === CLOSING && this.queue.length > 0 && this.lingerTimer !== undefined) return;
    this.destroy();
  }

  /** Gone now, whatever it was closing with (the gateway's shutdown): a waiting recv gets what is queued, the rest is dropped. */
  destroy(): void {
    if (this.state === CLOSED) return;
    this.state = CLOSING;
    if (this.queue.length > 0) this.waiting.shift()?.(this.take());
    this.finish();
  }

  private scheduleFlush(): void {
    if (this.flushing || this.waiting.length === 0) return;
    this.flushing = true;
    setImmediate(() => {
      this.flushing = false;
      const receiver = this.queue.length > 0 ? this.waiting.shift() : undefined;
      this.notePolling();
      if (receiver) receiver(this.drain());
    });
  }

  private finish(): void {
    if (this.state === CLOSED) return;
    clearTimeout(this.lingerTimer);
    this.state = CLOSED;
    const dropped = this.take();
    dropped.written(new Error('comet transport closed'));
    for (const receiver of this.waiting.splice(0)) receiver({ frames: [], written: () => {} });
    this.notePolling();
    this.resume();
    this.emit('close');
  }
}
