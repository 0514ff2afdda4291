// An ATTACH waits for realtime delivery to read the log (src/realtime/delivery.ts, readyToAttach):
// on Kafka a start's consumer joins its group some 3 s after it is made, caught up with the log as
// of its start, and deaf to what is appended meanwhile. The wait ends when it reads, or gives up
// at READ_YOUR_WRITES_TIMEOUT_MS (the attach goes on, delivery late). The end-to-end case, on the
// local Kafka: test/e2e/production-delivery-start.test.ts. Here the subscription's `reading` is
// held by the test, on the embedded log.
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { Delivery } from '../../src/realtime/delivery.js';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { DEFAULT_LIMITS } from '../../src/limits.js';
import { DEFAULT_REALTIME_SETTINGS } from '../../src/realtime/settings.js';
import { systemClock } from '../../src/clock.js';
import type { ConsumeOptions } from '../../src/log/port.js';

const logs: EmbeddedLog[] = [];
afterEach(async () => {
  for (const log of logs.splice(0)) await log.close();
});

async function deliveryWithJoin(readYourWritesMs: number): Promise<{ delivery: Delivery; join: () => void }> {
  const log = new EmbeddedLog({ path: ':memory:' });
  logs.push(log);
  let join: () => void = () => {};
  const reading = new Promise<void>((resolve) => (join = resolve));
  const delivery = new Delivery({
    log,
    consumerName: 'delivery',
    // The embedded log's consumer, with a group join the test makes happen.
    consume: (options: ConsumeOptions) => ({ ...log.consume(options), reading }),
    clock: systemClock,
    limits: { ...DEFAULT_LIMITS, readYourWritesMs },
    settings: DEFAULT_REALTIME_SETTINGS,
    logger: pino({ level: 'silent' }),
  });
  await delivery.start();
  return { delivery, join };
}

describe('an attach and a delivery that does not read the log yet', () => {
  it('waits until delivery reads, then goes on (true); no wait once it reads', async () => {
    const { delivery, join } = await deliveryWithJoin(60_000);
    expect(delivery.reading).toBe(false);
    const waiting = delivery.readyToAttach('app', 'room', false);
    expect(waiting).toBeInstanceOf(Promise);
    let settled = false;
    void waiting!.then(() => (settled = true));
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    join();
    expect(await waiting).toBe(true);
    expect(delivery.reading).toBe(true);
    expect(delivery.readyToAttach('app', 'room', false)).toBeUndefined();
    await delivery.stop();
  });

  it('gives up at READ_YOUR_WRITES_TIMEOUT_MS (false): the attach goes on', async () => {
    const { delivery } = await deliveryWithJoin(50);
    expect(await delivery.readyToAttach('app', 'room', true)).toBe(false);
    await delivery.stop();
  });
});
