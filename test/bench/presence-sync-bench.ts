// A channel at the documented member limit, synced to the SDK (issue 22): REALTIME_MAX_PRESENCE_MEMBERS_PER_APP
// (250,000 by default) members entered on one channel by raw connections, then an `ably` Realtime
// client (JSON, then MessagePack) attaches and `presence.get()`s them all. Before SYNC was paced
// by the socket, past about 130,000 members the slow-reader cut-off (80020) ended such a reader
// and get() never completed.
//
// `npx tsx test/bench/presence-sync-bench.ts [members]`. Figures: test/bench/README.md, the realtime door under floods.
import WebSocket from 'ws';
import { startServiceChild } from './service-child.js';
import { realtimeClient, within } from '../helpers/realtime.js';

const MEMBERS = Number(process.argv[2] ?? 250_000);
const PER_CONNECTION = 10_000; // REALTIME_MAX_MEMBERS_PER_CONNECTION's default
const PER_FRAME = 1000; // MAX_MESSAGES_PER_PUBLISH's default

const service = await startServiceChild('presence-sync', {});
const port = Number(new URL(service.server.url).port);
const channel = 'crowd';
const sockets: WebSocket[] = [];
try {
  const started = performance.now();
  for (let c = 0; c * PER_CONNECTION < MEMBERS; c++) {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/?key=${encodeURIComponent(service.key)}&format=json&v=6`, { perMessageDeflate: false });
    sockets.push(ws);
    await new Promise((resolve) => ws.once('message', resolve));
    const frames = Math.ceil(Math.min(PER_CONNECTION, MEMBERS - c * PER_CONNECTION) / PER_FRAME);
    const acked = new Promise<void>((resolve, reject) => {
      let n = 0;
      ws.on('message', (raw: Buffer) => {
        const pm = JSON.parse(raw.toString());
        if (pm.action === 2) reject(new Error(`NACK: ${JSON.stringify(pm.error)}`));
        if (pm.action === 1 && (n += pm.count) === frames) resolve();
      });
    });
    for (let f = 0; f < frames; f++) {
      const presence = Array.from({ length: PER_FRAME }, (_, i) => ({ action: 2, clientId: `m${c}-${f}-${i}`, data: `member ${c}-${f}-${i}` }));
      ws.send(JSON.stringify({ action: 14, channel, msgSerial: f, presence }));
    }
    await acked;
    process.stderr.write(`\r[presence-sync] entered ${Math.min(MEMBERS, (c + 1) * PER_CONNECTION)} of ${MEMBERS}`);
  }
  process.stderr.write(` in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
  await new Promise((r) => setTimeout(r, 2000));
  for (const binary of [false, true]) {
    const client = realtimeClient(port, binary, { key: service.key });
    try {
      const t0 = performance.now();
      const ch = client.channels.get(channel);
      await within(ch.attach(), 60_000, 'attach');
      const members = await within(ch.presence.get(), 300_000, 'presence.get()');
      const seconds = (performance.now() - t0) / 1000;
      console.log(`${binary ? 'MessagePack' : 'JSON'}: ${members.length} of ${MEMBERS} members synced in ${seconds.toFixed(1)} s; connection ${client.connection.state}; service RSS ${service.server.rssMiB()?.toFixed(0)} MiB`);
    } finally {
      client.close();
    }
  }
} finally {
  for (const ws of sockets) ws.terminate();
  await service.stop();
}
