// Every route of the service (src/routes/*, README "The REST interface"), plus wrong methods and
// unknown paths, each as an arbitrary of whole requests: method, mis-encodable path, query,
// headers (credentials good and bad) and a body fit for the route or hostile to it.
import fc from 'fast-check';
import { bodiesOf, headersArb, messageBodies, queryString, segment, type Body, type Credentials } from './arbitraries.js';
import type { FuzzRequest } from './http-client.js';
import { DEFAULT_LIMITS } from '../../src/limits.js';

export interface FuzzRoute {
  label: string;
  request: fc.Arbitrary<FuzzRequest>;
}

const text = fc.string({ unit: 'grapheme', maxLength: 30 });

/** A channel segment: mostly a usable name (so requests get past the name check), often not. */
const channelSegment = fc.oneof({ weight: 2, arbitrary: fc.stringMatching(/^fuzz-[a-z0-9]{1,8}$/) }, { weight: 3, arbitrary: segment });

function build(method: string, path: string, query: string, headers: Record<string, string>, body?: Body): FuzzRequest {
  const h = { ...headers };
  if (body?.contentType !== undefined) h['content-type'] = body.contentType;
  return { method, target: path + query, headers: h, body: body?.bytes, label: body?.label, mustRefuse: body?.mustRefuse };
}

