// The command a CLI's --help names (issue 24, item 3): as the user typed it.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { commandAsTyped, isEntryPoint } from '../../src/cli/command.js';

const root = mkdtempSync(join(tmpdir(), 'cm-command-'));
const file = join(root, 'dist/src/cli/replay.js');
mkdirSync(join(root, 'dist/src/cli'), { recursive: true });
writeFileSync(file, '');
mkdirSync(join(root, 'bin'));
const link = join(root, 'bin/channel-messaging-replay');
symlinkSync(file, link);
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('commandAsTyped', () => {
  it('the bin link by its name', () => {
    expect(commandAsTyped('channel-messaging-replay', link, {}, '/elsewhere')).toBe('channel-messaging-replay');
  });

  it('node and the path, relative to the working directory when inside it, as given otherwise', () => {
    expect(commandAsTyped('channel-messaging-replay', file, {}, root)).toBe('node dist/src/cli/replay.js');
    expect(commandAsTyped('channel-messaging-replay', file, {}, '/elsewhere')).toBe(`node ${file}`);
    expect(commandAsTyped('channel-messaging-replay', join(root, 'src/cli/replay.ts'), {}, root)).toBe('npx tsx src/cli/replay.ts');
  });

  it('the npm script that runs this file (by its path or its bin), with -- for its arguments', () => {
    const npm = (event: string, script: string) => ({ npm_lifecycle_event: event, npm_lifecycle_script: script });
    expect(commandAsTyped('channel-messaging-replay', file, npm('replay:prod', 'node dist/src/cli/replay.js'), root)).toBe('npm run replay:prod --');
    expect(commandAsTyped('channel-messaging-replay', link, npm('audit', 'channel-messaging-replay --app a'), root)).toBe('npm run audit --');
    expect(commandAsTyped('channel-messaging', file, npm('start', 'node dist/src/cli/replay.js'), root)).toBe('npm start --');
  });

  it('not an npm script whose command is another one (npm test running this file in a child)', () => {
    expect(commandAsTyped('channel-messaging-replay', file, { npm_lifecycle_event: 'test', npm_lifecycle_script: 'tsc -p tsconfig.json --noEmit && vitest run' }, root)).toBe('node dist/src/cli/replay.js');
  });
});

describe('isEntryPoint', () => {
  it('the file itself or a link to it; not another file or none', () => {
    expect(isEntryPoint(pathToFileURL(file).href, file)).toBe(true);
    expect(isEntryPoint(pathToFileURL(file).href, link)).toBe(true);
    expect(isEntryPoint(pathToFileURL(file).href, join(root, 'other.js'))).toBe(false);
    expect(isEntryPoint(pathToFileURL(file).href, undefined)).toBe(false);
  });
});
