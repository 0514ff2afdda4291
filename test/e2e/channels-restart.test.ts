// Channel lifecycle across a restart (issue 12): the channels projection is rebuilt from the log at
// every start, reads back the lifecycle events the log already holds, and announces only what is
// missing: no second channel.opened for a channel opened before the restart, and its
// channel.closed once it goes idle afterwards.
import { afterAll, expect, it } from 'vitest';
import { startTestService, removeDir, uniqueChannel, type TestService } from '../helpers/service.js';

let now = Date.UTC(2030, 0, 15, 10, 0, 0);
const clock = { now: () => now };
const IDLE_MS = 5_000;
let t: TestService | undefined;

afterAll(async () => {
  await t?.close();
  if (t) removeDir(t.dataDir);
});

const lifecycleOf = async (s: TestService, channel: string): Promise<{ id: string; name: string }[]> => {
  const res = await s.service.app.inject({ url: `/channels/${encodeURIComponent('[meta]channel.lifecycle')}/messages?direction=forwards`, headers: { authorization: s.auth } });
  expect(res.statusCode).toBe(200);
  return (res.json() as { id: string; name: string; data: string }[]).filter((m) => JSON.parse(m.data).channelId === channel).map((m) => ({ id: m.id, name: m.name }));
};
const until = async (s: TestService, channel: string, names: string[]): Promise<{ id: string; name: string }[]> => {
  let events = await lifecycleOf(s, channel);
  for (let i = 0; i < 300 && events.map((e) => e.name).join() !== names.join(); i++) {
    await new Promise((r) => setTimeout(r, 20));
    events = await lifecycleOf(s, channel);
  }
  expect(events.map((e) => e.name)).toEqual(names);
  return events;
};

it('a restart announces no lifecycle event twice, and the ones still due after it', async () => {
  t = await startTestService({ CHANNEL_IDLE_MS: String(IDLE_MS) }, { clock });
  const open = uniqueChannel('open-across');
  const closed = uniqueChannel('closed-before');
  for (const channel of [open, closed]) {
    const res = await t.service.app.inject({ method: 'POST', url: `/channels/${channel}/messages`, headers: { authorization: t.auth }, payload: { data: 'x' } });
    expect(res.statusCode).toBe(201);
  }
  await until(t, open, ['channel.opened', 'channel.region.active']);
  // `closed` closes before the restart; `open` is used again just before it, so stays open.
  now += IDLE_MS - 1_000;
  // A publish: a status request activates a channel in memory only, and a restart forgets it.
  await t.service.app.inject({ method: 'POST', url: `/channels/${open}/messages`, headers: { authorization: t.auth }, payload: { data: 'y' } });
  now += 1_000;
  const before = await until(t, closed, ['channel.opened', 'channel.region.active', 'channel.region.inactive', 'channel.closed']);

  t = await t.restart();
  // The frozen clock: appends made after a history query's fence are stamped just past it.
  now += 10;
  // Give the new start's announcer a few rounds: nothing new for either channel.
  await new Promise((r) => setTimeout(r, 600));
  expect(await lifecycleOf(t, closed)).toEqual(before);
  expect((await lifecycleOf(t, open)).map((e) => e.name)).toEqual(['channel.opened', 'channel.region.active']);
  expect(t.service.channels.isActive(t.service.registry.all()[0].appId, open, now)).toBe(true);

  now += IDLE_MS;
  const after = await until(t, open, ['channel.opened', 'channel.region.active', 'channel.region.inactive', 'channel.closed']);
  expect(new Set(after.map((e) => e.id)).size).toBe(4);
});
