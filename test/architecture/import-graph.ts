import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

// The import graph of the service's own code (src/ and projections/), read with the compiler's
// preProcessFile: every import and export-from counts, type-only ones included, since a type
// import ties two rooms together as much as a value import does.

export const ROOT = resolve(dirname(new URL(import.meta.url).pathname), '../..');
const SOURCE_DIRS = ['src', 'projections'];
const SOURCE = /\.(ts|mts)$/;

/** file (relative to the repository root, e.g. `src/log/port.ts`) -> the files it imports */
export type ImportGraph = Map<string, Set<string>>;

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) out.push(...sourceFiles(path));
    else if (SOURCE.test(entry.name)) out.push(path);
  }
  return out;
}

/** The file a relative specifier names: `./x.js` is `./x.ts` in the source, `./x.mjs` is `./x.d.mts` beside `./x.mjs`. */
function resolveSpecifier(from: string, specifier: string): string | undefined {
  const base = join(dirname(from), specifier);
  const candidates = [base.replace(/\.js$/, '.ts'), base.replace(/\.mjs$/, '.d.mts'), base.replace(/\.mjs$/, '.mts'), `${base}.ts`, join(base, 'index.ts')];
  return candidates.find((c) => SOURCE.test(c) && existsSync(join(ROOT, c)));
}

export function buildImportGraph(): ImportGraph {
  const graph: ImportGraph = new Map();
  for (const file of SOURCE_DIRS.flatMap(sourceFiles)) {
    const info = ts.preProcessFile(readFileSync(join(ROOT, file), 'utf8'), true, true);
    const targets = new Set<string>();
    for (const { fileName } of info.importedFiles) {
      if (!fileName.startsWith('.')) continue; // node: and npm packages are outside the graph
      const target = resolveSpecifier(file, fileName);
      if (target !== undefined) targets.add(relative(ROOT, join(ROOT, target)));
    }
    graph.set(file, targets);
  }
  return graph;
}

/** The strongly connected groups of more than one node (or a node importing itself): each is a cycle. */
export function cycles(graph: Map<string, Set<string>>): string[][] {
  let index = 0;
  const at = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    at.set(v, index);
    low.set(v, index++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!at.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, at.get(w)!));
    }
    if (low.get(v) === at.get(v)) {
      const group: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        group.push(w);
      } while (w !== v);
      if (group.length > 1 || graph.get(v)?.has(v)) found.push(group.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!at.has(v)) visit(v);
  return found.sort((a, b) => a[0].localeCompare(b[0]));
}

/** The graph restricted to the files `keep` accepts. */
export function subgraph(graph: ImportGraph, keep: (file: string) => boolean): ImportGraph {
  const out: ImportGraph = new Map();
  for (const [file, targets] of graph) if (keep(file)) out.set(file, new Set([...targets].filter(keep)));
  return out;
}

/**
 * The room a file lives in: its folder under src/ or projections/ (`src/log/kafka/x.ts` is in
 * `src/log`); a file straight under src/ is a room of its own (`src/service.ts`).
 */
export function roomOf(file: string): string {
  const parts = file.split('/');
  if (parts.length === 2) return file.replace(/\.(d\.)?m?ts$/, '');
  return `${parts[0]}/${parts[1]}`;
}

/**
 * The layers, lowest first: a room may import its own layer's rooms and the ones below. A room
 * importing one above it is an arrow running back up. Rooms not named here sit in the layer of
 * their prefix's entry (`projections/*`).
 */
export const LAYERS: string[][] = [
  ['src/domain'],
  ['src/errors', 'src/error-list', 'src/limits', 'src/clock', 'src/build-info', 'src/startup', 'src/codec'],
  ['src/log', 'src/stores', 'src/metrics', 'src/webhooks'],
  ['projections/*'],
  ['src/messages', 'src/presence', 'src/apps', 'src/auth', 'src/channels', 'src/stats', 'src/recent-keys', 'src/audit'],
  ['src/realtime', 'src/routes', 'src/http', 'src/dashboard'],
  ['src/app', 'src/service', 'src/adapters', 'src/adapter-port', 'src/config', 'src/production-adapters', 'src/main', 'src/run-service', 'src/cli'],
];

export function layerOf(room: string): number | undefined {
  const i = LAYERS.findIndex((rooms) => rooms.some((r) => r === room || (r.endsWith('/*') && room.startsWith(r.slice(0, -1)))));
  return i < 0 ? undefined : i;
}

/** room -> rooms it imports, with how many file-to-file imports make each arrow */
export function roomGraph(graph: ImportGraph): Map<string, Map<string, number>> {
  const rooms = new Map<string, Map<string, number>>();
  for (const [file, targets] of graph) {
    const from = roomOf(file);
    const arrows = rooms.get(from) ?? new Map<string, number>();
    rooms.set(from, arrows);
    for (const t of targets) {
      const to = roomOf(t);
      if (to !== from) arrows.set(to, (arrows.get(to) ?? 0) + 1);
    }
  }
  return rooms;
}

export interface UpwardArrow {
  from: string;
  to: string;
  /** the file imports making the arrow */
  imports: string[];
}

/** Imports from a room to a room in a higher layer (or to a room no layer names). */
export function upwardArrows(graph: ImportGraph): UpwardArrow[] {
  const arrows = new Map<string, UpwardArrow>();
  for (const [file, targets] of graph) {
    const from = roomOf(file);
    for (const t of targets) {
      const to = roomOf(t);
      if (to === from) continue;
      const lf = layerOf(from);
      const lt = layerOf(to);
      if (lf !== undefined && lt !== undefined && lt <= lf) continue;
      const key = `${from} -> ${to}`;
      const arrow = arrows.get(key) ?? { from, to, imports: [] };
      arrow.imports.push(`${file} -> ${t}`);
      arrows.set(key, arrow);
    }
  }
  return [...arrows.values()].sort((a, b) => `${a.from}${a.to}`.localeCompare(`${b.from}${b.to}`));
}

// The checks the structure test asserts, each returning what breaks it (empty: it holds).

/** Cycles among the files of src/realtime/. */
export const realtimeCycles = (graph: ImportGraph): string[][] => cycles(subgraph(graph, (f) => f.startsWith('src/realtime/')));

/** Cycles that pass through a file of src/domain/. */
export const cyclesThroughDomain = (graph: ImportGraph): string[][] => cycles(graph).filter((c) => c.some((f) => f.startsWith('src/domain/')));

/** Imports from src/domain/ to anything outside it. */
export function domainEscapes(graph: ImportGraph): string[] {
  const out: string[] = [];
  for (const [file, targets] of graph) {
    if (!file.startsWith('src/domain/')) continue;
    for (const t of targets) if (!t.startsWith('src/domain/')) out.push(`${file} -> ${t}`);
  }
  return out.sort();
}

export const describeCycles = (found: string[][]): string =>
  found.length === 0 ? 'none' : found.map((c, i) => `  cycle ${i + 1}: ${c.join(', ')}`).join('\n');

/** Throws, listing them, if there are cycles: the structure test's assertion. */
export function assertNoCycles(found: string[][], where: string): void {
  if (found.length > 0) throw new Error(`import cycles ${where} (${found.length}):\n${describeCycles(found)}`);
}

/** No import cycle inside src/realtime/ (issue 25): a connection reaches the gateway through context.ts. */
export const checkRealtimeHasNoCycle = (graph: ImportGraph): void => assertNoCycles(realtimeCycles(graph), 'inside src/realtime');
