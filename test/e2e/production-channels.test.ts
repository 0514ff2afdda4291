// Production mode end to end for channel status, enumeration and lifecycle events (issue 12): two
// instances on one Kafka and ClickHouse. Activity is a projection of the log, so an attachment on
// one shows in the occupancy the other reports (a status request activates the channel on the
// instance asked only: a read writes nothing, issue 22); and the lifecycle events are in the metachannel's history, and delivered to its
// realtime subscribers, once each (one instance announces them; the same cause gives the same id
// wherever it is derived, and the idempotent-publish rule drops a repeat).
import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import * as Ably from 'ably';
import type { Service } from '../../src/service.js';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, productionTeardown, startProductionInstance } from '../helpers/production.js';

const infra = await findProductionInfra();

const KEY = 'chapp.k1:ch-secret-ch-secret';
const IDLE_MS = 3_000;
const { opened, services, until } = productionTeardown();

describeWithInfra('production mode: channel status, enumeration and lifecycle on two instances', 'Kafka and ClickHouse', infra, (found) => {
  it('a status request activates the channel on the instance asked; occupancy and lifecycle events agree on both', async () => {
    const isolation = { topicPrefix: `ch-${randomBytes(4).toString('hex')}-`, tablePrefix: `ch_${randomBytes(4).toString('hex')}_` };
    const start = async (instanceId: string): Promise<{ service: Service; port: number }> => {
      const started = await startProductionInstance(found, { appId: 'chapp', key: KEY, capability: { '[*]*': ['*'] }, instanceId, isolation, env: { CHANNEL_IDLE_MS: String(IDLE_MS), CHANNEL_OCCUPANCY_THROTTLE_MS: '200', REALTIME_INSTANCE_ALIVE_MS: '1000' } });
      services.push(started.service);
      return started;
    };
    const one = await start('instance-a');
    const two = await start('instance-b');
    const rest = (port: number): Ably.Rest => new Ably.Rest({ key: KEY, restHost: '127.0.0.1', port, tls: false, logLevel: 0 });
    const name = `room-${randomBytes(4).toString('hex')}`;

    // A realtime subscriber of the metachannel on the instance that does not announce.
    const watcher = new Ably.Realtime({ key: KEY, endpoint: '127.0.0.1', port: two.port, tls: false, logLevel: 0 });
    opened.push(watcher);
    const delivered: string[] = [];
    await watcher.channels.get('[meta]channel.lifecycle').subscribe((m) => {
      if ((m.data as { channelId?: string }).channelId === name && m.name !== 'channel.occupancy') delivered.push(m.name!);
    });

    // spec: Channel status: the request activates the channel, on the instance asked, in memory.
    expect(await rest(one.port).channels.get(name).status()).toMatchObject({ channelId: name, status: { isActive: true } });
    expect((await rest(one.port).request('get', '/channels', 3, { by: 'id', prefix: 'room-' }, null)).items).toContain(name);
    expect((await rest(two.port).request('get', '/channels', 3, { by: 'id', prefix: 'room-' }, null)).items).not.toContain(name);

    // An attachment on one instance: the other's status shows it (spec: Occupancy).
    const client = new Ably.Realtime({ key: KEY, clientId: 'member', endpoint: '127.0.0.1', port: one.port, tls: false, logLevel: 0 });
    opened.push(client);
    await client.connection.whenState('connected');
    // The attach begins the one period of activity (the status request wrote nothing).
    await client.channels.get(name).attach();
    await client.channels.get(name).presence.enter();
    await until('the occupancy on the other instance', async () => {
      const details = await rest(two.port).channels.get(name).status();
      return details.status?.occupancy?.metrics?.connections === 1 && details.status.occupancy.metrics.presenceMembers === 1;
    });
    const listed = await rest(two.port).request('get', '/channels', 3, { prefix: name }, null);
    expect(listed.items[0]).toMatchObject({ channelId: name, status: { isActive: true, occupancy: { metrics: { connections: 1, publishers: 1, subscribers: 1, presenceConnections: 1, presenceSubscribers: 1, presenceMembers: 1 } } } });

    // The connection closes; the channel closes after the idle time, and each event of its one
    // period of activity is in the metachannel's history once, whichever instance appended it.
    client.close();
    const lifecycle = async (port: number): Promise<string[]> => {
      const page = await rest(port).channels.get('[meta]channel.lifecycle').history({ direction: 'forwards', limit: 1000 });
      const events = page.items.filter((m) => (m.data as { channelId?: string }).channelId === name && m.name !== 'channel.occupancy');
      return events.map((m) => m.name!);
    };
    const expected = ['channel.opened', 'channel.region.active', 'channel.region.inactive', 'channel.closed'];
    await until('the channel closed', async () => (await lifecycle(one.port)).includes('channel.closed'), 30_000);
    await until('the same events on the other instance', async () => (await lifecycle(two.port)).length === expected.length, 10_000);
    expect(await lifecycle(one.port)).toEqual(expected);
    expect(await lifecycle(two.port)).toEqual(expected);
    expect((await rest(two.port).request('get', '/channels', 3, { by: 'id', prefix: name }, null)).items).toEqual([]);
    // Delivered once each: one instance announces, the other reads its messages back.
    await new Promise((r) => setTimeout(r, 1_000));
    expect(delivered).toEqual(expected);
  }, 90_000);
});
