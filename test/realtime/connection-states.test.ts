// A realtime Connection driven through a context of the test's own (src/realtime/context.ts), with
// sockets of the test's own: the state table (src/realtime/connection-state.ts) move by move,
// without a gateway, a log or a network. Timers are vitest's fake ones: connectionStateTtl and
// presenceDropMs pass in a moment.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import pino from 'pino';
import { Connection, type ConnectionIdentity } from '../../src/realtime/connection.js';
import type { ConnectionContext, PeerSocket } from '../../src/realtime/context.js';
import type { Subscriber } from '../../src/realtime/attachment.js';
import type { AttachRequest } from '../../src/realtime/channel-requests.js';
import { TRANSITIONS, canMove } from '../../src/realtime/connection-state.js';
import { FloodCooldown } from '../../src/realtime/flood-cooldown.js';
import { DEFAULT_REALTIME_SETTINGS, type RealtimeSettings } from '../../src/realtime/settings.js';
import { DEFAULT_LIMITS } from '../../src/limits.js';
import { parseCapability } from '../../src/auth/capability.js';
import type { Credentials } from '../../src/auth/credentials.js';
import type { StoredMessage } from '../../src/domain/message.js';
import { Action, type ProtocolMessage } from '../../src/realtime/protocol.js';
import { ErrorCodes } from '../../src/errors.js';

const TTL_MS = 120_000;
const DROP_MS = 60_000;
const settings: RealtimeSettings = { ...DEFAULT_REALTIME_SETTINGS, connectionStateTtlMs: TTL_MS, presenceDropMs: DROP_MS };

/** A socket that records the frames sent on it (JSON: the connections here speak JSON). */
class RecordingSocket implements PeerSocket {
  readonly OPEN = 1;
  readyState = 1;
  isPaused = false;
  bufferedAmount = 0;
  terminated = false;
  readonly frames: ProtocolMessage[] = [];

  send(frame: string | Uint8Array, written?: (err?: Error) => void): void {
    this.frames.push(JSON.parse(String(frame)) as ProtocolMessage);
    written?.();
  }
  close(): void {
    this.readyState = 3;
  }
  terminate(): void {
    this.terminated = true;
    this.readyState = 3;
  }
  pause(): void {
    this.isPaused = true;
  }
  resume(): void {
    this.isPaused = false;
  }
  ping(): void {}

  actions(): number[] {
    return this.frames.map((f) => f.action);
  }
}

const app = { appId: 'app1', accountId: 'acc', keys: [], namespaces: [], source: 'default' as const, createdAt: 0 };

function credentials(over: Partial<Credentials> = {}): Credentials {
  return { app, keyName: 'app1.key', capability: parseCapability({ '*': ['*'] }), method: 'basic', ...over };
}

const identity = (over: Partial<ConnectionIdentity> = {}): ConnectionIdentity => ({ credentials: credentials(), clientId: 'alice', format: 'json', echo: true, ...over });

/** A context that records what the connection asks; publishes wait until the test settles them. */
class TestContext implements ConnectionContext {
  readonly settings = settings;
  readonly limits = DEFAULT_LIMITS;
  readonly clock = { now: () => Date.now() };
  readonly logger = pino({ level: 'silent' });
  readonly instanceId = 'instance-1';
  readonly readingThrottled = false;
  readonly calls: string[] = [];
  readonly publishes: { messages: StoredMessage[]; settle: (ok: boolean) => void }[] = [];
  /** Tokens the context knows, by token string. */
  readonly tokens = new Map<string, Credentials>();
  inflight = 0;

  authenticateToken(token: string): Credentials {
    const found = this.tokens.get(token);
    if (!found) throw new Error('unknown token');
    return found;
  }
  dropped(id: string): void {
    this.calls.push(`dropped ${id}`);
  }
  ended(id: string): void {
    this.calls.push(`ended ${id}`);
  }
  holdInflight(bytes: number): void {
    this.inflight += bytes;
  }
  releaseInflight(bytes: number): void {
    this.inflight -= bytes;
  }
  count(): void {}
  readonly floodCooldown = new FloodCooldown(settings.floodCooldownMs, settings.maxFloodCooldownOrigins, () => Date.now());
  readyToAttach(): undefined {
    return undefined;
  }
  async attach(_conn: Subscriber, _grant: () => number, _request: AttachRequest): Promise<boolean> {
    return true;
  }
  detach(): void {}
  sync(): void {}
  publish(_appId: string, _channel: string, messages: StoredMessage[]): Promise<void> {
    return new Promise((resolve, reject) => this.publishes.push({ messages, settle: (ok) => (ok ? resolve() : reject(new Error('append failed'))) }));
  }
  admitChannel(): void {}
  isPresentWithId(): boolean {
    return false;
  }
  presenceMembers(): number {
    return 0;
  }
  async changePresence(appId: string, channel: string): Promise<void> {
    this.calls.push(`presence ${appId} ${channel}`);
  }
  leave(appId: string, channel: string, connectionId: string): void {
    this.calls.push(`leave ${channel} ${connectionId}`);
  }
}

