// An AUTH that takes the presence_subscribe mode away (the new token lacks the channel's subscribe
// right) while a SYNC paced by the client's reading is still being sent: the SYNC stops, ended by
// an empty last page (the SDK's presence.get() would otherwise wait for ever, §5.5), and no presence
// message of another connection reaches the client after it (§7.3, §7.4: the modes the capability
// allows). Before, the SYNC went on to its last member. A comet client paces it exactly: what it has
// not taken counts as the socket's unwritten bytes, and nothing is taken until it polls.
import { describe, expect, it } from 'vitest';
import { CometClient } from '../helpers/comet.js';
import { Actions, type Pm } from '../helpers/raw-realtime.js';
import { uniqueChannel } from '../helpers/service.js';
import { rawRealtimeService } from '../helpers/raw-realtime-service.js';

// The smallest buffer the service takes: a SYNC page waits over a quarter of it (16 KiB), so a
// page of 100 members of 300 bytes waits for the client's poll.
const svc = rawRealtimeService({ REALTIME_MAX_BUFFERED_BYTES: String(64 * 1024) });
const MEMBERS = 250;

const members = (pms: Pm[]): number => pms.reduce((n, pm) => n + (pm.presence as unknown[]).length, 0);

describe('a paced presence SYNC when an AUTH takes presence_subscribe away', () => {
  it('stops, ended by an empty last page, and the presence of others reaches the client no more', async () => {
    const channel = uniqueChannel('narrowsync');
    const enterer = await svc.connect({ key: svc.ts.key });
    const entered = Array.from({ length: MEMBERS }, (_, i) => ({ action: 2, clientId: `member-${i}`, data: 'x'.repeat(200) }));
    expect((await enterer.presence(channel, entered)).action).toBe(Actions.ACK);

    const wide = await svc.token({ [channel]: ['subscribe', 'presence'] }, 'reader');
    const narrow = await svc.token({ [channel]: ['presence'] }, 'reader');
    const { client } = await CometClient.connect(svc.port, { access_token: wide });
    const reader = client!;
    await reader.send([{ action: Actions.ATTACH, channel }]);
    // ATTACHED and the first page; taking them lets the second go out, and the SYNC waits again.
    const before = await reader.recvUntil((pm) => pm.action === Actions.SYNC && pm.channel === channel);
    expect(before.find((pm) => pm.action === Actions.ATTACHED)?.flags).toBeTypeOf('number');
    await reader.send([{ action: Actions.AUTH, auth: { accessToken: narrow } }]);
    expect((await enterer.presence(channel, [{ action: 2, clientId: 'late', data: 'after the AUTH' }])).action).toBe(Actions.ACK);
    await reader.send([{ action: Actions.HEARTBEAT, id: 'done' }]);
    const after = await reader.recvUntil((pm) => pm.action === Actions.HEARTBEAT && pm.id === 'done');
    // The page taken with them lets the SYNC go on: to its end.
    const last = (pm: Pm): boolean => pm.action === Actions.SYNC && String(pm.channelSerial).endsWith(':');
    const end = after.some(last) ? [] : await reader.recvUntil(last);

    const all = [...before, ...after, ...end];
    const authAnswer = all.findIndex((pm) => pm.action === Actions.CONNECTED);
    expect(authAnswer).toBeGreaterThan(-1);
    const syncs = all.filter((pm) => pm.action === Actions.SYNC);
    // Ended: the last page's cursor is empty, and fewer than all the members were sent.
    expect(String(syncs[syncs.length - 1].channelSerial)).toMatch(/^[A-Za-z0-9_-]+:$/);
    expect(members(syncs)).toBeLessThan(MEMBERS);
    // After the AUTH's CONNECTED: no member in a SYNC page, no presence message.
    const later = all.slice(authAnswer + 1);
    expect(members(later.filter((pm) => pm.action === Actions.SYNC))).toBe(0);
    expect(later.filter((pm) => pm.action === Actions.PRESENCE)).toEqual([]);
    await reader.close();
  });
});
