// Setting APPS_FILE on a DATA_DIR used before (issue 24 item 2): the default app of DATA_DIR is
// kept, with a warning, so its key, history and stats stay reachable; an app with data that the
// file leaves out is named in a warning at start.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { basic, removeDir, startTestService, testServiceMode, type TestService } from '../helpers/service.js';
import { until } from '../faults/publish-load.js';

const dataDir = mkdtempSync(join(tmpdir(), 'cm-apps-file-'));
const appsFile = join(dataDir, 'apps.json');
let t: TestService | undefined;
afterAll(async () => {
  await t?.close();
  removeDir(dataDir);
});

/** A logger whose warnings are kept. */
function warnings(): { logger: pino.Logger; lines: { msg: string; appId?: string }[] } {
  const lines: { msg: string; appId?: string }[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}

const publish = (key: string) =>
  t!.service.app.inject({ method: 'POST', url: '/channels/kept/messages', headers: { authorization: basic(key), 'content-type': 'application/json' }, payload: { name: 'n' } });
const history = (key: string) => t!.service.app.inject({ url: '/channels/kept/messages', headers: { authorization: basic(key) } });

describe('APPS_FILE on a DATA_DIR used before', () => {
  it('keeps the default app (its key and its history), with a warning; warns of an app with data the file leaves out', async () => {
    t = await startTestService({}, { dataDir });
    const defaultKey = t.key;
    const defaultApp = defaultKey.split('.')[0];
    expect((await publish(defaultKey)).statusCode).toBe(201);

    // Restarts of the same service: in production mode its topics and tables are kept too.
    writeFileSync(appsFile, JSON.stringify({ apps: [{ appId: 'alpha', keys: [{ key: 'alpha.k:alpha-secret' }] }, { appId: 'beta', keys: [{ key: 'beta.k:beta-secret' }] }] }));
    let log = warnings();
    t = await t.restart({ env: { APPS_FILE: appsFile }, logger: log.logger });
    const kept = log.lines.find((l) => l.appId === defaultApp);
    expect(kept?.msg).toMatch(/APPS_FILE is set and DATA_DIR holds the default app .* kept/);
    expect((await history(defaultKey)).json()).toHaveLength(1);
    expect((await publish('beta.k:beta-secret')).statusCode).toBe(201);

    // The restart comes right after the publish: the log has it, the stats store maybe not yet (in
    // production mode the shared stats writers and the roller write it a while after, once their
    // groups formed). The check waits for the stats writers to have written what the log held at
    // the start, so it sees beta (it read the rollups at once and missed it).
    writeFileSync(appsFile, JSON.stringify({ apps: [{ appId: 'alpha', keys: [{ key: 'alpha.k:alpha-secret' }] }] }));
    log = warnings();
    t = await t.restart({ env: { APPS_FILE: appsFile }, logger: log.logger });
    const lines = log.lines;
    await until('the start\'s check of the apps with data', () => lines.some((l) => /apps with data (checked|not checked)/.test(l.msg)), 60_000);
    const leftOut = log.lines.filter((l) => /not in APPS_FILE/.test(l.msg));
    expect(leftOut.map((l) => l.appId)).toEqual(['beta']);
    expect(leftOut[0].msg).toContain('app "beta" has data here');
    expect((await publish('beta.k:beta-secret')).json().error.code).toBe(40400); // an app this service no longer has
    expect((await publish(defaultKey)).statusCode).toBe(201);
    // Three starts: in production mode each joins the consumer groups the one before it left (seconds each).
  }, testServiceMode === 'production' ? 120_000 : 30_000);
});
