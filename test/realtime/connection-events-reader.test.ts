// The connection events (src/realtime/connection-events.ts) read the `connections` topic through a
// feed they share with the channels and stats projections (projections/runner.ts: join). What they
// cannot apply must not hold that feed back, and while their own reader is stalled (the log
// unreachable, or a reader sharing the feed failing on a batch) they must not declare the other
// instances dead: those instances' members would be removed while they are alive.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { AppendBatcher } from '../../src/log/append-batcher.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { Topics, type ConsumeOptions } from '../../src/log/port.js';
import { MonotonicClock } from '../../src/clock.js';
import { ConnectionEvents } from '../../src/realtime/connection-events.js';
import { removeDir } from '../helpers/service.js';

const ALIVE_MS = 100;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const opened: { log: EmbeddedLog; events: ConnectionEvents; dir: string }[] = [];
afterEach(async () => {
  for (const { log, events, dir } of opened.splice(0)) {
    await events.close();
    await log.close();
    removeDir(dir);
  }
});

/** An instance's connection events on a fresh embedded log, as production mode runs them (alive every ALIVE_MS). */
function start(consume?: (log: EmbeddedLog) => (options: ConsumeOptions) => ReturnType<EmbeddedLog['consume']>) {
  const dir = mkdtempSync(join(tmpdir(), 'cm-connev-'));
  const log = new EmbeddedLog({ path: join(dir, 'log.db') });
  const batcher = new AppendBatcher(log, new MonotonicClock());
  const logged: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => void logged.push(line) });
  const events = new ConnectionEvents({
    log, batcher, clock: { now: () => Date.now() }, logger,
    instanceId: 'i-b', consumerName: 'connections-test',
    consume: consume?.(log),
    aliveIntervalMs: ALIVE_MS, soleInstance: false, attachmentEvents: { rate: 10, burst: 10 },
  });
  opened.push({ log, events, dir });
  /** Another instance saying it is alive (i-a: the smallest id, so i-b leads only once i-a is dead). */
  const otherAlive = (id = 'i-a') => batcher.append(Topics.connections, [{ key: id, build: () => encodeEvent({ type: 'instance.alive', instanceId: id }) }]);
  return { log, batcher, events, logged, otherAlive };
}

describe('connection events: their reader', () => {
  it('passes over a record it cannot apply (logged), and applies the ones after it', async () => {
    const { batcher, events, logged, otherAlive } = start();
    const dead: string[] = [];
    await events.start({ movedAway: () => {}, ended: () => {}, instanceDead: (id) => dead.push(id) }, []);
    await batcher.append(Topics.connections, [{ key: 'x', build: () => Uint8Array.from([0xc1, 0xff, 0x00]) }]);
    await otherAlive('i-c');
    for (let i = 0; i < 100 && !events.isAlive('i-c'); i++) await sleep(20);
    expect(events.isAlive('i-c')).toBe(true);
    expect(logged.some((l) => l.includes('could not be applied; passed over'))).toBe(true);
  });

  it('declares no instance dead while it reads nothing, though the other kept saying it is alive', async () => {
    let stalled = false;
    const { events, logged, otherAlive } = start((log) => (options) =>
      log.consume({
        ...options,
        // As when another reader of the shared feed fails on every batch: the feed retries and never gets here.
        handle: (records) => {
          if (stalled) throw new Error('another reader of the feed failed');
          return options.handle(records);
        },
      }),
    );
    const dead: string[] = [];
    await otherAlive();
    await events.start({ movedAway: () => {}, ended: () => {}, instanceDead: (id) => dead.push(id) }, ['i-a']);
    stalled = true;
    // i-a stays alive on the log, every interval, for well past the three intervals that make an instance dead.
    for (let i = 0; i < 8; i++) {
      await otherAlive();
      await sleep(ALIVE_MS);
    }
    expect(dead).toEqual([]);
    expect(logged.some((l) => l.includes('no instance is declared dead until it reads again'))).toBe(true);
    stalled = false;
    for (let i = 0; i < 100 && events.lag() > 0; i++) await sleep(20);
    await sleep(2 * ALIVE_MS);
    expect(events.isAlive('i-a')).toBe(true);
    expect(dead).toEqual([]);
  });
});
