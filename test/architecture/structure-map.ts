import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildImportGraph, checkRealtimeHasNoCycle, cycles, LAYERS, layerOf, ROOT, roomGraph, roomOf, upwardArrows } from './import-graph.js';

// The structure map: `npx tsx test/architecture/structure-map.ts`. Rooms (folders) by layer with
// their size, the arrows between rooms, the import cycles between files and between rooms, and
// the arrows that run from a lower layer up to a higher one (the layers: import-graph.ts LAYERS).

const graph = buildImportGraph();
const rooms = roomGraph(graph);
const lines = new Map<string, number>();
let total = 0;
for (const file of graph.keys()) {
  const n = readFileSync(join(ROOT, file), 'utf8').split('\n').length;
  lines.set(roomOf(file), (lines.get(roomOf(file)) ?? 0) + n);
  total += n;
}

const out: string[] = [];
const byLayer = [...rooms.keys()].sort((a, b) => (layerOf(a) ?? 99) - (layerOf(b) ?? 99) || a.localeCompare(b));
out.push(`rooms (${graph.size} files, ${total} lines), lowest layer first:`);
for (const room of byLayer) {
  const layer = layerOf(room);
  const arrows = [...rooms.get(room)!.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([to, n]) => `${to}${n > 1 ? ` x${n}` : ''}`);
  const share = ((100 * lines.get(room)!) / total).toFixed(1);
  out.push(`  L${layer ?? '?'} ${room} (${lines.get(room)} lines, ${share}%) -> ${arrows.join(', ') || '-'}`);
}
out.push(`layers: ${LAYERS.map((l, i) => `L${i} ${l.join(' ')}`).join(' | ')}`);

const fileCycles = cycles(graph);
out.push(`file cycles: ${fileCycles.length}`);
for (const c of fileCycles) out.push(`  ${c.join(' <-> ')}`);

const roomLevel = new Map([...rooms].map(([r, arrows]) => [r, new Set(arrows.keys())]));
const roomCycles = cycles(roomLevel);
out.push(`room cycles: ${roomCycles.length}`);
for (const c of roomCycles) out.push(`  ${c.join(' <-> ')}`);

const upward = upwardArrows(graph);
out.push(`arrows running up: ${upward.length}`);
for (const a of upward) out.push(`  ${a.from} (L${layerOf(a.from) ?? '?'}) -> ${a.to} (L${layerOf(a.to) ?? '?'}): ${a.imports.map((i) => i.split(' -> ').map((f) => f.split('/').pop()).join('>')).join(', ')}`);

try {
  checkRealtimeHasNoCycle(graph);
  out.push('realtime check (checkRealtimeHasNoCycle): holds');
} catch (err) {
  out.push(`realtime check (checkRealtimeHasNoCycle): fails: ${(err as Error).message}`);
}

console.log(out.join('\n'));
