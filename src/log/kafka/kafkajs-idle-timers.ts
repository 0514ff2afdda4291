// kafkajs 2.2.4 (its last release) keeps a timer loop running on every connection, idle or not: a
// request queue whose pending list is empty still schedules its next check, with a negative delay
// (its `throttledUntil` is -1), so each connection runs a check about every millisecond for as long as
// it is open (kafkajs issues #1556 and #1704; the fix of pull request #1667 was never released).
// With the twenty or so connections of a production instance (each consumer, producer and admin has
// its own) that is tens of thousands of timer callbacks a second competing with the requests for the
// main thread. A check of an empty queue does nothing but schedule the next one, so it is skipped
// here, as #1667 does: a request pushed while none can be sent schedules its own check, and a request
// answered checks the queue at once (kafkajs' own paths, unchanged).
import { createRequire } from 'node:module';

interface RequestQueue {
  pending: unknown[];
  throttledUntil: number;
  scheduleCheckPendingRequests(): void;
}

const require = createRequire(import.meta.url);
const QUIETED = Symbol.for('channel-messaging.kafkajs-idle-timers');

/**
 * Stops the idle request queues' timer loop (see above); once per process, whatever calls it. False
 * when kafkajs' request queue is not the one this was written for (another version): left alone.
 */
export function quietIdleRequestQueues(): boolean {
  const { prototype } = require('kafkajs/src/network/requestQueue/index.js') as { prototype: RequestQueue & { [QUIETED]?: true } };
  if (prototype[QUIETED]) return true;
  const schedule = prototype.scheduleCheckPendingRequests;
  if (typeof schedule !== 'function' || schedule.length !== 0) return false;
  prototype.scheduleCheckPendingRequests = function (this: RequestQueue): void {
    if (this.pending.length === 0 && !(this.throttledUntil > Date.now())) return;
    schedule.call(this);
  };
  prototype[QUIETED] = true;
  return true;
}
