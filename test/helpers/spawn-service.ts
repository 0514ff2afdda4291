// The service as a child process, as an operator starts it: `node --import tsx src/main.ts` (the
// sources) or `node <dist>/src/main.js` (the build). Output is collected; the port comes from the
// "service listening" log line (PORT=0 picks a free one).
import { spawn, type ChildProcess } from 'node:child_process';
import { join, resolve } from 'node:path';

export const ROOT = resolve(import.meta.dirname, '../..');

export interface ServiceProcess {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the port once the service listens; rejects if it exits first. */
  listening: Promise<number>;
  /** Resolves with the exit code (or the signal's name). */
  exited: Promise<number | string>;
  url: (path: string) => Promise<string>;
}

export function spawnService(options: { dist?: string; script?: string; env?: Record<string, string>; args?: string[] } = {}): ServiceProcess {
  const entry = options.dist ? [join(options.dist, options.script ?? 'src/main.js')] : ['--import', 'tsx', join(ROOT, options.script ?? 'src/main.ts')];
  const env: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', PORT: '0', HOST: '127.0.0.1', ...options.env };
  const child = spawn(process.execPath, [...entry, ...(options.args ?? [])], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exited = new Promise<number | string>((r) => child.on('exit', (code, signal) => r(code ?? signal ?? -1)));
  const listening = new Promise<number>((resolvePort, reject) => {
    const check = (): void => {
      for (const line of out.split('\n')) {
        if (!line.includes('"service listening"')) continue;
        resolvePort(JSON.parse(line).port as number);
        child.stdout!.off('data', check);
        return;
      }
    };
    child.stdout!.on('data', check);
    void exited.then((code) => reject(new Error(`the service exited (${code}) before listening: ${err || out}`)));
  });
  listening.catch(() => {});
  return { child, stdout: () => out, stderr: () => err, listening, exited, url: async (path) => `http://127.0.0.1:${await listening}${path}` };
}

/** Runs a command to its end: exit code, stdout, stderr. */
export function runToEnd(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolveRun) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('exit', (code) => resolveRun({ code: code ?? -1, stdout, stderr }));
  });
}
