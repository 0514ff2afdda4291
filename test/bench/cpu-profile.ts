// Hot spots of a V8 .cpuprofile (written by a child run with --cpu-prof): self time by function
// and by where the code lives (this repo's files, each package, node internals, GC).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export interface HotSpot {
  name: string;
  selfMs: number;
  /** share of the non-idle time */
  share: number;
}

export interface ProfileSummary {
  file: string;
  busyMs: number;
  functions: HotSpot[];
  places: HotSpot[];
}

/**
 * The main thread's newest profile in `dir`, if any. Node names them
 * CPU.<date>.<time>.<pid>.<thread id>.<seq>.cpuprofile; tsx's loader hooks run in thread 1.
 */
export function mainThreadProfile(dir: string): string | undefined {
  const files = readdirSync(dir)
    .filter((name) => /\.\d+\.0\.\d+\.cpuprofile$/.test(name))
    .map((name) => join(dir, name));
  return files.sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0];
}

export function summarizeProfile(file: string, root: string, top = 15): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));

  const functions = new Map<string, number>();
  const places = new Map<string, number>();
  let busyUs = 0;
  for (const [id, us] of selfUs) {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    if (functionName === '(idle)') continue;
    busyUs += us;
    const where = url ? placeOf(url, root) : functionName.startsWith('(') ? functionName : '(native)';
    const fn = url ? `${functionName || '(anonymous)'} ${shortUrl(url, root)}:${lineNumber + 1}` : functionName;
    functions.set(fn, (functions.get(fn) ?? 0) + us);
    places.set(where, (places.get(where) ?? 0) + us);
  }
  const ranked = (m: Map<string, number>): HotSpot[] =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, us]) => ({ name, selfMs: us / 1000, share: busyUs > 0 ? us / busyUs : 0 }));
  return { file, busyMs: busyUs / 1000, functions: ranked(functions), places: ranked(places) };
}

function shortUrl(url: string, root: string): string {
  const path = url.replace(/^file:\/\//, '');
  if (path.startsWith(root)) return path.slice(root.length);
  return path;
}

/** "src/log/embedded/embedded-log.ts", "fastify", "node:internal" */
function placeOf(url: string, root: string): string {
  const path = shortUrl(url, root);
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
  if (pkg) return pkg[1];
  if (path.startsWith('node:')) return path.split('/')[0].replace(/^(node:internal).*/, '$1');
  return path;
}