export function fuzzRoutes(c: Credentials, now: number, deletableAppId: string): FuzzRoute[] {
  const headers = headersArb(c);
  const req = (method: string, path: fc.Arbitrary<string>, body?: fc.Arbitrary<Body>): fc.Arbitrary<FuzzRequest> =>
    fc.tuple(path, queryString, headers, body ?? fc.constant(undefined)).map(([p, q, h, b]) => build(method, p, q, h, b));
  const channelPath = (suffix: string): fc.Arbitrary<string> => channelSegment.map((ch) => `/channels/${ch}${suffix}`);

  const tokenRequest = fc.record(
    {
      keyName: fc.oneof(fc.constant(c.keyName), text),
      timestamp: fc.oneof(fc.constant(now), fc.integer(), fc.constantFrom(now - 3600_000, now + 3600_000, 1e20), text),
      ttl: fc.oneof(fc.constantFrom(0, -1, 1, 3600_000, 86_400_001, 1e20), text),
      capability: fc.oneof(fc.constantFrom('{"*":["*"]}', '{"a":["publish"]}', '{}', '{"*":[]}', '[', '{"*":"*"}'), fc.jsonValue({ maxDepth: 3 }), text),
      clientId: fc.oneof(text, fc.constantFrom('', '*', null)),
      nonce: fc.oneof(fc.stringMatching(/^[a-z0-9]{16,24}$/), text),
      mac: fc.oneof(fc.base64String({ maxLength: 44 }), text),
    },
    { requiredKeys: [] },
  );

  const channelName = fc.oneof(fc.stringMatching(/^fuzz-[a-z0-9]{1,6}$/), text, fc.constantFrom('', '[meta]x', '[foo]x', ':x', 'x'.repeat(2100)));
  const batchSpec = fc.record(
    {
      channels: fc.oneof(channelName, fc.array(channelName, { maxLength: 6 }), fc.integer({ min: 90, max: 130 }).map((n) => Array.from({ length: n }, (_, i) => `fuzz-b${i}`)), fc.jsonValue({ maxDepth: 2 })),
      messages: fc.oneof(
        fc.record({ name: text, data: text }, { requiredKeys: [] }),
        fc.array(fc.record({ name: text, data: fc.oneof(text, fc.jsonValue({ maxDepth: 2 })) }), { maxLength: 5 }),
        fc.jsonValue({ maxDepth: 2 }),
      ),
    },
    { requiredKeys: [] },
  );
  const batchBody = fc.oneof(
    { weight: 4, arbitrary: batchSpec },
    { weight: 4, arbitrary: fc.array(batchSpec, { maxLength: 6 }) },
    // Many specs to one channel, within the limit.
    { weight: 1, arbitrary: fc.integer({ min: 100, max: 3000 }).map((n) => Array.from({ length: n }, () => ({ channels: 'fuzz-many', messages: { data: 'x' } }))) },
  );
  // Above the limit on messages per batch: must be refused before anything is published.
  const overLimitBatch: fc.Arbitrary<Body> = fc.integer({ min: DEFAULT_LIMITS.maxBatchMessages + 1, max: DEFAULT_LIMITS.maxBatchMessages + 3000 }).map((n) => ({
    contentType: 'application/json',
    bytes: Buffer.from(JSON.stringify(Array.from({ length: n }, () => ({ channels: 'fuzz-over', messages: { data: 'x' } })))),
    label: `${n} BatchSpecs of one message to one channel`,
    mustRefuse: `a batch holds more messages than maxBatchMessages (${DEFAULT_LIMITS.maxBatchMessages})`,
  }));

  const appSetup = fc.record(
    {
      keys: fc.oneof(fc.array(fc.record({ capability: fc.oneof(fc.constantFrom('{"*":["*"]}', '{"x":["publish"]}', '{'), fc.jsonValue({ maxDepth: 2 })) }, { requiredKeys: [] }), { maxLength: 3 }), fc.jsonValue({ maxDepth: 2 })),
      namespaces: fc.oneof(fc.array(fc.record({ id: text, persisted: fc.boolean(), retentionHours: fc.oneof(fc.integer({ min: 0, max: 100 }), text) }, { requiredKeys: [] }), { maxLength: 3 }), fc.jsonValue({ maxDepth: 2 })),
      channels: fc.oneof(
        fc.array(
          fc.record(
            {
              name: channelName,
              presence: fc.array(fc.record({ clientId: text, data: fc.oneof(text, fc.jsonValue({ maxDepth: 3 })) }, { requiredKeys: [] }), { maxLength: 3 }),
            },
            { requiredKeys: [] },
          ),
          { maxLength: 3 },
        ),
        fc.jsonValue({ maxDepth: 2 }),
      ),
    },
    { requiredKeys: [] },
  );

  const statsFixtures = fc.array(
    fc.record(
      {
        intervalId: fc.oneof(fc.constantFrom('2024-01-31:23:59', '2024-01-31:23', '2024-01-31', '2024-01', '2024-13-99:99:99', ''), text),
        inbound: fc.oneof(fc.record({ all: fc.record({ messages: fc.record({ count: fc.oneof(fc.integer(), fc.double(), text), data: fc.integer() }) }) }), fc.jsonValue({ maxDepth: 3 })),
        channels: fc.jsonValue({ maxDepth: 2 }),
      },
      { requiredKeys: [] },
    ),
    { maxLength: 4 },
  );

  const revocation = fc.record(
    {
      targets: fc.oneof(
        fc.array(fc.oneof(fc.constantFrom('clientId:fuzz', 'revocationKey:k', 'channel:c', 'bad:x', 'nocolon', 'clientId:'), text), { maxLength: 5 }),
        fc.integer({ min: 95, max: 110 }).map((n) => Array.from({ length: n }, (_, i) => `clientId:c${i}`)),
        fc.jsonValue({ maxDepth: 2 }),
      ),
      issuedBefore: fc.oneof(fc.constantFrom(now, now - 3600_001, now + 60_000, 1e20, -1), fc.integer(), text),
      allowReauthMargin: fc.oneof(fc.boolean(), text),
    },
    { requiredKeys: [] },
  );

  const anyMethod = fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS');
  const knownPaths = fc.oneof(
    channelPath('/messages'),
    channelPath('/presence'),
    channelPath('/presence/history'),
    channelPath(''),
    fc.constantFrom('/channels', '/messages', '/presence', '/stats', '/time', '/dashboard', '/console', '/apps', `/keys/${c.keyName}/requestToken`, `/keys/${c.keyName}/revokeTokens`, `/apps/${deletableAppId}-not`),
  );
  const wrongMethod = fc
    .tuple(knownPaths, fc.constantFrom('PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'), queryString, headers, messageBodies)
    .map(([p, m, q, h, b]) => build(m, p, q, h, m === 'HEAD' ? undefined : b));
  const unknownPath = fc
    .tuple(fc.array(segment, { minLength: 0, maxLength: 4 }), anyMethod, queryString, headers)
    .map(([segs, m, q, h]) => build(m, `/${segs.join('/')}`, q, h));

  return [
    { label: 'POST /channels/:id/messages', request: req('POST', channelPath('/messages'), messageBodies) },
    { label: 'GET /channels/:id/messages', request: req('GET', channelPath('/messages')) },
    { label: 'GET /channels/:id/presence', request: req('GET', channelPath('/presence')) },
    { label: 'GET /channels/:id/presence/history', request: req('GET', channelPath('/presence/history')) },
    {
      label: 'POST /keys/:keyName/requestToken',
      request: req('POST', fc.oneof(fc.constant(c.keyName), segment).map((k) => `/keys/${k}/requestToken`), bodiesOf(tokenRequest, [{ wrap: (n) => `{"keyName":"${c.keyName}","timestamp":${now},"capability":${n}}` }, { wrap: (n) => n }])),
    },
    {
      label: 'POST /keys/:keyName/revokeTokens',
      request: req('POST', fc.oneof(fc.constant(c.keyName), segment).map((k) => `/keys/${k}/revokeTokens`), bodiesOf(revocation, [{ wrap: (n) => `{"targets":${n}}` }, { wrap: (n) => `{"targets":["clientId:a"],"issuedBefore":${n}}` }, { wrap: (n) => n }])),
    },
    {
      label: 'POST /messages',
      request: req('POST', fc.constant('/messages'), fc.oneof({ weight: 30, arbitrary: bodiesOf(batchBody, [{ wrap: (n) => `{"channels":"fuzz-deep","messages":{"data":${n}}}` }, { wrap: (n) => `[{"channels":["a","b"],"messages":[{"extras":{"push":${n}}}]}]` }, { wrap: (n) => `{"channels":${n},"messages":{}}` }]) }, { weight: 1, arbitrary: overLimitBatch })),
    },
    {
      // Batch presence needs its channel list; most inputs carry one, so they reach the route's own work.
      label: 'GET /presence',
      request: fc
        .tuple(fc.array(channelSegment, { minLength: 1, maxLength: 5 }), fc.constantFrom(',', '%2C', '|', ''), queryString, headers)
        .map(([names, sep, q, h]) => build('GET', '/presence', `?channel=${names.join(sep === '' ? ',' : sep)}${sep === '|' ? '&separator=|' : ''}${q.replace('?', '&')}`, h)),
    },
    { label: 'GET /channels/:id', request: req('GET', channelPath('')) },
    { label: 'GET /channels', request: req('GET', fc.constant('/channels')) },
    { label: 'GET /stats', request: req('GET', fc.constant('/stats')) },
    {
      label: 'POST /stats (sandbox)',
      request: req('POST', fc.constant('/stats'), bodiesOf(statsFixtures, [{ wrap: (n) => `[{"intervalId":"2024-01-31:23:59","inbound":${n}}]` }, { wrap: (n) => n }])),
    },
    { label: 'GET /time', request: req('GET', fc.constant('/time')) },
    { label: 'GET /dashboard', request: req('GET', fc.constant('/dashboard')) },
    { label: 'GET /dashboard/assets/:file', request: req('GET', segment.map((f) => `/dashboard/assets/${f}`)) },
    { label: 'GET /console', request: req('GET', fc.constant('/console')) },
    { label: 'GET /console/assets/:file', request: req('GET', segment.map((f) => `/console/assets/${f}`)) },
    {
      label: 'POST /apps (sandbox)',
      request: req('POST', fc.constant('/apps'), bodiesOf(appSetup, [{ wrap: (n) => `{"channels":[{"name":"c","presence":[{"clientId":"a","data":${n}}]}]}` }, { wrap: (n) => `{"keys":[{"capability":${n}}]}` }, { wrap: (n) => `{"namespaces":${n}}` }])),
    },
    { label: 'DELETE /apps/:appId', request: req('DELETE', fc.oneof(fc.constant(deletableAppId), segment).map((a) => `/apps/${a}`)) },
    { label: 'wrong methods', request: wrongMethod },
    { label: 'unknown routes', request: unknownPath },
  ];
}
