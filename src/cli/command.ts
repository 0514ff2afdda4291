// How a command-line entry point was started, for its --help and for whether it runs at all: the
// same file is reached as a bin link (`channel-messaging-replay`), an npm script
// (`npm run replay --`, `npm run replay:prod --`), `node dist/src/cli/replay.js` or `tsx src/...`.
import { realpathSync } from 'node:fs';
import { basename, extname, isAbsolute, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { ConfigError } from '../config.js';

const real = (path: string): string | undefined => {
  try {
    return realpathSync(path);
  } catch {
    return undefined;
  }
};

/**
 * Whether the module at `moduleUrl` is the process's entry point (node, tsx or a bin link to it),
 * not a module a test or another entry point imported.
 */
export function isEntryPoint(moduleUrl: string, argv1: string | undefined = process.argv[1]): boolean {
  if (!argv1) return false;
  const path = real(argv1);
  return path !== undefined && pathToFileURL(path).href === moduleUrl;
}

/**
 * The command as the user typed it, for the usage line: the npm script when npm ran this file as
 * one (npm_lifecycle_script names it or its bin), the bin name when started through its link,
 * otherwise `node <path>` (or `npx tsx <path>` for the sources), the path as given.
 */
export function commandAsTyped(
  bin: string,
  argv1: string | undefined = process.argv[1],
  env: Record<string, string | undefined> = process.env,
  cwd: string = process.cwd(),
): string {
  if (!argv1) return bin;
  const event = env.npm_lifecycle_event;
  const script = env.npm_lifecycle_script;
  if (event && script) {
    // npm runs scripts in the package's directory; a script reaches this file by its path or bin.
    const target = real(argv1) ?? argv1;
    const names = script.split(/\s+/);
    if (names.some((name) => name === bin || (/[/\\]/.test(name) && real(resolve(cwd, name)) === target))) {
      return event === 'start' || event === 'test' ? `npm ${event} --` : `npm run ${event} --`;
    }
  }
  if (basename(argv1) === bin) return bin;
  const shown = isAbsolute(argv1) && !relative(cwd, argv1).startsWith('..') ? relative(cwd, argv1) : argv1;
  return `${extname(argv1) === '.ts' ? 'npx tsx' : 'node'} ${shown}`;
}

/**
 * node:util parseArgs, its errors as a ConfigError in one line that points at --help (an unknown
 * option named as typed), for every command's own parser.
 */
export function commandLine<T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (err) {
    const message = (err as Error).message.split('\n')[0];
    const unknown = /Unknown option '(-[^']*)'/.exec(message);
    throw new ConfigError(unknown ? `unknown option ${unknown[1]} (see --help)` : `${message} (see --help)`);
  }
}
