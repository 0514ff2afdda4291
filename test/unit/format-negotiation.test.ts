import { describe, expect, it } from 'vitest';
import { negotiateFormat } from '../../src/http/format.js';
import { resolveVersion } from '../../src/http/version.js';

describe('response format (spec: Common behaviour)', () => {
  it('defaults to JSON', () => expect(negotiateFormat(undefined, undefined)).toBe('json'));
  it('the format parameter selects json, jsonp, msgpack or html', () => {
    expect(negotiateFormat(undefined, 'msgpack')).toBe('msgpack');
    expect(negotiateFormat(undefined, 'html')).toBe('html');
    expect(negotiateFormat(undefined, 'jsonp')).toBe('jsonp');
  });
  it('Accept wins over the format parameter', () => {
    expect(negotiateFormat('application/x-msgpack', 'json')).toBe('msgpack');
    expect(negotiateFormat('text/html,application/xhtml+xml;q=0.9', 'json')).toBe('html');
  });
  it('a wildcard Accept leaves the choice to the format parameter', () => {
    expect(negotiateFormat('*/*', 'msgpack')).toBe('msgpack');
  });
  it('an unknown format value is a 400', () => {
    expect(() => negotiateFormat(undefined, 'xml')).toThrowError(expect.objectContaining({ code: 40003 }));
  });
  it("names of Object's own properties are no formats: an Accept of __proto__ is no preference, a format parameter of constructor a 400", () => {
    // Before, they found Object.prototype and Object, and replies went out as application/octet-stream (fuzz finding, seed 4242).
    for (const name of ['__proto__', 'constructor', 'hasOwnProperty']) {
      expect(negotiateFormat(name, undefined)).toBe('json');
      expect(negotiateFormat(`${name}, application/x-msgpack;q=0.5`, undefined)).toBe('msgpack');
      expect(() => negotiateFormat(undefined, name)).toThrowError(expect.objectContaining({ code: 40003 }));
    }
  });
});

describe('versions (spec: Versioning)', () => {
  it('a request with no version gets 0.8, the spec form', () => {
    expect(resolveVersion(undefined, undefined)).toEqual({ value: '0.8', modern: false, batchResults: false });
  });
  it('the SDK protocol versions select the newer shapes', () => {
    expect(resolveVersion('6', undefined).modern).toBe(true);
    expect(resolveVersion(undefined, '2').modern).toBe(true);
    expect(resolveVersion('1.2', undefined).modern).toBe(false);
  });
  it('an unknown version is refused with 40017', () => {
    expect(() => resolveVersion('99', undefined)).toThrowError(expect.objectContaining({ code: 40017, statusCode: 400 }));
  });
});
