// The publisher's records in the layout the audit replay's transcoder is fastest on
// (src/log/event-codec.ts): the messages last, after the fields that are the same for every
// publish of a channel by one key (type, app, channel, transport, clientIds, keyName), which the
// transcoder copies whole from the publish before (test/bench/replay-audit.ts measures records of
// this layout). Records of older logs, with keyName after the messages, replay the same, slower.
import { describe, expect, it } from 'vitest';
import { basic, removeDir, startTestService } from '../helpers/service.js';
import { unpackValue } from '../../src/codec/msgpack.js';

describe("the publisher's records (the layout the audit replay reads fastest)", () => {
  it('keep the messages last, after the key name and clientIds, for REST, batch and idempotent publishes', async () => {
    const t = await startTestService({});
    try {
      const inject = (url: string, payload: unknown) =>
        t.service.app.inject({ method: 'POST', url, headers: { authorization: basic(t.key), 'content-type': 'application/json' }, payload: JSON.stringify(payload) });
      expect((await inject('/channels/layout/messages', { name: 'plain', data: 'x' })).statusCode).toBe(201);
      expect((await inject('/channels/layout/messages', { id: 'own-id', name: 'idempotent', data: 'y' })).statusCode).toBe(201);
      expect((await inject('/messages', { channels: ['layout'], messages: { name: 'batch', data: 'z' } })).statusCode).toBe(201);
      const records = [];
      for (const [partition, end] of await t.service.log.endOffsets('messages')) records.push(...(await t.service.log.read('messages', partition, 0, end)));
      const layouts = records.map((r) => Object.keys(unpackValue(r.value) as object));
      expect(layouts).toEqual([
        ['type', 'appId', 'channel', 'transport', 'keyName', 'messages'],
        ['type', 'appId', 'channel', 'transport', 'clientIds', 'keyName', 'messages'],
        ['type', 'appId', 'channel', 'transport', 'keyName', 'messages'],
      ]);
    } finally {
      await t.close();
      removeDir(t.dataDir);
    }
  });
});
