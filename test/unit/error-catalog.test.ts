import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { ErrorCodes } from '../../src/errors.js';

const catalogue = JSON.parse(readFileSync(new URL('../fixtures/ably-common-errors.json', import.meta.url), 'utf8')) as {
  codes: Record<string, unknown>;
};

describe('error catalog (spec: Errors)', () => {
  it.each(Object.entries(ErrorCodes))('%s uses a code from the public catalogue', (_kind, { code, statusCode }) => {
    expect(catalogue.codes[String(code)], `code ${code}`).toBeDefined();
    expect(statusCode).toBeGreaterThanOrEqual(400);
    expect(statusCode).toBeLessThan(600);
  });

  it('uses the spec codes for batch errors, expired tokens and missing capability', () => {
    expect(ErrorCodes.batchError).toEqual({ code: 40020, statusCode: 400 });
    expect(ErrorCodes.tokenError).toEqual({ code: 40140, statusCode: 401 });
    expect(ErrorCodes.capabilityDenied).toEqual({ code: 40160, statusCode: 401 });
  });
});
