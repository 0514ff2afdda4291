// Read-your-writes for keys across instances (production mode, two instances on one Kafka): a
// sandbox app (its keys) made through one instance works at once on the other, for basic
// credentials, a signed token request, a token of the new key, a JWT of it and a realtime connect
// with the key.
// Before, the other instance refused them (40400 no such app, 40101) until its apps consumer had
// applied the app.created event, a window a client that got the key from the first could fall into.
import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import { SignJWT } from 'jose';
import type { Service } from '../../src/service.js';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, productionTeardown, startProductionInstance } from '../helpers/production.js';
import { RawClient } from '../helpers/raw-realtime.js';
import { basic } from '../helpers/service.js';
import { tokenRequestMac } from '../../src/auth/tokens.js';

const infra = await findProductionInfra();
const { opened, services } = productionTeardown();
const bearer = (token: string): string => `Bearer ${Buffer.from(token).toString('base64')}`;

describeWithInfra('production mode: a key made through one instance works at once on another', 'Kafka and ClickHouse', infra, (found) => {
  it('basic credentials, a signed token request, its token, a JWT and a realtime connect: none refused', { timeout: 120_000 }, async () => {
    const isolation = { topicPrefix: `kel-${randomBytes(4).toString('hex')}-`, tablePrefix: `kel_${randomBytes(4).toString('hex')}_` };
    const start = async (instanceId: string): Promise<{ service: Service; port: number }> => {
      const started = await startProductionInstance(found, { appId: 'kelapp', key: 'kelapp.k1:kel-secret-kel-secret', instanceId, isolation, env: { SANDBOX: '1' } });
      services.push(started.service);
      return started;
    };
    const a = await start('kel-a');
    const b = await start('kel-b');
    const make = async (): Promise<{ keyName: string; keyStr: string }> => {
      const created = await a.service.app.inject({ method: 'POST', url: '/apps', payload: { keys: [{}] } });
      expect(created.statusCode).toBe(201);
      return created.json().keys[0] as { keyName: string; keyStr: string };
    };
    const json = { 'content-type': 'application/json' };

    for (let round = 0; round < 3; round++) {
      const viaBasic = await make();
      const read = await b.service.app.inject({ url: '/channels/kel-room/messages', headers: { authorization: basic(viaBasic.keyStr) } });
      expect(read.statusCode, read.body).toBe(200);

      const viaSigned = await make();
      const secret = viaSigned.keyStr.slice(viaSigned.keyStr.indexOf(':') + 1);
      const req: Record<string, unknown> = { keyName: viaSigned.keyName, timestamp: Date.now(), nonce: randomBytes(16).toString('hex') };
      req.mac = tokenRequestMac(secret, req);
      const issued = await b.service.app.inject({ method: 'POST', url: `/keys/${viaSigned.keyName}/requestToken`, headers: json, payload: req });
      expect(issued.statusCode, issued.body).toBe(200);

      // A token issued by a (it knows the key) and used at once on b.
      const viaToken = await make();
      const token = await a.service.app.inject({ method: 'POST', url: `/keys/${viaToken.keyName}/requestToken`, headers: { ...json, authorization: basic(viaToken.keyStr) }, payload: { keyName: viaToken.keyName, timestamp: Date.now() } });
      expect(token.statusCode, token.body).toBe(200);
      const withToken = await b.service.app.inject({ url: '/channels/kel-room/messages', headers: { authorization: bearer(token.json().token as string) } });
      expect(withToken.statusCode, withToken.body).toBe(200);

      // A JWT signed by the app's server with the new key's secret, used at once on b.
      const viaJwt = await make();
      const jwt = await new SignJWT({}).setProtectedHeader({ alg: 'HS256', typ: 'JWT', kid: viaJwt.keyName }).setIssuedAt().setExpirationTime('1h').sign(new TextEncoder().encode(viaJwt.keyStr.slice(viaJwt.keyStr.indexOf(':') + 1)));
      const withJwt = await b.service.app.inject({ url: '/channels/kel-room/messages', headers: { authorization: bearer(jwt) } });
      expect(withJwt.statusCode, withJwt.body).toBe(200);

      const viaRealtime = await make();
      const client = await RawClient.connect(b.port, { key: viaRealtime.keyStr });
      opened.push({ close: () => client.ws.close() });
    }
  });
});
