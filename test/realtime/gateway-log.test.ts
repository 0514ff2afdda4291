// The gateway as a consumer and producer of the log (ARCHITECTURE: The realtime gateway): what
// only the log can give, with the official SDK (npm `ably` v2) unmodified: publishes on behalf of
// a connection (spec: Message, connectionKey), resuming after the service restarted, and the
// presence members of connections lost in a restart leaving.
import { afterEach, describe, expect, it } from 'vitest';
import * as Ably from 'ably';
import { removeDir, startTestService, uniqueChannel, type TestService, listening } from '../helpers/service.js';
import { embeddedAdapters } from '../../src/service.js';
import { parseConfig } from '../../src/config.js';
import { Topics, type ConsumeOptions, type Log } from '../../src/log/port.js';
import { channelKey } from '../../src/log/partitioner.js';
import { decodeEvent, encodeEvent } from '../../src/log/event-codec.js';
import type { MessagesPublished } from '../../src/domain/events.js';
import { Actions, RawClient, type Format } from '../helpers/raw-realtime.js';

const opened: { close(): void }[] = [];
let ts: TestService | undefined;

afterEach(async () => {
  for (const c of opened.splice(0)) c.close();
  await ts?.close();
  if (ts) removeDir(ts.dataDir);
  ts = undefined;
});

/** A raw realtime client attached to `channel` (ATTACHED received). */
async function attachedClient(port: number, key: string, format: Format, channel: string): Promise<RawClient> {
  const client = await RawClient.connect(port, { key }, format);
  client.send({ action: Actions.ATTACH, channel, flags: 0 });
  await client.next((pm) => pm.action === Actions.ATTACHED);
  return client;
}

async function listen(t: TestService): Promise<number> {
  return listening(t);
}

function realtime(port: number, key: string, useBinaryProtocol: boolean, more: Ably.ClientOptions = {}): Ably.Realtime {
  const client = new Ably.Realtime({ key, endpoint: '127.0.0.1', port, tls: false, useBinaryProtocol, logLevel: 0, ...more });
  opened.push(client);
  return client;
}

