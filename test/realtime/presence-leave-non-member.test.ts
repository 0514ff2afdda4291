// A LEAVE from a client that is not a member (REALTIME-PROTOCOL.md §5.2: "LEAVE for an absent
// member has no effect"): acknowledged, and nothing more. Before, the presence projection made a
// leave message of it all the same: subscribers got it, and presence history stored it.
import { describe, expect, it } from 'vitest';
import { Actions, type Pm } from '../helpers/raw-realtime.js';
import { uniqueChannel } from '../helpers/service.js';
import { rawRealtimeService } from '../helpers/raw-realtime-service.js';

const svc = rawRealtimeService();

const actionsIn = (pms: Pm[]): [number, string][] => pms.flatMap((pm) => (pm.presence as { action: number; clientId: string }[]).map((p): [number, string] => [p.action, p.clientId]));

describe('a presence LEAVE from a client that is not a member', () => {
  it('is acknowledged, not broadcast to subscribers nor stored in presence history; a member that enters and leaves after it is', async () => {
    const channel = `persisted:${uniqueChannel('leave')}`;
    const observer = await svc.connect({ key: svc.ts.key });
    expect((await observer.attach(channel)).action).toBe(Actions.ATTACHED);
    const client = await svc.connect({ access_token: await svc.token({ '*': ['*'] }, 'carol') });
    const connectionId = client.connectionId;

    expect((await client.presence(channel, [{ action: 3, data: 'never entered' }])).action).toBe(Actions.ACK);
    // Then a real enter and leave: the observer gets them, and nothing before them.
    expect((await client.presence(channel, [{ action: 2, data: 'here' }])).action).toBe(Actions.ACK);
    expect((await client.presence(channel, [{ action: 3 }])).action).toBe(Actions.ACK);
    await observer.next((pm) => pm.action === Actions.PRESENCE && pm.channel === channel && actionsIn([pm]).some(([action]) => action === 3));
    const seen = observer.frames.filter((pm) => pm.action === Actions.PRESENCE && pm.channel === channel);
    expect(actionsIn(seen)).toEqual([
      [2, 'carol'],
      [3, 'carol'],
    ]);

    const res = await fetch(`http://127.0.0.1:${svc.port}/channels/${encodeURIComponent(channel)}/presence/history?direction=forwards`, { headers: svc.auth() });
    expect(res.status).toBe(200);
    const history = (await res.json()) as { action: number; clientId: string; connectionId: string; data?: string }[];
    expect(history.map((m) => [m.action, m.clientId, m.connectionId, m.data])).toEqual([
      [2, 'carol', connectionId, 'here'],
      [3, 'carol', connectionId, 'here'],
    ]);
  });
});
