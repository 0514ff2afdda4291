// The html format (spec: Common behaviour): a page a person can read, its size in proportion to
// the value's. Indented JSON puts every leaf on a line of its own, as far in as it is deep: an
// envelope of a page of data nested 28 deep grew 32 times (review finding: 100 messages, 202 MB
// and 3.5 s; 1,000 would pass the longest string there is, and answer 500).
import { describe, expect, it } from 'vitest';
import { MAX_HTML_JSON, MAX_INDENTED_JSON, renderHtml } from '../../src/http/html.js';

const nested = (depth: number, leaves: number): unknown => (depth === 0 ? Array(leaves).fill(0) : [nested(depth - 1, leaves)]);

describe('html format', () => {
  it('a small value that is not a list of records is shown as indented JSON, escaped', () => {
    const page = renderHtml('GET /x', { statusCode: 200, response: { name: '<b>' } });
    expect(page).toContain('<pre>{\n  &quot;statusCode&quot;: 200,\n  &quot;response&quot;: {\n    &quot;name&quot;: &quot;&lt;b&gt;&quot;');
  });

  it('a large value is shown as it is: the page stays in proportion to its JSON', () => {
    const envelope = { statusCode: 200, response: Array.from({ length: 8 }, () => ({ data: nested(28, 31_000) })) };
    const json = JSON.stringify(envelope);
    expect(json.length).toBeGreaterThan(MAX_INDENTED_JSON);
    const page = renderHtml('GET /channels/x/messages', envelope);
    expect(page.length).toBeLessThan(json.length + 2_000);
    expect(page).toContain(`<pre>{&quot;statusCode&quot;:200`);
  });
});

describe('html format, a large page', () => {
  it(`more than ${MAX_HTML_JSON} characters of JSON is refused with 40003 (escaped, a page of quotes grew 7 times, 455 M characters in 8 s)`, () => {
    const rows = (n: number) => Array.from({ length: n }, (_, i) => ({ id: `id${i}:0`, timestamp: 1, data: { q: '"'.repeat(60_000) } }));
    expect(() => renderHtml('GET /channels/x/messages', rows(40))).toThrowError(expect.objectContaining({ code: 40003, statusCode: 400 }));
    // Within: a table, escaped.
    const page = renderHtml('GET /channels/x/messages', rows(2));
    expect(page).toContain('<td><code>{&quot;q&quot;:&quot;\\&quot;');
  });
});
