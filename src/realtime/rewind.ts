import { ServiceError } from '../errors.js';

// The `rewind` channel param (REALTIME-PROTOCOL.md §4: ATTACH params): on a clean attach, the
// channel's most recent messages are sent before the live ones, either the last N or those of the
// last T seconds, minutes or hours. What asks past what a channel holds for rewind (100 messages,
// 2 minutes: the in-memory history window) is capped there, as the platform caps it, not refused;
// a window sends at most 100 messages too, its newest.

export type Rewind = { count: number } | { sinceMs: number };

export const MAX_REWIND_COUNT = 100;
export const MAX_REWIND_MS = 120_000;

const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3600_000 };

/** The rewind a param asks for (capped), undefined when it asks none; a ServiceError (40003) when it is not one. */
export function parseRewind(value: unknown): Rewind | undefined {
  if (value === undefined) return undefined;
  const text = typeof value === 'string' ? value : typeof value === 'number' ? String(value) : undefined;
  if (text !== undefined && /^\d{1,15}$/.test(text) && Number(text) >= 1) return { count: Math.min(Number(text), MAX_REWIND_COUNT) };
  const time = text !== undefined ? /^(\d{1,15})(s|m|h)$/.exec(text) : null;
  if (time && Number(time[1]) >= 1) return { sinceMs: Math.min(Number(time[1]) * UNIT_MS[time[2]], MAX_REWIND_MS) };
  throw new ServiceError(
    'invalidParameterValue',
    `rewind must be a number of messages (at least 1; more than ${MAX_REWIND_COUNT} gives ${MAX_REWIND_COUNT}) or a time such as "30s", "2m" or "1h" (more than ${MAX_REWIND_MS / 1000} s gives ${MAX_REWIND_MS / 1000} s)`,
  );
}
