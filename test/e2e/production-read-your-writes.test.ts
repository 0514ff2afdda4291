// Read your own writes in production mode (README: Consistency of reads): a read answered by an
// instance includes every write that instance acknowledged before the read arrived (stats too). Each test
// writes, then reads at once from the same instance, with no wait in between: before the reads
// waited for their projections, history was empty for some 100 ms after a publish on the local
// infrastructure, and presence.get() after enter() resolved with [].
import { randomBytes } from 'node:crypto';
import { beforeAll, expect, it } from 'vitest';
import * as Ably from 'ably';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, productionTeardown, startProductionInstance } from '../helpers/production.js';
import { allPages } from '../helpers/sdk.js';
import { basic } from '../helpers/service.js';

const infra = await findProductionInfra();

const KEY = 'rywapp.k1:ryw-secret-ryw-secret';
const { opened, services, until } = productionTeardown();
const ROUNDS = 10;

interface Member {
  clientId: string;
}

describeWithInfra('production mode: an instance reads its own writes', 'Kafka and ClickHouse', infra, (found) => {
  let port = 0;
  const tag = randomBytes(3).toString('hex');
  beforeAll(async () => {
    const isolation = { topicPrefix: `ryw-${tag}-`, tablePrefix: `ryw_${tag}_` };
    const started = await startProductionInstance(found, { appId: 'rywapp', key: KEY, instanceId: 'ryw-a', isolation, env: { SANDBOX: '1' } });
    services.push(started.service);
    port = started.port;
  });

  const rest = (key = KEY): Ably.Rest => new Ably.Rest({ key, endpoint: '127.0.0.1', port, tls: false, useBinaryProtocol: false, logLevel: 0 });
  const realtime = (clientId: string): Ably.Realtime => {
    const c = new Ably.Realtime({ key: KEY, clientId, endpoint: '127.0.0.1', port, tls: false, logLevel: 0 });
    opened.push(c);
    return c;
  };
  const get = async <T>(path: string, key = KEY): Promise<T> => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, { headers: { authorization: basic(key) } });
    expect(res.status, `GET ${path}`).toBe(200);
    return (await res.json()) as T;
  };
  const presenceMembersOf = async (channel: string, key = KEY): Promise<number> =>
    (await get<{ status: { occupancy: { metrics: { presenceMembers: number } } } }>(`/channels/${encodeURIComponent(channel)}`, key)).status.occupancy.metrics.presenceMembers;
  const batchPresence = async (channels: string[], key = KEY): Promise<Record<string, string[]>> => {
    const results = await get<{ channel: string; presence: Member[] }[]>(`/presence?channels=${channels.map(encodeURIComponent).join(',')}`, key);
    return Object.fromEntries(results.map((r) => [r.channel, r.presence.map((m) => m.clientId)]));
  };

  it('history: a message published through the SDK is in history() called as soon as publish() resolves, in memory and persisted', async () => {
    const client = rest();
    for (const channel of [`ryw-${tag}-history`, `persisted:ryw-${tag}-history`]) {
      const seen: string[] = [];
      for (let i = 0; i < ROUNDS; i++) {
        await client.channels.get(channel).publish(`m${i}`, String(i));
        const page = await client.channels.get(channel).history({ limit: 1 });
        seen.push(page.items[0]?.name ?? 'nothing');
      }
      expect(seen, channel).toEqual(Array.from({ length: ROUNDS }, (_, i) => `m${i}`));
    }
  });

  it('history: a message published over realtime is in REST history as soon as its ACK came', async () => {
    const client = realtime('rt-publisher');
    const channel = `ryw-${tag}-realtime-history`;
    const seen: unknown[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      await client.channels.get(channel).publish('rt', String(i));
      seen.push((await rest().channels.get(channel).history({ limit: 1 })).items[0]?.data);
    }
    expect(seen).toEqual(Array.from({ length: ROUNDS }, (_, i) => String(i)));
  });

  it('history: paging while publishes go on returns each message of the first page\'s range once', async () => {
    const client = rest();
    const channel = `ryw-${tag}-paging`;
    for (let i = 0; i < 30; i++) await client.channels.get(channel).publish('before', String(i));
    let page = await client.channels.get(channel).history({ limit: 7, direction: 'forwards' });
    const items = [...page.items];
    let during = 0;
    while (page.hasNext()) {
      await client.channels.get(channel).publish('during', String(during++));
      page = (await page.next())!;
      items.push(...page.items);
    }
    expect(items.map((m) => m.data)).toEqual(Array.from({ length: 30 }, (_, i) => String(i)));
    // ...and the next read from the start has those published meanwhile too.
    const { items: all } = await allPages(await client.channels.get(channel).history({ limit: 100, direction: 'forwards' }));
    expect(all.length).toBe(30 + during);
  });

  it('realtime presence: a member is in presence.get() as soon as enter() resolves', async () => {
    const client = realtime('rt-member');
    const seen: string[][] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const channel = client.channels.get(`ryw-${tag}-rt-presence-${i}`);
      await channel.presence.enter(`entered-${i}`);
      seen.push((await channel.presence.get()).map((m) => `${m.clientId}:${m.data as string}`));
    }
    expect(seen).toEqual(Array.from({ length: ROUNDS }, (_, i) => [`rt-member:entered-${i}`]));
  });

  it('REST presence, batch presence and channel status include a member as soon as its enter was ACKed, and leave it out once its leave was', async () => {
    const client = realtime('rest-reader-member');
    const reader = rest();
    for (let i = 0; i < ROUNDS / 2; i++) {
      const name = `ryw-${tag}-rest-presence-${i}`;
      const channel = client.channels.get(name);
      await channel.presence.enter();
      expect((await reader.channels.get(name).presence.get()).items.map((m) => m.clientId)).toEqual(['rest-reader-member']);
      expect(await batchPresence([name])).toEqual({ [name]: ['rest-reader-member'] });
      expect(await presenceMembersOf(name)).toBe(1);
      await channel.presence.leave();
      expect(await presenceMembersOf(name)).toBe(0);
      expect((await reader.channels.get(name).presence.get()).items).toEqual([]);
    }
  });

  it('sandbox presence fixtures are in REST presence, batch presence and channel status as soon as POST /apps answered', async () => {
    for (let i = 0; i < ROUNDS / 2; i++) {
      const channels = [`fixtures-${i}-a`, `fixtures-${i}-b`];
      const res = await fetch(`http://127.0.0.1:${port}/apps`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ channels: channels.map((name, j) => ({ name, presence: [{ clientId: `fixture-${j}` }, { clientId: `fixture-${j}-bis` }] })) }),
      });
      expect(res.status).toBe(201);
      const key = ((await res.json()) as { keys: { keyStr: string }[] }).keys[0].keyStr;
      expect((await rest(key).channels.get(channels[0]).presence.get()).items.map((m) => m.clientId).sort()).toEqual(['fixture-0', 'fixture-0-bis']);
      expect(await batchPresence(channels, key)).toEqual({ [channels[0]]: ['fixture-0', 'fixture-0-bis'], [channels[1]]: ['fixture-1', 'fixture-1-bis'] });
      expect(await presenceMembersOf(channels[1], key)).toBe(2);
    }
  });

  it('realtime attach: a message published before the ATTACH is before the attach position (history untilAttach has it; live delivery does not send it)', async () => {
    const publisher = rest();
    const client = realtime('attacher');
    const live: string[] = [];
    const untilAttach: string[][] = [];
    for (let i = 0; i < ROUNDS / 2; i++) {
      const name = `ryw-${tag}-attach-${i}`;
      await publisher.channels.get(name).publish('before', `before-${i}`);
      const channel = client.channels.get(name);
      await channel.subscribe((m) => void live.push(m.data as string));
      untilAttach.push((await channel.history({ untilAttach: true })).items.map((m) => m.data as string));
      await publisher.channels.get(name).publish('after', `after-${i}`);
    }
    expect(untilAttach).toEqual(Array.from({ length: ROUNDS / 2 }, (_, i) => [`before-${i}`]));
    await until('the messages published after the attaches', () => live.length >= ROUNDS / 2);
    expect(live.sort()).toEqual(Array.from({ length: ROUNDS / 2 }, (_, i) => `after-${i}`).sort());
  });

  it('stats: each message published is counted in the stats() called as soon as publish() resolves', async () => {
    const res = await fetch(`http://127.0.0.1:${port}/apps`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(res.status).toBe(201);
    const client = rest(((await res.json()) as { keys: { keyStr: string }[] }).keys[0].keyStr);
    const counted: number[] = [];
    for (let i = 0; i < ROUNDS / 2; i++) {
      await client.channels.get(`ryw-${tag}-stats`).publish('m', String(i));
      const { items } = await allPages(await client.stats({ unit: 'hour', limit: 10 }));
      counted.push(items.reduce((n, s) => n + ((s as unknown as { entries: Record<string, number> }).entries['messages.inbound.rest.messages.count'] ?? 0), 0));
    }
    expect(counted).toEqual(Array.from({ length: ROUNDS / 2 }, (_, i) => i + 1));
  });

  it('channel enumeration lists a channel as soon as a publish to it was answered', async () => {
    const client = rest();
    const listed: boolean[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const name = `ryw-${tag}-listed-${i}`;
      await client.channels.get(name).publish('m', String(i));
      listed.push((await get<string[]>(`/channels?by=id&prefix=${encodeURIComponent(name)}`)).includes(name));
    }
    expect(listed).toEqual(Array.from({ length: ROUNDS }, () => true));
  });
});