/** A frame from the client on `socket`, as the gateway hands it over. */
const receive = (conn: Connection, socket: RecordingSocket, pm: ProtocolMessage): void => conn.receive(socket, Buffer.from(JSON.stringify(pm)), false);

/** Lets the connection's promise chains (publish, presence, ACK) run. */
const settled = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

describe('a realtime connection through its context port (the state table)', () => {
  let ctx: TestContext;
  let socket: RecordingSocket;
  let conn: Connection;

  beforeEach(() => {
    vi.useFakeTimers();
    ctx = new TestContext();
    socket = new RecordingSocket();
    conn = new Connection(ctx, 'conn-1', 'conn-1!mac', identity(), socket);
  });

  afterEach(() => {
    vi.useRealTimers();
  });

  it('the table: open may drop, resume or end; dropped may resume or end; ended is final', () => {
    expect(TRANSITIONS).toEqual({ open: ['open', 'dropped', 'ended'], dropped: ['open', 'ended'], ended: [] });
    expect(canMove('dropped', 'dropped')).toBe(false);
    expect(canMove('ended', 'open')).toBe(false);
  });

  it('a connection whose socket is lost is dropped, and a resume within connectionStateTtl opens it again with its id: its members never leave', async () => {
    receive(conn, socket, { action: Action.PRESENCE, channel: 'room', msgSerial: 0, presence: [{ action: 2, data: 'here' }] });
    await settled();
    expect(ctx.calls).toEqual(['presence app1 room']);
    expect(conn.state).toBe('open');

    conn.socketClosed(socket);
    expect(conn.state).toBe('dropped');
    expect(ctx.calls).toContain('dropped conn-1');

    vi.advanceTimersByTime(DROP_MS - 1000);
    const again = new RecordingSocket();
    conn.resume(again, identity());
    conn.sendConnected();
    expect(conn.state).toBe('open');
    expect(conn.holds(again)).toBe(true);
    expect(again.frames[0]).toMatchObject({ action: Action.CONNECTED, connectionId: 'conn-1', connectionDetails: { connectionKey: 'conn-1!mac', connectionStateTtl: TTL_MS } });

    // The timers of the drop were stopped by the resume.
    vi.advanceTimersByTime(2 * TTL_MS);
    expect(conn.state).toBe('open');
    expect(ctx.calls.filter((c) => c.startsWith('leave') || c.startsWith('ended'))).toEqual([]);
  });

  it('a connection not resumed within connectionStateTtl ends: its members leave after presenceDropMs, the registry is told it ended at the TTL, and it cannot open again', async () => {
    receive(conn, socket, { action: Action.PRESENCE, channel: 'room', msgSerial: 0, presence: [{ action: 2 }] });
    await settled();
    conn.socketClosed(socket);

    vi.advanceTimersByTime(DROP_MS - 1);
    expect(ctx.calls).not.toContain('leave room conn-1');
    vi.advanceTimersByTime(1);
    expect(ctx.calls).toContain('leave room conn-1');
    expect(conn.state).toBe('dropped');

    vi.advanceTimersByTime(TTL_MS - DROP_MS);
    expect(conn.state).toBe('ended');
    expect(ctx.calls.filter((c) => c === 'ended conn-1')).toHaveLength(1);
    // The members left once: at the drop, not again at the end.
    expect(ctx.calls.filter((c) => c.startsWith('leave'))).toHaveLength(1);
    expect(() => conn.resume(new RecordingSocket(), identity())).toThrow(/no move from ended to open/);
  });

  it('AUTH with a token of the same clientId renews the credentials and answers CONNECTED; one for another clientId fails the connection, which ends', () => {
    const expires = Date.now() + 3_600_000;
    ctx.tokens.set('good', credentials({ method: 'token', clientId: 'alice', expires }));
    ctx.tokens.set('other', credentials({ method: 'token', clientId: 'mallory' }));

    receive(conn, socket, { action: Action.AUTH, auth: { accessToken: 'good' } });
    expect(socket.frames.at(-1)).toMatchObject({ action: Action.CONNECTED, connectionId: 'conn-1' });
    expect(conn.credentials.expires).toBe(expires);
    expect(conn.state).toBe('open');

    receive(conn, socket, { action: Action.AUTH, auth: { accessToken: 'other' } });
    expect(socket.frames.at(-1)).toMatchObject({ action: Action.ERROR, error: { code: ErrorCodes.incompatibleCredentials.code } });
    expect(conn.state).toBe('ended');
    expect(ctx.calls).toContain('ended conn-1');
    expect(socket.readyState).toBe(3);
  });

  it('AUTH with a token without channel-metadata fails (40160) a channel attached with the occupancy param, whose [meta]occupancy messages went on; the others stay', () => {
    const attachments: Record<string, { occupancy?: object }> = { watched: { occupancy: {} }, plain: {} };
    for (const [channel, extra] of Object.entries(attachments)) {
      conn.attachments.set(channel, { conn, channel, base: channel, recordKey: `app1:${channel}`, partition: 0, modes: 0xf0000, from: 0, ...extra });
    }
    (ctx as { detach: (c: unknown, channel: string) => void }).detach = (_conn, channel) => {
      ctx.calls.push(`detach ${channel}`);
      conn.attachments.delete(channel);
    };
    ctx.tokens.set('no-metadata', credentials({ method: 'token', clientId: 'alice', capability: parseCapability({ '*': ['subscribe', 'publish', 'presence'] }) }));
    receive(conn, socket, { action: Action.AUTH, auth: { accessToken: 'no-metadata' } });
    expect(ctx.calls).toEqual(['detach watched']);
    expect(socket.frames).toContainEqual(expect.objectContaining({ action: Action.ERROR, channel: 'watched', error: expect.objectContaining({ code: ErrorCodes.capabilityDenied.code }) }));
    expect([...conn.attachments.keys()]).toEqual(['plain']);
    expect(socket.frames.at(-1)).toMatchObject({ action: Action.CONNECTED });
  });

  it('AUTH with a wildcard token (clientId *) renews the credentials and keeps the connection\'s clientId: the SDK with a clientId option renews through an auth server that issues wildcard tokens', () => {
    const expires = Date.now() + 3_600_000;
    conn = new Connection(ctx, 'conn-3', 'conn-3!mac', identity({ credentials: credentials({ method: 'token', clientId: '*' }) }), socket);
    conn.sendConnected();
    ctx.tokens.set('wildcard', credentials({ method: 'token', clientId: '*', expires }));

    receive(conn, socket, { action: Action.AUTH, auth: { accessToken: 'wildcard' } });
    expect(socket.frames.at(-1)).toMatchObject({ action: Action.CONNECTED, connectionId: 'conn-3', connectionDetails: { clientId: 'alice' } });
    expect(conn.state).toBe('open');
    expect(conn.clientId).toBe('alice');
    expect(conn.credentials.expires).toBe(expires);
  });

  it('a token that expires disconnects the connection with 40142 and leaves it resumable (dropped, not ended)', () => {
    conn = new Connection(ctx, 'conn-2', 'conn-2!mac', identity({ credentials: credentials({ method: 'token', expires: Date.now() + 5_000 }) }), socket);
    conn.sendConnected();
    vi.advanceTimersByTime(4_999);
    expect(conn.state).toBe('open');
    vi.advanceTimersByTime(1);
    expect(socket.frames.at(-1)).toMatchObject({ action: Action.DISCONNECTED, error: { code: ErrorCodes.tokenExpired.code } });
    expect(conn.state).toBe('dropped');
    expect(ctx.calls).toEqual(['dropped conn-2']);
  });

  it('CLOSE answers CLOSED and ends the connection at once: its members leave, the registry forgets it, the socket closes', async () => {
    receive(conn, socket, { action: Action.PRESENCE, channel: 'room', msgSerial: 0, presence: [{ action: 2 }] });
    await settled();
    receive(conn, socket, { action: Action.CLOSE });
    expect(socket.actions().at(-1)).toBe(Action.CLOSED);
    expect(conn.state).toBe('ended');
    expect(ctx.calls).toEqual(['presence app1 room', 'ended conn-1', 'leave room conn-1']);
    expect(socket.readyState).toBe(3);
    // Nothing more happens when its timers would have run.
    vi.advanceTimersByTime(2 * TTL_MS);
    expect(ctx.calls).toHaveLength(3);
  });

  it('publishes pending when the socket drops keep their msgSerial order: their ACK, due after a resume, goes on the new socket as one', async () => {
    receive(conn, socket, { action: Action.MESSAGE, channel: 'room', msgSerial: 0, messages: [{ data: 'first' }] });
    receive(conn, socket, { action: Action.MESSAGE, channel: 'room', msgSerial: 1, messages: [{ data: 'second' }] });
    expect(ctx.publishes).toHaveLength(2);
    expect(ctx.inflight).toBeGreaterThan(0);

    // The second is appended first: its ACK waits for the first's.
    ctx.publishes[1].settle(true);
    await settled();
    expect(socket.actions()).not.toContain(Action.ACK);

    conn.socketClosed(socket);
    expect(conn.state).toBe('dropped');
    const again = new RecordingSocket();
    conn.resume(again, identity());

    ctx.publishes[0].settle(true);
    await settled();
    expect(socket.actions()).not.toContain(Action.ACK);
    expect(again.frames).toEqual([{ action: Action.ACK, msgSerial: 0, count: 2, res: [{ serials: ['conn-1:0:0'] }, { serials: ['conn-1:1:0'] }] }]);
    expect(ctx.inflight).toBe(0);
  });

  it('a publish sent again after a resume while its first append was in flight: each frame is answered, and no ACK spans a msgSerial answered already (the SDK would give the next publish its serials)', async () => {
    receive(conn, socket, { action: Action.MESSAGE, channel: 'room', msgSerial: 0, messages: [{ data: 'first' }] });
    conn.socketClosed(socket);
    const again = new RecordingSocket();
    conn.resume(again, identity());
    // The SDK sends its unacknowledged publish again (RTN19a), then a new one.
    receive(conn, again, { action: Action.MESSAGE, channel: 'room', msgSerial: 0, messages: [{ data: 'first' }] });
    receive(conn, again, { action: Action.MESSAGE, channel: 'room', msgSerial: 1, messages: [{ data: 'second' }] });
    ctx.publishes[0].settle(true);
    await settled();
    expect(again.frames).toEqual([{ action: Action.ACK, msgSerial: 0, count: 1, res: [{ serials: ['conn-1:0:0'] }] }]);
    // The new publish is appended before the one sent again: both answers are due at once.
    ctx.publishes[2].settle(true);
    await settled();
    ctx.publishes[1].settle(true);
    await settled();
    // ably-js completes the messages of an ACK from the first it still waits for (msgSerial 1),
    // taking `res` from the ACK's start: an ACK of 0 and 1 would have answered 1 with 0's serials.
    expect(again.frames.slice(1)).toEqual([
      { action: Action.ACK, msgSerial: 0, count: 1, res: [{ serials: ['conn-1:0:0'] }] },
      { action: Action.ACK, msgSerial: 1, count: 1, res: [{ serials: ['conn-1:1:0'] }] },
    ]);
  });

  it('an answer due while the connection is dropped has no socket to go on (the SDK sends its unacknowledged publishes again on resume); a failed append is a NACK', async () => {
    receive(conn, socket, { action: Action.MESSAGE, channel: 'room', msgSerial: 0, messages: [{ data: 'lost' }] });
    conn.socketClosed(socket);
    ctx.publishes[0].settle(true);
    await settled();
    expect(socket.actions()).not.toContain(Action.ACK);

    const again = new RecordingSocket();
    conn.resume(again, identity());
    receive(conn, again, { action: Action.MESSAGE, channel: 'room', msgSerial: 0, messages: [{ data: 'lost' }] });
    ctx.publishes[1].settle(false);
    await settled();
    expect(again.frames).toMatchObject([{ action: Action.NACK, msgSerial: 0, count: 1, error: { code: 50000 } }]);
    expect(ctx.inflight).toBe(0);
  });

  it('frames on a socket the connection let go of are not acted on', () => {
    conn.socketClosed(socket);
    const before = ctx.calls.length;
    receive(conn, socket, { action: Action.CLOSE });
    expect(conn.state).toBe('dropped');
    expect(ctx.calls).toHaveLength(before);
  });
});

