// Production mode end to end for the comet transport: two service instances on one Kafka. An SDK
// client on comet (HTTP long polling) behind a balancer moves to the other instance when its
// requests start landing there: that instance holds no transport for its key, the SDK is told so
// in-band (DISCONNECTED 80017) and resumes there, keeping its id and getting what was published
// meanwhile, once; a WebSocket client then recovers the same connection on the first instance.
import { randomBytes } from 'node:crypto';
import { createServer, Socket, type AddressInfo, type Server } from 'node:net';
import { expect, it } from 'vitest';
import * as Ably from 'ably';
import type { Service } from '../../src/service.js';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, productionTeardown, startProductionInstance } from '../helpers/production.js';

const infra = await findProductionInfra();

const KEY = 'cometapp.k1:comet-secret-comet-secret';
const { opened, services, until } = productionTeardown();

/** A TCP forwarder whose target can change (new connections go to the new target; open ones stay). */
function balancer(): { server: Server; port: () => number; target: (port: number) => void } {
  let target = 0;
  const server = createServer((client) => {
    const upstream = new Socket();
    upstream.connect(target, '127.0.0.1');
    client.pipe(upstream).pipe(client);
    const end = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  return { server, port: () => (server.address() as AddressInfo).port, target: (port) => (target = port) };
}

describeWithInfra('production mode: the comet transport on two instances of one Kafka', 'Kafka and ClickHouse', infra, (found) => {
  it('a comet connection moves to the other instance with what it missed, once, and is recovered over a WebSocket on the first', async () => {
    const isolation = { topicPrefix: `cm-${randomBytes(4).toString('hex')}-`, tablePrefix: `cm_${randomBytes(4).toString('hex')}_` };
    const start = async (instanceId: string): Promise<{ service: Service; port: number }> => {
      const started = await startProductionInstance(found, { appId: 'cometapp', key: KEY, instanceId, isolation, env: { REALTIME_INSTANCE_ALIVE_MS: '500' } });
      services.push(started.service);
      return started;
    };
    const one = await start('comet-a');
    const two = await start('comet-b');
    const client = (port: number, clientId: string, more: Ably.ClientOptions = {}): Ably.Realtime => {
      const c = new Ably.Realtime({ key: KEY, clientId, endpoint: '127.0.0.1', port, tls: false, logLevel: 0, ...more });
      opened.push(c);
      return c;
    };

    const lb = balancer();
    await new Promise<void>((r) => lb.server.listen(0, '127.0.0.1', r));
    lb.target(one.port);
    // The SDK's comet agent keeps its connections alive: they stay on instance a until they close.
    const mover = client(lb.port(), 'comet-mover', { transports: ['comet'], disconnectedRetryTimeout: 200 });
    const got: unknown[] = [];
    await mover.channels.get('room').subscribe((m) => void got.push(m.data));
    const moverId = mover.connection.id;
    const publisher = client(two.port, 'pub');
    const publisherGot: unknown[] = [];
    await publisher.channels.get('room').subscribe((m) => void publisherGot.push(m.data));
    await publisher.channels.get('room').publish('m', 'before-move');
    await until('the message before the move', () => got.length === 1);
    expect(one.service.gateway.comet.size).toBe(1);

    // From now on the balancer sends new connections to instance b, and instance a's comet
    // transports go: the SDK's next recv on a is told so (80017), its transport and agent go,
    // and its resume lands on b.
    lb.target(two.port);
    await publisher.channels.get('room').publish('m', 'during-move');
    await until('instance b to deliver the message published during the move', () => publisherGot.includes('during-move'));
    one.service.gateway.comet.shutdown();
    await until('the mover to be connected on instance b', () => two.service.gateway.comet.size === 1 && mover.connection.state === 'connected', 20_000);
    await until('the message published during the move', () => got.length >= 2, 20_000);
    expect(mover.connection.id).toBe(moverId);
    await publisher.channels.get('room').publish('m', 'after-move');
    await until('the message after the move', () => got.length === 3);
    expect(got).toEqual(['before-move', 'during-move', 'after-move']);

    // A WebSocket client recovers the comet connection on instance a: the same connection, and
    // the comet transport on b is told it is gone.
    const recoveryKey = mover.connection.createRecoveryKey()!;
    lb.server.close();
    const recovered = client(one.port, 'comet-mover', { transports: ['web_socket'], recover: recoveryKey });
    await new Promise<void>((resolve) => recovered.connection.once('connected', () => resolve()));
    expect(recovered.connection.id).toBe(moverId);
    expect(recovered.connection.errorReason ?? null).toBeNull();
    const recoveredGot: unknown[] = [];
    await recovered.channels.get('room').subscribe((m) => void recoveredGot.push(m.data));
    await publisher.channels.get('room').publish('m', 'after-recover');
    await until('the message after the recover', () => recoveredGot.includes('after-recover'));
    await until('instance b to let go of the comet transport', () => two.service.gateway.comet.size === 0);
    mover.close();
  }, 90_000);
});
