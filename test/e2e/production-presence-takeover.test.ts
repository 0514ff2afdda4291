// Production mode: a connection that resumes on another instance after the one holding it
// restarted keeps its presence members there (issue 26). The instance it resumed on takes them
// over: they stay through the restarted instance's resume window and through the other's cleanup
// after a silent instance, and they leave when the connection closes where it is now.
import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import * as Ably from 'ably';
import type { Service } from '../../src/service.js';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, productionTeardown, startProductionInstance } from '../helpers/production.js';
import { Actions, RawClient } from '../helpers/raw-realtime.js';

const infra = await findProductionInfra();

const KEY = 'ptapp.k1:pt-secret-pt-secret';
const { opened, services, until } = productionTeardown();

describeWithInfra('production mode: presence of a connection resumed on another instance after a restart', 'Kafka and ClickHouse', infra, (found) => {
  it('the members stay present through the restarted instance\'s resume window and leave when the connection closes on the instance it resumed on', async () => {
    const isolation = { topicPrefix: `pt-${randomBytes(4).toString('hex')}-`, tablePrefix: `pt_${randomBytes(4).toString('hex')}_` };
    const env = { REALTIME_INSTANCE_ALIVE_MS: '500', REALTIME_PRESENCE_DROP_MS: '2000' };
    const start = async (instanceId: string): Promise<{ service: Service; port: number }> => {
      const started = await startProductionInstance(found, { appId: 'ptapp', key: KEY, instanceId, isolation, env });
      services.push(started.service);
      return started;
    };
    const client = (port: number, clientId: string, more: Ably.ClientOptions = {}): Ably.Realtime => {
      const c = new Ably.Realtime({ key: KEY, clientId, endpoint: '127.0.0.1', port, tls: false, logLevel: 0, ...more });
      opened.push(c);
      return c;
    };
    const a = await start('instance-a');
    const b = await start('instance-b');
    const channel = `room-${randomBytes(3).toString('hex')}`;

    // A watcher on b sees every presence event of the channel.
    const watcher = client(b.port, 'watcher');
    const seen: { action: string; clientId: string }[] = [];
    await watcher.channels.get(channel).presence.subscribe((m) => void seen.push({ action: m.action!, clientId: m.clientId! }));

    // The mover, a protocol client that does not enter again after a resume (as the SDK does,
    // RTP17i), connects to a and enters.
    const moverOnA = await RawClient.connect(a.port, { key: KEY, clientId: 'mover' });
    const moverId = moverOnA.connectionId;
    const moverKey = String((moverOnA.frames[0].connectionDetails as { connectionKey: string }).connectionKey);
    await moverOnA.attach(channel);
    expect((await moverOnA.presence(channel, [{ action: 2, data: 'moving' }])).action).toBe(Actions.ACK);
    await until('the watcher to see the mover enter', () => seen.some((e) => e.clientId === 'mover'));

    // a shuts down (DISCONNECTED to its clients); the mover resumes on b, and attaches again
    // without entering.
    services.splice(services.indexOf(a.service), 1);
    await a.service.close();
    const mover = await RawClient.connect(b.port, { key: KEY, clientId: 'mover', resume: moverKey });
    opened.push(mover);
    expect(mover.connectionId).toBe(moverId);
    await mover.attach(channel);

    // a comes back: its previous run's members stay for its resume window (2 s from when it
    // listens), then those of connections not resumed there leave, but the mover's are held by b
    // now. Meanwhile b saw a silent for three alive intervals, and cleaned up after it.
    const a2 = await start('instance-a');
    const rest = new Ably.Rest({ key: KEY, endpoint: '127.0.0.1', port: a2.port, tls: false, logLevel: 0 });
    // Once a's window is over and its cleanup appended, a member entered on a after it: the
    // watcher sees the cleanup's leaves (on the channel's partition) before that enter.
    await a2.service.gateway.previousRunSettled;
    const later = client(a2.port, 'later');
    await later.channels.get(channel).presence.enter('after-the-window');
    await until('the watcher to see the later member enter', () => seen.some((e) => e.clientId === 'later'));
    expect(seen.filter((e) => e.clientId === 'mover').map((e) => e.action)).toEqual(['enter']);
    const members = (await rest.channels.get(channel).presence.get()).items.map((m) => [m.clientId, m.connectionId]).sort();
    expect(members).toEqual([['later', later.connection.id], ['mover', moverId]]);

    // The mover closes on b: b holds its members, so they leave.
    mover.send({ action: Actions.CLOSE });
    await mover.next((pm) => pm.action === Actions.CLOSED);
    await until('the mover to leave', () => seen.some((e) => e.clientId === 'mover' && e.action === 'leave'), 20_000);
    expect((await rest.channels.get(channel).presence.get()).items.map((m) => m.clientId)).toEqual(['later']);
  }, 120_000);
});