describe('two ATTACHes of a channel, the first waiting for delivery (readyToAttach), the second not', () => {
  /** A context whose first readyToAttach waits until the test lets it go, and that records each attach's request. */
  class WaitingContext extends TestContext {
    release: (caughtUp: boolean) => void = () => undefined;
    private waited = false;
    readonly attaches: { flags: number; serial: string | undefined }[] = [];
    override readyToAttach(): undefined {
      if (this.waited) return undefined;
      this.waited = true;
      return new Promise<boolean>((resolve) => (this.release = resolve)) as unknown as undefined;
    }
    override async attach(_conn: Subscriber, grant: () => number, request: AttachRequest): Promise<boolean> {
      this.attaches.push({ flags: grant(), serial: request.serial });
      return true;
    }
  }

  it('the later ATTACH is the one that stands: the earlier one, done waiting after it, is answered no more (its modes and params would replace the later ones)', async () => {
    const ctx = new WaitingContext();
    const socket = new RecordingSocket();
    const conn = new Connection(ctx, 'conn-2', 'conn-2!mac', identity(), socket);
    const SUBSCRIBE = 1 << 18;
    const ALL = 0xf << 16;
    receive(conn, socket, { action: Action.ATTACH, channel: 'room', flags: SUBSCRIBE });
    receive(conn, socket, { action: Action.ATTACH, channel: 'room', channelSerial: '0:5' });
    await settled();
    expect(ctx.attaches).toEqual([{ flags: ALL, serial: '0:5' }]);
    ctx.release(true);
    await settled();
    expect(ctx.attaches).toEqual([{ flags: ALL, serial: '0:5' }]);
  });
});
