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
