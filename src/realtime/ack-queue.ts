import { Action, type ProtocolMessage, type WireError } from './protocol.js';

export type AckResult = { ok: true; serials: (string | null)[] } | { ok: false; error: WireError };

/** A publish or presence change waiting for its ACK or NACK. */
interface PendingAck {
  msgSerial: number;
  result?: AckResult;
}

/**
 * A connection's publishes and presence changes, answered in msgSerial order (REALTIME-PROTOCOL.md
 * §3.2) however their appends finish: each answer waits for those before it; consecutive ACKs go
 * as one. The queue outlives sockets: an answer due after a resume goes on the new one.
 */
export class AckQueue {
  private readonly pending: PendingAck[] = [];
  /** One past the highest msgSerial answered: a frame below it was sent again (a resume) and is answered alone. */
  private answeredUpTo = 0;

  constructor(private readonly send: (pm: ProtocolMessage) => void) {}

  /** Takes a frame's place in the order; the returned function settles it. */
  enqueue(msgSerial: number): (result: AckResult) => void {
    const entry: PendingAck = { msgSerial };
    this.pending.push(entry);
    return (result) => {
      entry.result = result;
      this.flush();
    };
  }

  /** Frames not answered yet. */
  get size(): number {
    return this.pending.length;
  }

  /** Sends every ACK and NACK now due, in order. */
  private flush(): void {
    const pending = this.pending;
    while (pending.length > 0 && pending[0].result) {
      const first = pending.shift()!;
      const result = first.result!;
      const again = first.msgSerial < this.answeredUpTo;
      this.answeredUpTo = Math.max(this.answeredUpTo, first.msgSerial + 1);
      if (!result.ok) {
        this.send({ action: Action.NACK, msgSerial: first.msgSerial, count: 1, error: result.error });
        continue;
      }
      const res = [{ serials: result.serials }];
      let next = first.msgSerial + 1;
      // A frame answered before (sent again after a resume while its first append was in flight)
      // is answered alone: ably-js completes an ACK's messages from the first it still waits for
      // and takes `res` from the ACK's start, so an ACK of 0 and 1 when only 1 waited gave 1 the
      // serials of 0 (the SDK's publish result).
      while (!again && pending.length > 0 && pending[0].result?.ok && pending[0].msgSerial === next) {
        const r = pending.shift()!.result as { ok: true; serials: (string | null)[] };
        res.push({ serials: r.serials });
        next++;
      }
      this.answeredUpTo = Math.max(this.answeredUpTo, next);
      this.send({ action: Action.ACK, msgSerial: first.msgSerial, count: res.length, res });
    }
  }
}
