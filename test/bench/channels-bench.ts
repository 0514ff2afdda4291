// Channel status and enumeration (issue 12): GET /channels over 100,000 active channels (the first
// page, and a walk of every page following `next`) and GET /channels/<id>, each beside GET /time
// in the same service and run (inject, no network: the routes' own cost). The channels are made
// active the way GET /channels/<id> makes them: a `channel.activated` event on the log each.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { parseConfig } from '../../src/config.js';
import { embeddedAdapters, startService } from '../../src/service.js';
import { Topics } from '../../src/log/port.js';
import { channelKey } from '../../src/log/partitioner.js';
import { encodeEvent } from '../../src/log/event-codec.js';

const percentile = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const ms = (n: number): string => (n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : n.toFixed(0));

export async function channelsBench(options: { channels: number; samples: number; progress: (s: string) => void }): Promise<string> {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-channels-'));
  // Long windows, so that no channel closes while the bench runs.
  // As many channels in use as it makes, and its publish channel beside them (MAX_ACTIVE_CHANNELS_PER_APP is 100,000).
  const room = String(options.channels + 10);
  const config = parseConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent', HISTORY_TAIL_MS: '900000', CHANNEL_IDLE_MS: '900000', MAX_ACTIVE_CHANNELS: room, MAX_ACTIVE_CHANNELS_PER_APP: room });
  const service = await startService(config, pino({ level: 'silent' }), embeddedAdapters(config));
  try {
    const app = service.registry.all()[0];
    const appId = app.appId;
    const auth = `Basic ${Buffer.from(`${app.keys[0].keyName}:${app.keys[0].keySecret}`).toString('base64')}`;
    const name = (i: number): string => `bench-channel-${String(i).padStart(6, '0')}`;
    const t0 = performance.now();
    for (let from = 0; from < options.channels; from += 5_000) {
      const records = [];
      for (let i = from; i < Math.min(options.channels, from + 5_000); i++) {
        const channel = name(i);
        records.push({ key: channelKey(appId, channel), build: () => encodeEvent({ type: 'channel.activated', appId, channel }) });
      }
      await service.batcher.append(Topics.connections, records);
    }
    while (!service.channels.isActive(appId, name(options.channels - 1), Date.now())) await sleep(50);
    options.progress(`  channels: ${options.channels} activated in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    // Their lifecycle events (opened, region.active: two per channel) are appended meanwhile; wait
    // until the log is quiet, so the figures are the routes'.
    let last = '';
    for (;;) {
      await sleep(1000);
      const now = JSON.stringify([...(await service.log.endOffsets(Topics.messages))]);
      if (now === last) break;
      last = now;
    }
    options.progress(`  channels: lifecycle events appended after ${((performance.now() - t0) / 1000).toFixed(1)} s`);

    const get = async (url: string): Promise<{ ms: number; body: unknown; link?: string }> => {
      const started = performance.now();
      const res = await service.app.inject({ url, headers: { authorization: auth } });
      const took = performance.now() - started;
      if (res.statusCode !== 200) throw new Error(`GET ${url} answered ${res.statusCode}: ${res.body}`);
      return { ms: took, body: res.json(), link: res.headers.link as string | undefined };
    };
    const walk = async (): Promise<{ ms: number; pages: number; channels: number }> => {
      const started = performance.now();
      let url: string | undefined = '/channels?by=id&limit=1000';
      let pages = 0;
      let channels = 0;
      while (url) {
        const page = await get(url);
        pages++;
        channels += (page.body as string[]).length;
        const next = /<\.\/channels(\?[^>]*)>; rel="next"/.exec(page.link ?? '');
        url = next ? `/channels${next[1]}` : undefined;
      }
      return { ms: performance.now() - started, pages, channels };
    };

    const rows: { what: string; times: number[]; note?: string }[] = [
      { what: 'GET /time (baseline, same service)', times: [] },
      { what: 'POST /channels/<id>/messages (one message: a durable append too)', times: [] },
      { what: 'GET /channels/<id> (status; appends its activation)', times: [] },
      { what: 'GET /channels, first page (limit 100, ChannelDetails)', times: [] },
      { what: 'GET /channels?by=id&limit=1000, every page (a full walk)', times: [] },
    ];
    let walked = { pages: 0, channels: 0 };
    for (let i = 0; i < options.samples; i++) {
      rows[0].times.push((await get('/time')).ms);
      const started = performance.now();
      const published = await service.app.inject({ method: 'POST', url: '/channels/bench-publish/messages', headers: { authorization: auth }, payload: { name: 'n', data: 'd' } });
      if (published.statusCode !== 201) throw new Error(`publish answered ${published.statusCode}: ${published.body}`);
      rows[1].times.push(performance.now() - started);
      rows[2].times.push((await get(`/channels/${name((i * 37) % options.channels)}`)).ms);
      rows[3].times.push((await get('/channels')).ms);
      if (i < Math.max(3, options.samples / 10)) {
        const w = await walk();
        rows[4].times.push(w.ms);
        walked = w;
      }
    }
    // The publish row's channel is active too.
    if (walked.channels !== options.channels + 1) throw new Error(`the walk visited ${walked.channels} channels, not ${options.channels + 1}`);
    rows[4].note = `${walked.pages} pages`;
    const base = percentile([...rows[0].times].sort((a, b) => a - b), 50);
    const lines = [
      `| ${options.channels.toLocaleString('en-US')} active channels, one app (inject) | p50 ms | p99 ms | p50 / GET /time | requests |`,
      '|---|---:|---:|---:|---:|',
    ];
    for (const r of rows) {
      const sorted = [...r.times].sort((a, b) => a - b);
      const p50 = percentile(sorted, 50);
      lines.push(`| ${r.what}${r.note ? ` (${r.note})` : ''} | ${ms(p50)} | ${ms(percentile(sorted, 99))} | ${(p50 / base).toFixed(1)} | ${sorted.length} |`);
      options.progress(`  ${r.what}: p50 ${ms(p50)} ms`);
    }
    return lines.join('\n');
  } finally {
    await service.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

// `npx tsx test/bench/channels-bench.ts`: these rows alone (BENCH_ONLY=channels in run.ts).
if (import.meta.url === `file://${process.argv[1]}`) {
  const table = await channelsBench({ channels: Number(process.env.BENCH_CHANNELS_ACTIVE ?? 100_000), samples: Number(process.env.BENCH_CHANNELS_SAMPLES ?? 100), progress: (s) => console.log(`[bench]${s}`) });
  console.log(`\n${table}\n`);
}
