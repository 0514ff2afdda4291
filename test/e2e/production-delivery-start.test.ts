// Production mode: a fresh instance listens before its Kafka consumers have joined their groups
// (the broker's initial rebalance delay, about 3 s). Caught up with what the log held at its start
// (nothing to read), delivery was deaf meanwhile: an ATTACH was answered ATTACHED at once and what
// was published after it reached the client only once the group had joined, some 3 s late, while
// GET /ready said 200. Now /ready fails (`consumers`: not reading the log yet) until they read, and
// an ATTACH is answered once delivery reads (bounded by READ_YOUR_WRITES_TIMEOUT_MS).
//
// The joins are seen where they happen: the kafkajs consumers of the instance's own Kafka client
// emit GROUP_JOIN, recorded here beside the service's answers, in the same event loop.
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Consumer, Kafka } from 'kafkajs';
import pino from 'pino';
import { expect, it } from 'vitest';
import { startService } from '../../src/service.js';
import { productionAdapters } from '../../src/production-adapters.js';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, productionConfig, productionTeardown } from '../helpers/production.js';
import { Actions, RawClient } from '../helpers/raw-realtime.js';
import { basic } from '../helpers/service.js';

const infra = await findProductionInfra();
const KEY = 'dsapp.k1:ds-secret-ds-secret';
const { opened, services, until } = productionTeardown();

describeWithInfra('production mode: a fresh instance and its delivery consumer', 'Kafka and ClickHouse', infra, (found) => {
  it('GET /ready is 200 and an ATTACH is answered only once the consumers reading the messages topic (the realtime delivery) have joined their group; a message published after ATTACHED arrives', { timeout: 60_000 }, async () => {
    const tag = randomBytes(4).toString('hex');
    const isolation = { topicPrefix: `ds-${tag}-`, tablePrefix: `ds_${tag}_` };
    const { config } = productionConfig(found, [{ appId: 'dsapp', keys: [{ key: KEY }] }], { INSTANCE_ID: `ds-${tag}` });
    const logger = pino({ level: 'silent' });
    const adapters = await productionAdapters(config, logger, isolation);

    // Every consumer group of the instance's Kafka client, and whether it has joined.
    const groups = new Map<string, boolean>();
    const kafka = (adapters.log as unknown as { kafka: Kafka }).kafka;
    const makeConsumer = kafka.consumer.bind(kafka);
    kafka.consumer = (options: Parameters<Kafka['consumer']>[0]): Consumer => {
      const consumer = makeConsumer(options);
      groups.set(options.groupId, groups.get(options.groupId) ?? false);
      consumer.on(consumer.events.GROUP_JOIN, () => groups.set(options.groupId, true));
      return consumer;
    };
    // The consumers the realtime delivery reads through: the projections' feed of the messages
    // topic it joins (projections/runner.ts), or a consumer of its own.
    const delivery = (): [string, boolean][] => [...groups].filter(([id]) => /^(messages-feed|delivery)-/.test(id));

    const service = await startService(config, logger, adapters);
    services.push(service);
    await service.app.listen({ port: 0, host: '127.0.0.1' });
    const port = (service.app.server.address() as AddressInfo).port;
    expect(delivery().length, JSON.stringify([...groups])).toBeGreaterThan(0);

    // Every answer of /ready until it is 200: a 200 only with delivery's group joined.
    const answers: { status: number; joined: boolean; body: string }[] = [];
    const polling = until('GET /ready answers 200', async () => {
      const res = await fetch(`http://127.0.0.1:${port}/ready`);
      const body = await res.text();
      answers.push({ status: res.status, joined: delivery().every(([, joined]) => joined), body });
      return res.status === 200;
    });

    const client = await RawClient.connect(port, { key: KEY });
    opened.push(client);
    const attached = client.attach('room');
    let joinedAtAttached: [string, boolean][] = [];
    void attached.then(() => (joinedAtAttached = delivery()));
    expect((await attached).action).toBe(Actions.ATTACHED);
    expect(joinedAtAttached.every(([, joined]) => joined), `delivery's consumer groups at ATTACHED: ${JSON.stringify(joinedAtAttached)}`).toBe(true);

    await polling;
    const early = answers.filter((a) => !a.joined);
    for (const a of answers) expect(a.status === 200 ? a.joined : true, `/ready answered 200 before delivery's group joined: ${a.body}`).toBe(true);
    for (const a of early) {
      // Not ready, in the spec's error format, naming what does not read yet.
      const body = JSON.parse(a.body);
      expect(a.status).toBe(503);
      expect(body.error.code).toBe(50005);
      expect(body.error.message).toMatch(/not reading the log yet/);
    }

    const res = await fetch(`http://127.0.0.1:${port}/channels/room/messages`, {
      method: 'POST',
      headers: { authorization: basic(KEY), 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'after-attached', data: 'hello' }),
    });
    expect(res.status).toBe(201);
    const message = await client.next((pm) => pm.action === Actions.MESSAGE && JSON.stringify(pm.messages).includes('after-attached'), 20_000);
    expect(message.channel).toBe('room');
  });

  it('a publish the SDK sends while its channel attaches (right after the ATTACH, on a fresh instance) reaches its own subscription: frames of a connection take effect in their order', { timeout: 60_000 }, async () => {
    // The SDK's browser build on long polling sent ATTACH then MESSAGE; the MESSAGE was appended
    // and acknowledged while the ATTACH waited for delivery, and ATTACHED came after it: the
    // subscriber never got its own messages (test/browser/ably-xhr-polling.test.ts in production mode).
    const tag = randomBytes(4).toString('hex');
    const { config } = productionConfig(found, [{ appId: 'dsapp', keys: [{ key: KEY }] }], { INSTANCE_ID: `ds-${tag}` });
    const service = await startService(config, pino({ level: 'silent' }), await productionAdapters(config, pino({ level: 'silent' }), { topicPrefix: `ds-${tag}-`, tablePrefix: `ds_${tag}_` }));
    services.push(service);
    await service.app.listen({ port: 0, host: '127.0.0.1' });
    const port = (service.app.server.address() as AddressInfo).port;
    const client = await RawClient.connect(port, { key: KEY });
    opened.push(client);
    client.send({ action: Actions.ATTACH, channel: 'early' });
    client.send({ action: Actions.MESSAGE, channel: 'early', msgSerial: 0, messages: [{ name: 'one', data: 'while attaching' }] });
    client.send({ action: Actions.MESSAGE, channel: 'early', msgSerial: 1, messages: [{ name: 'two', data: 'while attaching' }] });
    const delivered = (name: string) => client.next((pm) => pm.action === Actions.MESSAGE && pm.channel === 'early' && JSON.stringify(pm.messages).includes(`"${name}"`), 20_000);
    await delivered('one');
    await delivered('two');
    const order = client.frames.filter((f) => f.action === Actions.ATTACHED || f.action === Actions.MESSAGE || f.action === Actions.ACK).map((f) => f.action);
    // ATTACHED first, then the ACKs and the messages (in either order between them).
    expect(order[0]).toBe(Actions.ATTACHED);
  });
});
