// Capability resources on the realtime interface (spec: Authentication rules 5 and 6): an ATTACH
// to a metachannel is granted only by a resource that starts with `[meta]` (or by `[*]*`); a
// prefix of `[meta]` (`[*`, `[me*`, `[meta*`) reaches none, as on the platform.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/errors.js';
import { Actions, RawClient } from '../helpers/raw-realtime.js';
import { listening, removeDir, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';

let ts: TestService;
let port: number;
let keys: string[];
const clients: RawClient[] = [];

beforeAll(async () => {
  ts = await startTestService();
  port = await listening(ts);
  const made = await fetch(`http://127.0.0.1:${port}/apps`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      keys: [
        { capability: JSON.stringify({ '[*': ['subscribe'], '[me*': ['subscribe'], '[meta*': ['subscribe'], '*': ['subscribe'] }) },
        { capability: JSON.stringify({ '[meta]*': ['subscribe'] }) },
        { capability: JSON.stringify({ '[*]*': ['subscribe'] }) },
      ],
    }),
  });
  keys = ((await made.json()) as { keys: { keyStr: string }[] }).keys.map((k) => k.keyStr);
});
afterAll(async () => {
  for (const c of clients) c.close();
  await ts?.close();
  if (ts) removeDir(ts.dataDir);
});

const connect = async (key: string): Promise<RawClient> => {
  const c = await RawClient.connect(port, { key });
  clients.push(c);
  return c;
};

describe('capability resources on ATTACH (spec: Authentication rules 5 and 6)', () => {
  it('[*, [me* and [meta* grant no metachannel: the ATTACH is refused with 40160', async () => {
    const c = await connect(keys[0]);
    for (const channel of ['[meta]channel.lifecycle', '[meta]log']) {
      const answer = await c.attach(channel);
      expect(answer.action, channel).toBe(Actions.ERROR);
      expect((answer.error as { code: number }).code, channel).toBe(ErrorCodes.capabilityDenied.code);
    }
    expect((await c.attach(uniqueChannel('cap-regular'))).action).toBe(Actions.ATTACHED);
  });

  it('[meta]* and [*]* grant the metachannel', async () => {
    for (const key of [keys[1], keys[2]]) {
      const c = await connect(key);
      expect((await c.attach('[meta]channel.lifecycle')).action).toBe(Actions.ATTACHED);
    }
  });
});
