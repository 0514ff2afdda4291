// The event loop while a presence snapshot's state at REALTIME_MAX_PRESENCE_MEMBERS (1,000,000 members,
// 100 a channel, short data) is encoded: one encode() against encodeInSlices (projections/snapshot-encode.ts),
// alternately; the longest gap of a 1 ms interval timer while each runs. README: A bounded start, Cost.
// `node --max-old-space-size=4096 --import tsx test/bench/snapshot-encode-bench.ts`
import { encode } from '@msgpack/msgpack';
import { encodeInSlices } from '../../projections/snapshot-encode.js';
const channels: [string, unknown[]][] = [];
for (let c = 0; c < 10_000; c++) {
  const members = [];
  for (let m = 0; m < 100; m++) members.push({ id: `conn${m}:0:0`, clientId: `client-${c}-${m}`, connectionId: `conn-${c}-${m}-abcdefgh`, timestamp: 1795829275998 + m, data: `some presence data ${m}` });
  channels.push([`app\u0000channel-${c}`, members]);
}
const state = { channels, newest: 1 };
const stall = async (run: () => Promise<unknown> | unknown) => {
  let last = performance.now();
  let worst = 0;
  const timer = setInterval(() => { const t = performance.now(); worst = Math.max(worst, t - last); last = t; }, 1);
  await new Promise((r) => setTimeout(r, 20));
  last = performance.now();
  const t0 = performance.now();
  await run();
  const total = performance.now() - t0;
  await new Promise((r) => setTimeout(r, 5));
  clearInterval(timer);
  return `total ${total.toFixed(0)} ms, longest stall ${worst.toFixed(0)} ms`;
};
for (let i = 0; i < 2; i++) {
  console.log('encode()        ', await stall(() => encode(state, { ignoreUndefined: true })));
  console.log('encodeInSlices  ', await stall(() => encodeInSlices(state)));
}
