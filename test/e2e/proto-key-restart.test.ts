// A log holding a publish with a map key "__proto__" (realtime JSON frames let such keys in, ACKed,
// until they were refused): the shared MessagePack decoder refuses the key, and every projection
// retried the record for ever, so the service never started again on that log. It now reads the
// key as an own property, as JSON.parse does: the service starts, and history answers with the
// message as it was accepted.
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { basic, removeDir, startTestService, type TestService } from '../helpers/service.js';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { Topics } from '../../src/log/port.js';
import type { LogEvent } from '../../src/domain/events.js';

describe('a log holding a record with a "__proto__" key', () => {
  it('the service starts on it, and history answers with the message, the key an own property', { timeout: 60_000 }, async () => {
    let t: TestService = await startTestService({ EMBEDDED_PARTITIONS: '1' });
    const appId = t.key.split('.')[0];
    try {
      await t.close();
      // as the publisher built it from the frame {"messages":[{"name":"p","data":{"a":{"__proto__":[1]}}}]}
      const poisoned = JSON.parse(
        `{"type":"messages.published","appId":"${appId}","channel":"persisted:proto","transport":"realtime","messages":[{"id":"x:0","timestamp":${Date.now()},"name":"p","data":{"a":{"__proto__":[1]}}}]}`,
      ) as LogEvent;
      const log = new EmbeddedLog({ path: join(t.dataDir, 'log.db'), partitions: 1 });
      await log.append(Topics.messages, [{ key: `${appId}:persisted:proto`, timestamp: Date.now(), value: encodeEvent(poisoned).slice() }]);
      await log.close();

      const started = t.restart();
      const late = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the service did not start within 20 s on a log holding the record')), 20_000));
      t = await Promise.race([started, late]);
      const res = await t.service.app.inject({ url: '/channels/persisted:proto/messages', headers: { authorization: basic(t.key) } });
      expect(res.statusCode, res.body).toBe(200);
      const [message] = res.json() as { name: string; data: unknown }[];
      expect(message.name).toBe('p');
      expect(JSON.stringify(message.data)).toBe('{"a":{"__proto__":[1]}}');
      expect(Object.getPrototypeOf((message.data as { a: object }).a)).toBe(Object.prototype);
    } finally {
      await t.close();
      removeDir(t.dataDir);
    }
  });
});
