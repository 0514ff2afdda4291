// The listening service a test/sdk Realtime file runs against (one per file, in the file's mode:
// embedded or production), with the SDK clients and network relays a test opens closed after it,
// and the service after the file. The setup those files shared line for line.
import { afterAll, afterEach, beforeAll } from 'vitest';
import * as Ably from 'ably';
import { removeDir, startTestService, type TestService, listening } from './service.js';
import { Clients, NetworkCut, realtimeClient } from './realtime.js';

export class SdkSuite {
  ts!: TestService;
  port!: number;
  readonly clients = new Clients();
  private readonly cuts: NetworkCut[] = [];

  /** An SDK Realtime client to the service (or to `via`, a relay's port), closed after the test. */
  realtime(useBinaryProtocol: boolean, options: Ably.ClientOptions, via = this.port): Ably.Realtime {
    return this.clients.add(realtimeClient(via, useBinaryProtocol, options));
  }

  /** An SDK Rest client, with the service's key unless `options` give other credentials. */
  rest(useBinaryProtocol: boolean, options: Ably.ClientOptions = { key: this.ts.key }): Ably.Rest {
    return new Ably.Rest({ endpoint: '127.0.0.1', port: this.port, tls: false, useBinaryProtocol, logLevel: 0, ...options });
  }

  /** A relay to the service whose connections the test can cut, closed after the test. */
  async relay(): Promise<NetworkCut> {
    const cut = await NetworkCut.start(this.port);
    this.cuts.push(cut);
    return cut;
  }

  async afterEach(): Promise<void> {
    await this.clients.closeAll();
    for (const cut of this.cuts.splice(0)) await cut.close();
  }
}

/** Registers the file's hooks; `ready` runs once the service listens (fixtures to create). */
export function sdkSuite(env: Record<string, string> = {}, ready?: (suite: SdkSuite) => Promise<void>): SdkSuite {
  const suite = new SdkSuite();
  beforeAll(async () => {
    suite.ts = await startTestService(env);
    suite.port = await listening(suite.ts);
    await ready?.(suite);
  });
  afterEach(() => suite.afterEach());
  afterAll(async () => {
    await suite.clients.closeAll();
    await suite.ts?.close();
    if (suite.ts) removeDir(suite.ts.dataDir);
  });
  return suite;
}
