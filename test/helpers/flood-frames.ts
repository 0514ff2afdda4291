// The frames one hostile connection floods the realtime door with (issue 22), each kind made once and
// sent in a loop: by the flood bench (test/bench/flood-bench.ts) and the flood tier (test/fuzz/realtime-floods.test.ts).
import { encode as encodeMsgpack } from '@msgpack/msgpack';

export type FloodKind = 'heartbeat' | 'detach' | 'sync' | 'unknown' | 'over-limit publish' | 'msgpack 1 MB nested 1M deep' | 'JSON 1 MB nested 500k deep' | 'HEARTBEAT of 70,000 keys';
export const FLOOD_KINDS: FloodKind[] = ['heartbeat', 'detach', 'sync', 'unknown', 'over-limit publish', 'msgpack 1 MB nested 1M deep', 'JSON 1 MB nested 500k deep', 'HEARTBEAT of 70,000 keys'];

/** The flooder's frames: made once, sent in a loop. */
export function floodFrames(kind: FloodKind): { format: 'json' | 'msgpack'; frames: (string | Buffer)[] } {
  const json = (pms: unknown[]): { format: 'json'; frames: string[] } => ({ format: 'json', frames: pms.map((pm) => JSON.stringify(pm)) });
  switch (kind) {
    case 'heartbeat':
      return json(Array.from({ length: 100 }, (_, i) => ({ action: 0, id: `h${i}` })));
    case 'detach':
      return json(Array.from({ length: 1000 }, (_, i) => ({ action: 12, channel: `never-${i}` })));
    case 'sync':
      return json(Array.from({ length: 100 }, (_, i) => ({ action: 16, channel: `never-${i}` })));
    case 'unknown':
      return json(Array.from({ length: 100 }, () => ({ action: 99 })));
    case 'over-limit publish':
      return json(Array.from({ length: 1000 }, (_, i) => ({ action: 15, channel: 'flood', msgSerial: i, messages: [{ name: 'f', data: 'x'.repeat(100) }] })));
    case 'msgpack 1 MB nested 1M deep': {
      const head = Buffer.from(encodeMsgpack({ action: 0 })).subarray(1);
      return { format: 'msgpack', frames: [Buffer.concat([Buffer.from([0x82]), head, Buffer.from([0xa2, 0x69, 0x64]), Buffer.alloc(1_000_000, 0x91), Buffer.from([0x00])])] };
    }
    case 'JSON 1 MB nested 500k deep':
      return { format: 'json', frames: [`{"action":0,"id":${'['.repeat(500_000)}${']'.repeat(500_000)}}`] };
    case 'HEARTBEAT of 70,000 keys':
      return { format: 'json', frames: [JSON.stringify({ action: 0, ...Object.fromEntries(Array.from({ length: 70_000 }, (_, i) => [`k${i}`, 0])) })] };
  }
}

