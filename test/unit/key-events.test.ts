// Key management as a projection (issue 24 item 2): the apps registry evolves on key.created /
// key.updated / key.revoked, in log order, for apps of every source; and the default app's file.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AppRegistry } from '../../projections/apps/app-registry.js';
import { loadDefaultApp, loadOrCreateDefaultApp } from '../../src/apps/default-app.js';
import type { AppDefinition } from '../../src/domain/app.js';
import { decodeEvent, encodeEvent } from '../../src/log/event-codec.js';
import type { LogEvent } from '../../src/domain/events.js';

const fileApp = (): AppDefinition => ({
  appId: 'app',
  accountId: 'app',
  keys: [{ keyName: 'app.root', keySecret: 's', capability: '{"*":["*"]}', management: true }],
  namespaces: [],
  source: 'file',
  createdAt: 0,
});
const made: LogEvent = { type: 'key.created', appId: 'app', key: { keyName: 'app.k2', keySecret: 'secret2', capability: '{"*":["stats"]}', name: 'analyst', created: 5, modified: 5 } };

describe('AppRegistry: key events', () => {
  it('makes, changes and revokes a key of an app from the apps file; events survive the log codec', () => {
    const r = new AppRegistry();
    r.put(fileApp());
    const events: LogEvent[] = [
      made,
      { type: 'key.updated', appId: 'app', keyName: 'app.k2', capability: '{"rooms:*":["publish"]}', revocableTokens: true, modified: 6 },
      { type: 'key.revoked', appId: 'app', keyName: 'app.root', modified: 7 },
    ];
    for (const e of events) {
      const decoded = decodeEvent(Uint8Array.from(encodeEvent(e))); // a fresh copy: decoded from the bytes
      expect(r.canHandle(decoded)).toBe(true);
      r.evolve(decoded);
    }
    expect(r.key('app.k2')?.key).toEqual({ keyName: 'app.k2', keySecret: 'secret2', capability: '{"rooms:*":["publish"]}', name: 'analyst', revocableTokens: true, created: 5, modified: 6 });
    expect(r.key('app.root')?.key).toMatchObject({ revoked: true, modified: 7 });
    expect(r.app('app')!.keys.map((k) => k.keyName)).toEqual(['app.root', 'app.k2']);
  });

  it('a repeated key.created changes nothing (the key stays as later events made it); events of an unknown app or key change nothing', () => {
    const r = new AppRegistry();
    r.put(fileApp());
    r.evolve(made);
    r.evolve({ type: 'key.updated', appId: 'app', keyName: 'app.k2', name: 'renamed', modified: 9 });
    const version = r.version;
    r.evolve(made);
    r.evolve({ type: 'key.revoked', appId: 'gone', keyName: 'gone.k', modified: 9 });
    r.evolve({ type: 'key.updated', appId: 'app', keyName: 'app.nope', name: 'x', modified: 9 });
    expect(r.version).toBe(version);
    expect(r.key('app.k2')?.key.name).toBe('renamed');
    expect(r.key('gone.k')).toBeUndefined();
  });

  it('every change moves the version, so caches of verified credentials see it', () => {
    const r = new AppRegistry();
    r.put(fileApp());
    const before = r.version;
    r.evolve({ type: 'key.revoked', appId: 'app', keyName: 'app.root', modified: 1 });
    expect(r.version).toBeGreaterThan(before);
  });
});

describe('the default app file', () => {
  it('a new one gives the root key as one name:secret string, with revocableTokens and management', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cm-default-app-'));
    const { app } = loadOrCreateDefaultApp(dir, 1);
    const file = JSON.parse(readFileSync(join(dir, 'default-app.json'), 'utf8'));
    expect(file.key).toBe(`${app.keys[0].keyName}:${app.keys[0].keySecret}`);
    expect(app.keys[0]).toMatchObject({ capability: '{"[*]*":["*"]}', revocableTokens: true, management: true });
    expect('key' in loadDefaultApp(dir)!).toBe(false);
  });

  it('an older file (no key field, a root key without revocableTokens) is brought up to date at load, the key unchanged', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cm-default-app-'));
    const old = { appId: 'old', accountId: 'acc', keys: [{ keyName: 'old.root', keySecret: 'sec', capability: '{"[*]*":["*"]}' }], namespaces: [], source: 'default', createdAt: 1 };
    writeFileSync(join(dir, 'default-app.json'), JSON.stringify(old));
    expect(loadDefaultApp(dir, { upgrade: false })!.keys[0].management).toBeUndefined();
    const app = loadDefaultApp(dir)!;
    expect(app.keys[0]).toEqual({ ...old.keys[0], revocableTokens: true, management: true });
    const file = JSON.parse(readFileSync(join(dir, 'default-app.json'), 'utf8'));
    expect(file.key).toBe('old.root:sec');
    expect(file.keys[0]).toMatchObject({ revocableTokens: true, management: true });
  });
});
