// The official SDK's Realtime client (npm `ably` v2) renewing its token while attached with a
// narrower capability (RTC8a1): what happens to its presence members on the channels the new
// token no longer allows presence on. (Renewal itself, and the channels that fail:
// ably-realtime-auth.test.ts.)
import { describe, expect, it } from 'vitest';
import * as Ably from 'ably';
import { WIRE_FORMATS } from '../helpers/sdk.js';
import { sdkSuite } from '../helpers/sdk-suite.js';
import { uniqueChannel } from '../helpers/service.js';
import { collectPresence, within } from '../helpers/realtime.js';

const suite = sdkSuite();

describe.each(WIRE_FORMATS)('ably-js v2 Realtime client, a narrower token while present ($format)', ({ format, useBinaryProtocol }) => {
  const realtime = (options: Ably.ClientOptions): Ably.Realtime => suite.realtime(useBinaryProtocol, options);
  const rest = (): Ably.Rest => suite.rest(useBinaryProtocol);

  it('RTC8a1, RTP5a: members on channels the new capability no longer allows presence on leave (the client could not leave them itself); those on channels it allows stay', async () => {
    const keyRest = rest();
    const id = uniqueChannel();
    const [keep, lose, watch] = [`keep-${id}`, `lose-${id}`, `watch-${id}`];
    const clientId = `narrowed-${format}`;
    let capability = JSON.stringify({ 'keep-*': ['*'], 'lose-*': ['*'], 'watch-*': ['*'] });
    const client = realtime({
      authCallback: (_params, callback) => {
        keyRest.auth.requestToken({ clientId, capability }).then(
          (details) => callback(null, details),
          (err: Ably.ErrorInfo) => callback(err, null),
        );
      },
    });
    // `lose` fails (nothing allowed), `watch` stays attached for subscribe only: neither allows presence any more.
    const [keepChannel, loseChannel, watchChannel] = [client.channels.get(keep), client.channels.get(lose), client.channels.get(watch)];
    for (const channel of [keepChannel, loseChannel, watchChannel]) await channel.presence.enter('here');

    const observer = realtime({ key: suite.ts.key });
    const leaves = { [lose]: await collectPresence(observer.channels.get(lose)), [watch]: await collectPresence(observer.channels.get(watch)) };
    const present = async (channel: string): Promise<string[]> => (await keyRest.channels.get(channel).presence.get()).items.map((m) => m.clientId);
    for (const channel of [keep, lose, watch]) expect(await present(channel)).toEqual([clientId]);

    capability = JSON.stringify({ 'keep-*': ['*'], 'watch-*': ['subscribe'] });
    await client.auth.authorize();
    await within(loseChannel.whenState('failed'), 10_000, `channel ${lose} to fail`);
    expect(watchChannel.state).toBe('attached');

    for (const channel of [lose, watch]) {
      await leaves[channel].until((items) => items.some((m) => m.action === 'leave' && m.clientId === clientId), `the leave of ${clientId} on ${channel}`, 10_000);
      expect(await present(channel)).toEqual([]);
    }
    expect(await present(keep)).toEqual([clientId]);
    expect(keepChannel.state).toBe('attached');
  });
});
