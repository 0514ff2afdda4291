import { ServiceError } from '../errors.js';

export const MAX_LIMIT = 1000;
export const DEFAULT_LIMIT = 100;

/** A whole number written as it is held: past 2^53 the number read is not the one written (and Links would carry another). */
const isIntString = (v: unknown): v is string => typeof v === 'string' && /^-?\d{1,16}$/.test(v) && Number.isSafeInteger(Number(v));

/** A time parameter in ms since the epoch (spec: start / end). */
export function timeParam(query: Record<string, unknown>, name: string): number | undefined {
  const v = query[name];
  if (v === undefined || v === '') return undefined;
  if (!isIntString(v)) throw new ServiceError('invalidParameterValue', `${name} must be a whole number of milliseconds since the epoch`);
  return Number(v);
}

/** `limit`: default 100; above 1000 is invalid (spec: Limits). */
export function limitParam(query: Record<string, unknown>): number {
  const v = query.limit;
  if (v === undefined || v === '') return DEFAULT_LIMIT;
  if (!isIntString(v) || Number(v) < 1) throw new ServiceError('invalidParameterValue', 'limit must be a whole number from 1 to 1000');
  const n = Number(v);
  if (n > MAX_LIMIT) throw new ServiceError('invalidParameterValue', `limit ${n} is above the maximum of ${MAX_LIMIT}`);
  return n;
}

export function directionParam(query: Record<string, unknown>): 'forwards' | 'backwards' {
  const v = query.direction;
  if (v === undefined || v === '') return 'backwards';
  if (v !== 'forwards' && v !== 'backwards') throw new ServiceError('invalidParameterValue', 'direction must be "forwards" or "backwards"');
  return v;
}

export function integerParam(query: Record<string, unknown>, name: string): number | undefined {
  const v = query[name];
  if (v === undefined || v === '') return undefined;
  if (!isIntString(v)) throw new ServiceError('invalidParameterValue', `${name} must be a whole number`);
  return Number(v);
}
