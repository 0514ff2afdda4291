// The realtime door (issue 22) in production mode: the same rules on an instance whose log is
// Kafka and whose presence projection applies a change only once Kafka hands it back (so enters
// are in flight much longer than in the embedded mode, which is when racing enters passed the
// limits). Raw `ws` clients, as in test/realtime/limits.test.ts.
import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, productionTeardown, startProductionInstance } from '../helpers/production.js';
import { Actions, closedWithin, RawClient } from '../helpers/raw-realtime.js';

const infra = await findProductionInfra();
const KEY = 'doorapp.k1:door-secret-door-secret';
const { opened, services, until } = productionTeardown();

describeWithInfra('production mode: the realtime door', 'Kafka and ClickHouse', infra, (found) => {
  it('racing enters never pass REALTIME_MAX_PRESENCE_MEMBERS_PER_APP; a flood of frames is sent away (42911); a presence set larger than the socket may buffer is synced whole', async () => {
    const isolation = { topicPrefix: `door-${randomBytes(4).toString('hex')}-`, tablePrefix: `door_${randomBytes(4).toString('hex')}_` };
    const { service, port } = await startProductionInstance(found, {
      appId: 'doorapp',
      key: KEY,
      instanceId: 'door-a',
      isolation,
      env: { REALTIME_MAX_PRESENCE_MEMBERS_PER_APP: '3000', REALTIME_MAX_BUFFERED_BYTES: '65536', REALTIME_MAX_INBOUND_BYTES_RATE: String(1 << 30) },
    });
    services.push(service);
    const connect = async (): Promise<RawClient> => {
      const c = await RawClient.connect(port, { key: KEY });
      opened.push(c);
      return c;
    };

    // Racing enters: 10 connections, 40 frames of 10 members each, none waiting: 4,000 asked, 3,000 room.
    const channel = `crowd-${randomBytes(3).toString('hex')}`;
    const racers = await Promise.all(Array.from({ length: 10 }, () => connect()));
    const data = 'm'.repeat(200);
    const answers = racers.flatMap((c, r) => Array.from({ length: 40 }, (_, f) => c.presence(channel, Array.from({ length: 10 }, (_, i) => ({ action: 2, clientId: `r${r}-${f}-${i}`, data })))));
    const results = await Promise.all(answers);
    const acked = results.filter((a) => a.action === Actions.ACK).length;
    for (const r of results.filter((a) => a.action === Actions.NACK)) expect((r.error as { code: number }).code).toBe(91003);
    expect(acked * 10).toBe(3000);
    await until('3,000 members applied', () => service.presence.memberCount('doorapp') === 3000);

    // A reader attaching gets all of them, in SYNC pages paced by its socket (64 KiB may wait
    // in it; the set is some 700 KB).
    const reader = await connect();
    reader.send({ action: Actions.ATTACH, channel });
    await reader.next((pm) => pm.action === Actions.SYNC && String(pm.channelSerial).endsWith(':'), 30_000);
    const synced = reader.frames.filter((f) => f.action === Actions.SYNC).flatMap((f) => f.presence as { clientId: string }[]);
    expect(new Set(synced.map((m) => m.clientId)).size).toBe(3000);
    expect(reader.frames.some((f) => f.action === Actions.DISCONNECTED)).toBe(false);

    // A HEARTBEAT flood: sent away after the burst, the reader unaffected.
    const flooder = await connect();
    for (let i = 0; i < 5000 && !flooder.isClosed; i++) flooder.send({ action: Actions.HEARTBEAT, id: `f${i}` });
    const away = await flooder.next((pm) => pm.action === Actions.DISCONNECTED);
    expect(away.error).toMatchObject({ code: 42911, statusCode: 429 });
    await closedWithin(flooder, 5000);
    expect(flooder.frames.filter((f) => f.action === Actions.HEARTBEAT).length).toBeLessThanOrEqual(205);
    await reader.ping();
  });
});
