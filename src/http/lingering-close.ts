import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

/**
 * A lingering close, as HTTP servers do it (Apache's lingering close, nginx's `lingering_close`):
 * a request refused before its body was read (413, a refused body budget, bad credentials on a
 * large upload) is answered, and its connection closed, but not at once. Closing a socket with
 * bytes still arriving makes the kernel send a reset, which can discard the answer before the
 * client reads it: a client that writes its whole body before reading (Node's fetch, 9 times in 20
 * in the run) then sees "connection reset" instead of the 413, cannot tell a refusal from a
 * network fault, and may retry. So the answer is sent with `Connection: close`, the sending half is
 * closed after it (FIN), and what the client still sends is read and discarded until it closes its
 * side, or until `maxBytes` more have arrived or `maxMs` have passed (the bounds: a client cannot
 * make the service read for ever).
 */

export interface LingerLimits {
  maxBytes: number;
  maxMs: number;
}

/** Bodies of this size or more (or chunked) still arriving after an error answer get a lingering close; smaller ones Node reads and discards itself. */
const LINGER_FROM_BYTES = 64 * 1024;

/** Whether an error answer to this request should close its connection with a linger: its body has not all arrived. */
export function bodyStillArriving(req: IncomingMessage): boolean {
  if (req.complete) return false;
  const declared = req.headers['content-length'];
  if (declared !== undefined) return Number(declared) >= LINGER_FROM_BYTES;
  return req.headers['transfer-encoding'] !== undefined;
}

const lingering = new WeakSet<Socket>();

/**
 * Makes the close that Node's HTTP server does after a `Connection: close` answer (socket.destroySoon)
 * a lingering one. Call before the answer is sent.
 */
export function lingerOnClose(req: IncomingMessage, limits: LingerLimits): void {
  const socket = req.socket;
  if (lingering.has(socket) || socket.destroyed) return;
  lingering.add(socket);
  socket.destroySoon = function lingeringClose(this: Socket): void {
    const from = this.bytesRead;
    const close = (): void => {
      clearTimeout(deadline);
      clearInterval(meter);
      this.destroy();
    };
    const deadline = setTimeout(close, limits.maxMs);
    const meter = setInterval(() => {
      if (this.bytesRead - from > limits.maxBytes) close();
    }, 20);
    this.once('end', close); // the client has closed its side: nothing more to discard
    this.once('close', close);
    this.once('error', close);
    if (this.writable) this.end();
    // The body may have been left unread by a reader that stopped (an over-limit chunked body,
    // a refused budget): let it flow, so the bytes are taken off the wire and dropped.
    req.resume();
  };
}
