// The realtime baseline: the same `ws` library on a plain node:http server, speaking just the frames
// the realtime bench uses and doing nothing else (no auth, no log, no limits): CONNECTED on connect,
// ATTACHED on ATTACH, and on a MESSAGE one delivery frame, serialized once, sent to every socket
// attached to the channel, then the ACK. Its frames have the gateway's shape (a delivery carries
// channel and channelSerial, and per message id, timestamp and connectionId; ids of the same
// length), so both servers send frames of the same size.
import { createServer } from 'node:http';
import { randomBytes } from 'node:crypto';
import { WebSocketServer, type WebSocket } from 'ws';

const MODES = 983040; // PUBLISH | SUBSCRIBE | PRESENCE | PRESENCE_SUBSCRIBE

interface Frame {
  action: number;
  channel?: string;
  msgSerial?: number;
  id?: string;
  messages?: { id?: string; name?: string; data?: unknown }[];
}

const channels = new Map<string, { sockets: Set<WebSocket>; serial: number }>();
const channelOf = (name: string): { sockets: Set<WebSocket>; serial: number } => {
  let c = channels.get(name);
  if (!c) channels.set(name, (c = { sockets: new Set(), serial: 0 }));
  return c;
};

const http = createServer((_request, response) => response.writeHead(200).end('bare ws'));
const wss = new WebSocketServer({ noServer: true });
http.on('upgrade', (request, socket, head) => wss.handleUpgrade(request, socket, head, (ws) => onConnection(ws)));

function onConnection(ws: WebSocket): void {
  const connectionId = randomBytes(9).toString('base64url');
  const attached = new Set<string>();
  ws.send(
    JSON.stringify({
      action: 4,
      connectionId,
      connectionDetails: { connectionKey: `${connectionId}!${randomBytes(6).toString('base64url')}`, connectionStateTtl: 120000, maxIdleInterval: 15000, maxMessageSize: 65536 },
    }),
  );
  ws.on('message', (raw) => {
    let frame: Frame;
    try {
      frame = JSON.parse(String(raw)) as Frame;
    } catch {
      return;
    }
    switch (frame.action) {
      case 0:
        ws.send(JSON.stringify({ action: 0, id: frame.id }));
        break;
      case 10: {
        const c = channelOf(frame.channel!);
        c.sockets.add(ws);
        attached.add(frame.channel!);
        ws.send(JSON.stringify({ action: 11, channel: frame.channel, flags: MODES, channelSerial: `0:${c.serial}` }));
        break;
      }
      case 12:
        channels.get(frame.channel!)?.sockets.delete(ws);
        attached.delete(frame.channel!);
        ws.send(JSON.stringify({ action: 13, channel: frame.channel }));
        break;
      case 15: {
        const c = channelOf(frame.channel!);
        const serial = ++c.serial;
        const timestamp = Date.now();
        const id = `${connectionId}:${frame.msgSerial}`;
        const messages = (frame.messages ?? []).map((m, i) => ({ id: m.id ?? `${id}:${i}`, timestamp, ...m, connectionId }));
        const delivery = JSON.stringify({ action: 15, channel: frame.channel, channelSerial: `0:${serial}`, messages });
        for (const s of c.sockets) s.send(delivery);
        ws.send(JSON.stringify({ action: 1, msgSerial: frame.msgSerial, count: 1, res: [{ serials: messages.map((_, i) => `${serial}:${i}`) }] }));
        break;
      }
      case 7:
        ws.send(JSON.stringify({ action: 8 }));
        ws.close();
        break;
    }
  });
  ws.on('close', () => {
    for (const name of attached) channels.get(name)?.sockets.delete(ws);
  });
  ws.on('error', () => {});
}

// The bench asks for the heap over IPC, as it asks the service child (service-server.ts).
process.on('message', (m: unknown) => {
  if (m === 'memory-gc') (globalThis as { gc?: () => void }).gc?.();
  if (m === 'memory' || m === 'memory-gc') process.send?.({ memory: process.memoryUsage() });
});
process.channel?.unref();

http.listen(Number(process.env.PORT ?? 0), process.env.HOST ?? '127.0.0.1');
process.once('SIGTERM', () => {
  for (const ws of wss.clients) ws.terminate();
  http.close(() => process.exit(0));
});
