import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { embeddedAdapters } from '../../src/service.js';
import { parseConfig } from '../../src/config.js';
import type { Piece } from '../../projections/stats/rollups.js';
import { startTestService, type TestService } from '../helpers/service.js';

// The soak's stats read (GET /stats?unit=minute&limit=10) on a service with a few minutes of
// samples: the page is short of data, and its window used to widen twelve times back to 1970,
// each query reading every sample again, so a stats read cost more the longer the service ran.
// The stats cache is off here (STATS_CACHE_ROWS=0): every page reads the store, as a first read does.
const T0 = Date.UTC(2030, 0, 15, 10, 20, 0);
let now = T0;
/** The store's reads: the pieces of each. */
const queries: Piece[][] = [];
/** The earliest time a read asks for. */
const earliest = (pieces: Piece[]): number => Math.min(...pieces.map((p) => p.from));
let oldestAsked = 0;
let t: TestService;

beforeAll(async () => {
  t = await startTestService(
    { STATS_CACHE_ROWS: '0' },
    {
      clock: { now: () => now },
      adapters: (dataDir) => {
        const adapters = embeddedAdapters(parseConfig({ DATA_DIR: dataDir, SANDBOX: '1', LOG_LEVEL: 'silent' }));
        const store = adapters.statsStore;
        const read = store.readPieces.bind(store);
        store.readPieces = (appId, pieces) => (queries.push(pieces), read(appId, pieces));
        const oldest = store.oldestInterval!.bind(store);
        store.oldestInterval = (appId) => (oldestAsked++, oldest(appId));
        return adapters;
      },
    },
  );
});
afterAll(() => t.close());

describe('GET /stats on data younger than the page', () => {
  it('reads the store once, a window of a page wide (not back to 1970), and still returns every bucket', async () => {
    for (let minute = 0; minute < 3; minute++) {
      now = T0 + minute * 60_000 + 1000;
      const res = await t.service.app.inject({
        method: 'POST',
        url: '/channels/young/messages',
        headers: { authorization: t.auth, 'content-type': 'application/json' },
        payload: { data: 'x' },
      });
      expect(res.statusCode).toBe(201);
    }
    now = T0 + 3 * 60_000;
    await t.service.usage.flush();
    await new Promise((r) => setImmediate(r));
    await t.service.stats.flush();

    queries.length = 0;
    oldestAsked = 0;
    const res = await t.service.app.inject({ url: '/stats?unit=minute&limit=10', headers: { authorization: t.auth } });
    expect(res.statusCode).toBe(200);
    expect(res.json().map((r: { intervalId: string }) => r.intervalId)).toEqual(['2030-01-15:10:22', '2030-01-15:10:21', '2030-01-15:10:20']);
    // The page's window (11 minutes) is short of data; the oldest sample says there is no more.
    expect(queries).toHaveLength(1);
    expect(earliest(queries[0])).toBeGreaterThanOrEqual(now - 12 * 60_000);
    expect(oldestAsked).toBe(1);

    // A page the data fills: one read, and the oldest sample is not asked for.
    queries.length = 0;
    oldestAsked = 0;
    const full = await t.service.app.inject({ url: '/stats?unit=minute&limit=2', headers: { authorization: t.auth } });
    expect(full.json().map((r: { intervalId: string }) => r.intervalId)).toEqual(['2030-01-15:10:22', '2030-01-15:10:21']);
    expect(queries).toHaveLength(1);
    expect(oldestAsked).toBe(0);

    // Forwards from the epoch: the first window starts at the oldest sample, not in 1970.
    queries.length = 0;
    const fwd = await t.service.app.inject({ url: '/stats?unit=minute&limit=2&direction=forwards', headers: { authorization: t.auth } });
    expect(fwd.json().map((r: { intervalId: string }) => r.intervalId)).toEqual(['2030-01-15:10:20', '2030-01-15:10:21']);
    expect(queries).toHaveLength(1);
  });
});
