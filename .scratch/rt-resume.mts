import * as Ably from 'ably';
import { startTestService } from '/work/main/test/helpers/service.ts';
const ts = await startTestService({ REALTIME_PRESENCE_DROP_MS: '1500' });
await ts.service.app.listen({ port: 0, host: '127.0.0.1' });
const port = (ts.service.app.server.address() as any).port;
for (const bin of [false, true]) {
  const opts = { key: ts.key, endpoint: '127.0.0.1', port, tls: false, useBinaryProtocol: bin, logLevel: 1 } as any;
  const b = new Ably.Realtime({ ...opts, clientId: 'bob' });
  await b.connection.once('connected');
  const id0 = b.connection.id;
  b.connection.on((st: any) => console.log('state', st.previous, '->', st.current, st.reason?.message));
  const reconnected = new Promise((r) => b.connection.on('connected', r));
  const ch = b.channels.get('room' + bin); const got: any[] = [];
  await ch.subscribe((m) => got.push(m.data));
  await ch.presence.enter('x');
  const rest = new Ably.Rest({ ...opts });
  await rest.channels.get('room' + bin).publish('a', 'before');
  await new Promise((r) => setTimeout(r, 200));
  const transport = (b.connection as any).connectionManager.activeProtocol.getTransport();
  transport.disconnect();
  for (let i = 0; i < 5; i++) await rest.channels.get('room' + bin).publish('a', 'during' + i);
  await reconnected;
  await new Promise((r) => setTimeout(r, 500));
  await rest.channels.get('room' + bin).publish('a', 'after');
  await new Promise((r) => setTimeout(r, 300));
  console.log(bin, 'same id', id0 === b.connection.id, got);
  console.log('members', (await rest.channels.get('room' + bin).presence.get()).items.map((m: any) => m.clientId));
  // abrupt drop without resume: kill the socket and stop the client from reconnecting
  const c = new Ably.Realtime({ ...opts, clientId: 'carol' });
  await c.channels.get('room' + bin).presence.enter('y');
  console.log('members with carol', (await rest.channels.get('room' + bin).presence.get()).items.map((m: any) => m.clientId));
  (c.connection as any).connectionManager.activeProtocol.getTransport().nativeWebSocket?.terminate?.() ;
  c.close();
  await new Promise((r) => setTimeout(r, 2500));
  console.log('members after carol dropped', (await rest.channels.get('room' + bin).presence.get()).items.map((m: any) => m.clientId));
  b.close();
}
await ts.close();
process.exit(0);
