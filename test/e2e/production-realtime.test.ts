// Production mode end to end for the realtime interface (issue: Realtime): two service instances
// on one Kafka, each with its own gateway. Delivery is a consumer of the log, so a publish on one
// reaches a subscriber on the other; presence entered on one is visible on the other; a
// connection resumes on the other instance with what it missed, once; and when an instance dies,
// the other removes the members it held.
import { randomBytes } from 'node:crypto';
import { createServer, Socket, type AddressInfo, type Server } from 'node:net';
import { expect, it } from 'vitest';
import * as Ably from 'ably';
import type { Service } from '../../src/service.js';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, productionTeardown, startProductionInstance } from '../helpers/production.js';
import { RawClient } from '../helpers/raw-realtime.js';

const infra = await findProductionInfra();

const KEY = 'rtapp.k1:rt-secret-rt-secret';
const { opened, services, until } = productionTeardown();

/** A TCP forwarder whose target can change: the load balancer in front of the instances. */
function balancer(): { server: Server; port: () => number; target: (port: number) => void; cut: () => void } {
  let target = 0;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    // No target: the connection is refused (the client retries).
    if (target === 0) return void client.destroy();
    const upstream = new Socket();
    sockets.add(client).add(upstream);
    upstream.connect(target, '127.0.0.1');
    client.pipe(upstream).pipe(client);
    const end = (): void => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  return {
    server,
    port: () => (server.address() as AddressInfo).port,
    target: (port) => (target = port),
    cut: () => {
      for (const s of sockets) s.destroy();
    },
  };
}

describeWithInfra('production mode: the realtime gateway on two instances of one Kafka', 'Kafka and ClickHouse', infra, (found) => {
  it('delivers across instances, shares presence, resumes on the other instance, and removes the members of a dead one', async () => {
    const isolation = { topicPrefix: `rt-${randomBytes(4).toString('hex')}-`, tablePrefix: `rt_${randomBytes(4).toString('hex')}_` };
    const start = async (instanceId: string): Promise<{ service: Service; port: number }> => {
      const started = await startProductionInstance(found, { appId: 'rtapp', key: KEY, instanceId, isolation, env: { REALTIME_INSTANCE_ALIVE_MS: '500', REALTIME_PRESENCE_DROP_MS: '5000' } });
      services.push(started.service);
      return started;
    };
    const one = await start('instance-a');
    const two = await start('instance-b');
    const client = (port: number, clientId: string, more: Ably.ClientOptions = {}): Ably.Realtime => {
      const c = new Ably.Realtime({ key: KEY, clientId, endpoint: '127.0.0.1', port, tls: false, logLevel: 0, ...more });
      opened.push(c);
      return c;
    };

    // A publish on one instance reaches a subscriber on the other.
    const subscriber = client(one.port, 'sub');
    const publisher = client(two.port, 'pub');
    const received: unknown[] = [];
    await subscriber.channels.get('room').subscribe((m) => void received.push(m.data));
    await publisher.channels.get('room').publish('hello', 'from-b');
    await until('the message from the other instance', () => received.length === 1);
    expect(received).toEqual(['from-b']);

    // Presence entered on one is visible on the other.
    await publisher.channels.get('room').presence.enter('b-member');
    await until('the member on the other instance', async () => (await subscriber.channels.get('room').presence.get()).length === 1);
    expect((await subscriber.channels.get('room').presence.get()).map((m) => m.clientId)).toEqual(['pub']);

    // A connection behind a balancer moves to the other instance when its socket drops, and gets
    // what was published meanwhile, once.
    const lb = balancer();
    await new Promise<void>((r) => lb.server.listen(0, '127.0.0.1', r));
    lb.target(one.port);
    const mover = client(lb.port(), 'mover', { disconnectedRetryTimeout: 200 });
    const moverGot: unknown[] = [];
    await mover.channels.get('room').subscribe((m) => void moverGot.push(m.data));
    // A re-attach without RESUMED (continuity lost, 90003) is an `update` on an attached channel.
    const moverUpdates: unknown[] = [];
    mover.channels.get('room').on('update', (change) => void moverUpdates.push(change.reason?.code));
    await mover.channels.get('room').presence.enter('moving');
    const moverId = mover.connection.id;
    const publisherGot: unknown[] = [];
    await publisher.channels.get('room').subscribe((m) => void publisherGot.push(m.data));
    await publisher.channels.get('room').publish('m', 'before-move');
    await until('the message before the move', () => moverGot.length === 1);
    // While the mover has no socket, a message is published and instance b delivers it (to the
    // publisher): b is past it when the mover comes, so it must read the mover's backlog from Kafka.
    lb.target(0);
    lb.cut();
    await publisher.channels.get('room').publish('m', 'during-move');
    await until('instance b to deliver the message published during the move', () => publisherGot.includes('during-move'));
    lb.target(two.port);
    await until('the message published during the move', () => moverGot.length >= 2, 20_000);
    expect(mover.connection.id).toBe(moverId);
    await publisher.channels.get('room').publish('m', 'after-move');
    await until('the message after the move', () => moverGot.length === 3);
    expect(moverGot).toEqual(['before-move', 'during-move', 'after-move']);
    // The serial instance a issued resumed on b, within the window: RESUMED, no update.
    expect(moverUpdates).toEqual([]);
    lb.server.close();
    // Instance a learnt from the log that the connection lives on b now: its drop window passes
    // without the mover leaving.
    await new Promise((r) => setTimeout(r, 5500));
    const members = (await subscriber.channels.get('room').presence.get()).map((m) => m.clientId).sort();
    expect(members).toEqual(['mover', 'pub']);

    // The mover closes on b; instance a learns it from the log, and refuses to bring it back.
    const moverKey = mover.connection.key!;
    await new Promise<void>((resolve) => {
      mover.connection.once('closed', () => resolve());
      mover.close();
    });
    await until('instance a to learn from the log that the connection ended', () => one.service.gateway.hasEnded(moverId!));
    const late = await RawClient.connect(one.port, { key: KEY, resume: moverKey });
    late.ws.close();
    expect((late.frames[0].error as { code?: number } | undefined)?.code).toBe(80008);
    expect(late.frames[0].connectionId).not.toBe(moverId);

    // Instance b dies without a word (no DISCONNECTED reaches anyone, no leave is written): its
    // members are removed by instance a once b has been silent for three alive intervals.
    publisher.close();
    await new Promise((r) => setTimeout(r, 100));
    const other = client(two.port, 'b-only');
    await other.channels.get('lobby').presence.enter('stays-unless-removed');
    // Stop instance b's gateway from appending anything more, as a crash would.
    services.splice(services.indexOf(two.service), 1);
    await two.service.close();
    const restOnA = async (): Promise<number> =>
      ((await one.service.app.inject({ url: '/channels/lobby/presence', headers: { authorization: `Basic ${Buffer.from(KEY).toString('base64')}` } })).json() as unknown[]).length;
    await until('the dead instance member to leave', async () => (await restOnA()) === 0, 20_000);
  }, 90_000);
});