const waitFor = async (check: () => boolean | Promise<boolean>, what: string, ms = 10_000): Promise<void> => {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

describe.each([
  ['JSON', false],
  ['MessagePack', true],
])('realtime gateway and the log, %s', (_name, binary) => {
  it('a REST publish with a connectionKey carries that connection\'s id and clientId (spec: Message)', async () => {
    ts = await startTestService();
    const port = await listen(ts);
    const client = realtime(port, ts.key, binary, { clientId: 'keyholder' });
    await client.connection.once('connected');
    const channel = uniqueChannel();
    const received: Ably.InboundMessage[] = [];
    await client.channels.get(channel).subscribe((m) => void received.push(m));
    const rest = new Ably.Rest({ key: ts.key, endpoint: '127.0.0.1', port, tls: false, useBinaryProtocol: binary, logLevel: 0 });
    await rest.request('post', `/channels/${channel}/messages`, 3, null, { name: 'via-rest', data: 'x', connectionKey: client.connection.key });
    await waitFor(() => received.length === 1, 'the message');
    expect(received[0].connectionId).toBe(client.connection.id);
    expect(received[0].clientId).toBe('keyholder');
    const bad = await rest.request('post', `/channels/${channel}/messages`, 3, null, { data: 'x', connectionKey: `${client.connection.id}!forged` });
    expect(bad.statusCode).toBe(400);
    expect(bad.errorCode).toBe(40030);
  });

  it('a connection resumes after the service restarts, with what was published meanwhile, and its members stay present throughout (no leave)', async () => {
    ts = await startTestService({ REALTIME_PRESENCE_DROP_MS: '60000' });
    const port = await listen(ts);
    const client = realtime(port, ts.key, binary, { clientId: 'survivor', disconnectedRetryTimeout: 200 });
    const channelName = uniqueChannel();
    const channel = client.channels.get(channelName);
    const got: unknown[] = [];
    await channel.subscribe((m) => void got.push(m.data));
    await channel.presence.enter('here');
    const id = client.connection.id;
    await channel.publish('m', 'before');
    await waitFor(() => got.length === 1, 'the first message');

    // The restart: the gateway says DISCONNECTED, the process goes, a new one starts on the same
    // DATA_DIR and port, and keeps the members the old one left for the resume window.
    const restarted = await ts.restart();
    ts = restarted;
    const members = await restarted.service.app.inject({ url: `/channels/${channelName}/presence`, headers: { authorization: restarted.auth } });
    expect(members.json().map((m: { clientId: string }) => m.clientId)).toEqual(['survivor']);
    const published = await restarted.service.app.inject({
      method: 'POST',
      url: `/channels/${channelName}/messages`,
      headers: { authorization: restarted.auth, 'content-type': 'application/json' },
      payload: { name: 'm', data: 'while-down' },
    });
    expect(published.statusCode).toBe(201);
    await restarted.service.app.listen({ port, host: '127.0.0.1' });
    const rest = new Ably.Rest({ key: ts.key, endpoint: '127.0.0.1', port, tls: false, useBinaryProtocol: binary, logLevel: 0 });

    await waitFor(() => got.length === 2, 'the message published while the service was down');
    expect(got).toEqual(['before', 'while-down']);
    expect(client.connection.id).toBe(id);
    // The SDK enters its members again on the re-attach (RTP17i), a refresh: still present, and
    // presence history has no leave.
    const present = (await rest.channels.get(channelName).presence.get()).items;
    expect(present.map((m) => [m.clientId, m.data, m.connectionId])).toEqual([['survivor', 'here', id]]);
    const events = (await rest.channels.get(channelName).presence.history()).items;
    expect(events.filter((m) => m.action === 'leave')).toEqual([]);
  });

  it('an attach whose channelSerial is ahead of this instance\'s delivery is RESUMED and gets no record twice (resume on a lagging instance); one past the log\'s end is no position', async () => {
    // The log as it is, but this instance's delivery holds its records until `release`: a
    // delivery consumer lagging behind the client's position.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const lagging = (log: Log): Log =>
      new Proxy(log, {
        get: (target, prop, receiver) =>
          prop === 'consume'
            ? (options: ConsumeOptions) =>
                target.consume(options.consumer === 'delivery' ? { ...options, handle: async (records) => gate.then(() => options.handle(records)) } : options)
            : Reflect.get(target, prop, receiver),
      });
    ts = await startTestService({}, { adapters: (dataDir) => {
      const adapters = embeddedAdapters(parseConfig({ DATA_DIR: dataDir, SANDBOX: '1', LOG_LEVEL: 'silent' }));
      return { ...adapters, log: lagging(adapters.log) };
    } });
    const port = await listen(ts);
    const format: Format = binary ? 'msgpack' : 'json';
    const channel = uniqueChannel();
    const publish = async (data: string): Promise<void> => {
      const res = await ts!.service.app.inject({ method: 'POST', url: `/channels/${channel}/messages`, headers: { authorization: ts!.auth, 'content-type': 'application/json' }, payload: { name: 'm', data } });
      expect(res.statusCode).toBe(201);
    };
    // Where the channel's partition stands: the serial of a plain attach.
    const probe = await RawClient.connect(port, { key: ts.key }, format);
    probe.send({ action: Actions.ATTACH, channel, flags: 0 });
    const serial = String((await probe.next((pm) => pm.action === Actions.ATTACHED)).channelSerial);
    const [partition, offset] = serial.split(':').map(Number);
    probe.ws.close();

    // A position past the log's end (a log made anew since) is not believed: no RESUMED.
    const stranger = await RawClient.connect(port, { key: ts.key }, format);
    stranger.send({ action: Actions.ATTACH, channel, flags: 0, channelSerial: `${partition}:${offset + 5}` });
    const fresh = await stranger.next((pm) => pm.action === Actions.ATTACHED);
    expect(Number(fresh.flags) & 4).toBe(0);
    expect(fresh.channelSerial).toBe(serial);
    stranger.ws.close();

    // Where a publish landed: the partition also takes the lifecycle metachannel's events, which
    // come a moment after an attach (on a loaded machine, between the channel's own records).
    const offsetOf = async (data: string): Promise<number> => {
      const records = await ts!.service.log.read(Topics.messages, partition, offset, 1000);
      const found = records.find((r) => {
        const event = decodeEvent(r.value);
        return event.type === 'messages.published' && event.channel === channel && event.messages.some((m) => m.data === data);
      });
      if (!found) throw new Error(`${data} is not in the log`);
      return found.offset;
    };

    // The record 'had-it-already' is in the log; this instance has not delivered it. A client
    // that came from an instance further on has had it (the offset after it is its position).
    await publish('had-it-already');
    const had = await offsetOf('had-it-already');
    const client = await RawClient.connect(port, { key: ts.key }, format);
    client.send({ action: Actions.ATTACH, channel, flags: 0, channelSerial: `${partition}:${had + 1}` });
    const attached = await client.next((pm) => pm.action === Actions.ATTACHED);
    expect(Number(attached.flags) & 4).toBe(4); // RESUMED: continuity kept
    expect(attached.channelSerial).toBe(`${partition}:${had + 1}`);
    release();
    await publish('new');
    const message = await client.next((pm) => pm.action === Actions.MESSAGE);
    expect((message.messages as { data: unknown }[]).map((m) => m.data)).toEqual(['new']);
    expect(message.channelSerial).toBe(`${partition}:${(await offsetOf('new')) + 1}`);
    expect(client.frames.filter((pm) => pm.action === Actions.MESSAGE)).toHaveLength(1);
    client.ws.close();
  });

  it('RTN15c7: a resume after connectionStateTtl, or after CLOSE, gets a new connection and error 80008; one within the window keeps its id', async () => {
    ts = await startTestService({ REALTIME_CONNECTION_STATE_TTL_MS: '1000', REALTIME_PRESENCE_DROP_MS: '1000' });
    const port = await listen(ts);
    const format: Format = binary ? 'msgpack' : 'json';
    const connect = async (resume?: string): Promise<{ client: RawClient; id: string; key: string; error?: { code?: number } }> => {
      const client = await RawClient.connect(port, { key: ts!.key, resume }, format);
      const connected = client.frames[0];
      const details = connected.connectionDetails as { connectionKey: string };
      return { client, id: String(connected.connectionId), key: details.connectionKey, error: connected.error as { code?: number } | undefined };
    };
    const first = await connect();
    first.client.ws.terminate();
    // Within the window: the same connection.
    const again = await connect(first.key);
    expect(again.id).toBe(first.id);
    expect(again.error).toBeUndefined();
    again.client.ws.terminate();
    // The window ends: a resume makes a new connection and says why.
    await new Promise((r) => setTimeout(r, 1_600));
    const late = await connect(first.key);
    expect(late.id).not.toBe(first.id);
    expect(late.error?.code).toBe(80008);
    // CLOSE ends it at once.
    late.client.send({ action: Actions.CLOSE });
    await late.client.next((pm) => pm.action === Actions.CLOSED);
    const afterClose = await connect(late.key);
    expect(afterClose.id).not.toBe(late.id);
    expect(afterClose.error?.code).toBe(80008);
    afterClose.client.ws.close();
  });

  it('idempotent publishing: repeats of a message id sent while the first is still being appended reach the log, and subscribers, once', async () => {
    ts = await startTestService();
    const port = await listen(ts);
    const format: Format = binary ? 'msgpack' : 'json';
    const channel = uniqueChannel();
    const subscriber = await attachedClient(port, ts.key, format, channel);
    const publish = (id: string, data: string): Promise<number> =>
      ts!.service.app
        .inject({ method: 'POST', url: `/channels/${channel}/messages`, headers: { authorization: ts!.auth, 'content-type': 'application/json' }, payload: { id, name: 'm', data } })
        .then((r) => r.statusCode);
    // Five at once: none has been appended when the others are checked.
    expect(await Promise.all([1, 2, 3, 4, 5].map((i) => publish('same-id', `copy-${i}`)))).toEqual([201, 201, 201, 201, 201]);
    expect(await publish('marker', 'end')).toBe(201);
    await subscriber.next((pm) => pm.action === Actions.MESSAGE && (pm.messages as { id: string }[]).some((m) => m.id === 'marker'));
    const ids = subscriber.frames.filter((pm) => pm.action === Actions.MESSAGE).flatMap((pm) => (pm.messages as { id: string }[]).map((m) => m.id));
    expect(ids).toEqual(['same-id', 'marker']);
    const history = (await ts.service.app.inject({ url: `/channels/${channel}/messages?direction=forwards`, headers: { authorization: ts.auth } })).json() as { id: string }[];
    expect(history.map((m) => m.id)).toEqual(['same-id', 'marker']);
    subscriber.ws.close();
  });

  it('a message id that reaches the log twice (two instances appending it, racing re-sends) is delivered once, as history keeps it once', async () => {
    ts = await startTestService();
    const port = await listen(ts);
    const format: Format = binary ? 'msgpack' : 'json';
    const channel = uniqueChannel();
    const subscriber = await attachedClient(port, ts.key, format, channel);
    const appId = ts.key.split('.')[0];
    // Appended as another instance would, past this one's publisher (which drops repeats it knows).
    const append = (id: string, data: string) => {
      const timestamp = Date.now();
      const event: MessagesPublished = { type: 'messages.published', appId, channel, transport: 'rest', clientIds: true, messages: [{ id, name: 'm', data, timestamp }] };
      return ts!.service.log.append(Topics.messages, [{ key: channelKey(appId, channel), value: encodeEvent(event), timestamp }]);
    };
    await append('twice', 'first');
    await append('twice', 'again');
    await append('marker', 'end');
    await subscriber.next((pm) => pm.action === Actions.MESSAGE && (pm.messages as { id: string }[]).some((m) => m.id === 'marker'));
    const got = subscriber.frames.filter((pm) => pm.action === Actions.MESSAGE).flatMap((pm) => (pm.messages as { id: string; data: string }[]).map((m) => `${m.id}=${m.data}`));
    expect(got).toEqual(['twice=first', 'marker=end']);
    subscriber.ws.close();
  });
});
