import { ServiceError } from '../errors.js';

// The `rewind` channel param (REALTIME-PROTOCOL.md §4: ATTACH params): on a clean attach, the
// channel's most recent messages are sent before the live ones, either the last N (1 to 100) or
// those of the last T seconds or minutes (at most 2 minutes, the in-memory history window).

export type Rewind = { count: number } | { sinceMs: number };

export const MAX_REWIND_COUNT = 100;
export const MAX_REWIND_MS = 120_000;

/** The rewind a param asks for, undefined when it asks none; a ServiceError (40003) when it is not one. */
export function parseRewind(value: unknown): Rewind | undefined {
  if (value === undefined) return undefined;
  const text = typeof value === 'string' ? value : typeof value === 'number' ? String(value) : undefined;
  const count = text !== undefined && /^\d{1,6}$/.test(text) ? Number(text) : undefined;
  if (count !== undefined && count >= 1 && count <= MAX_REWIND_COUNT) return { count };
  const time = text !== undefined ? /^(\d{1,6})(s|m)$/.exec(text) : null;
  if (time) {
    const sinceMs = Number(time[1]) * (time[2] === 's' ? 1000 : 60_000);
    if (sinceMs >= 1000 && sinceMs <= MAX_REWIND_MS) return { sinceMs };
  }
  throw new ServiceError(
    'invalidParameterValue',
    `rewind must be a number of messages from 1 to ${MAX_REWIND_COUNT} or a time such as "30s" or "2m" of at most ${MAX_REWIND_MS / 1000} s`,
  );
}
