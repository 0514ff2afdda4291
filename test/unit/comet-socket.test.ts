// A comet transport seen as a socket (src/realtime/comet/comet-socket.ts): what waits for the
// client, as a Connection reads it (bufferedAmount) to cut off a client that does not read.
import { describe, expect, it } from 'vitest';
import { CometSocket, type Batch } from '../../src/realtime/comet/comet-socket.js';

const frame = (n: number): string => 'x'.repeat(n);

describe('CometSocket.bufferedAmount', () => {
  it('counts frames taken by a recv until the response holding them is written out, as a WebSocket counts unsent bytes', () => {
    const socket = new CometSocket(2);
    socket.send(frame(100));
    socket.send(frame(50));
    expect(socket.bufferedAmount).toBe(150);
    let answered: Batch | undefined;
    expect(socket.recv((batch) => (answered = batch))).toBe(true);
    expect(answered?.frames).toHaveLength(2);
    // Taken, not written: a client that never reads its answers, recv after recv, holds them here.
    socket.send(frame(30));
    let second: Batch | undefined;
    socket.recv((batch) => (second = batch));
    expect(socket.bufferedAmount).toBe(180);
    answered!.written();
    expect(socket.bufferedAmount).toBe(30);
    // Told twice (written, then its socket's close), counted back once.
    answered!.written(new Error('closed'));
    expect(socket.bufferedAmount).toBe(30);
    second!.written(new Error('comet response not written'));
    expect(socket.bufferedAmount).toBe(0);
  });

  it('counts nothing for frames dropped when it closes', () => {
    const socket = new CometSocket(2);
    const failed: (Error | undefined)[] = [];
    socket.send(frame(10), (err) => failed.push(err));
    socket.terminate();
    expect(failed).toEqual([expect.any(Error)]);
    expect(socket.bufferedAmount).toBe(0);
  });
});
