import { ServiceError } from '../errors.js';
import { parseRewind, type Rewind } from './rewind.js';

// Channel params (REALTIME-PROTOCOL.md §4.1, §9): what an ATTACH's `params` (and a `[?params]`
// name) may ask. Served: `rewind` and `occupancy`. Refused: `delta` (no VCDIFF encoder is
// served) and any other name, so that an attach never waits in silence for what is not done.

/** Params one ATTACH may carry. */
export const MAX_CHANNEL_PARAMS = 16;
const MAX_PARAM_CHARS = 256;

/** The categories of `occupancy` metrics (`metrics.<category>` asks for one). */
export const OCCUPANCY_CATEGORIES = ['connections', 'publishers', 'subscribers', 'presenceConnections', 'presenceMembers', 'presenceSubscribers'] as const;
export type OccupancyCategory = (typeof OCCUPANCY_CATEGORIES)[number];

/** In-band occupancy: all metrics, or one category's. */
export type OccupancyRequest = { category?: OccupancyCategory };

export interface ChannelParams {
  rewind?: Rewind;
  occupancy?: OccupancyRequest;
  /** The params granted, as ATTACHED echoes them (RTL4k). */
  granted: Record<string, string>;
}

/**
 * The params of an ATTACH (its `params`, then those of its channel's name, which the frame's
 * override); a ServiceError (40002 for a name not served, 40003 for a value) when one is not.
 */
export function channelParamsOf(fromFrame: unknown, fromName: Record<string, string>): ChannelParams {
  const given: Record<string, string> = { ...fromName };
  if (fromFrame !== undefined && fromFrame !== null) {
    if (typeof fromFrame !== 'object' || Array.isArray(fromFrame)) throw new ServiceError('invalidParameterValue', 'ATTACH params must be a map of names to strings');
    for (const [key, value] of Object.entries(fromFrame)) {
      if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') throw new ServiceError('invalidParameterValue', `channel param ${key} must be a string`);
      given[key] = String(value);
    }
  }
  const names = Object.keys(given);
  if (names.length > MAX_CHANNEL_PARAMS) throw new ServiceError('invalidParameterName', `an attach may carry at most ${MAX_CHANNEL_PARAMS} channel params`);
  const result: ChannelParams = { granted: {} };
  for (const name of names) {
    const value = given[name];
    if (value.length > MAX_PARAM_CHARS) throw new ServiceError('invalidParameterValue', `channel param ${name.slice(0, 64)} is longer than ${MAX_PARAM_CHARS} characters`);
    switch (name) {
      case 'rewind':
        result.rewind = parseRewind(value);
        break;
      case 'occupancy':
        result.occupancy = occupancyOf(value);
        break;
      case 'delta':
        throw new ServiceError('invalidParameterName', 'channel param delta is not served: this service sends every message whole (no VCDIFF deltas); attach without it');
      default:
        throw new ServiceError('invalidParameterName', `unknown channel param "${name.slice(0, 64)}": the params served are rewind and occupancy`);
    }
    result.granted[name] = value;
  }
  return result;
}

function occupancyOf(value: string): OccupancyRequest {
  if (value === 'metrics') return {};
  const category = value.startsWith('metrics.') ? value.slice('metrics.'.length) : undefined;
  if (category !== undefined && (OCCUPANCY_CATEGORIES as readonly string[]).includes(category)) return { category: category as OccupancyCategory };
  throw new ServiceError('invalidParameterValue', `channel param occupancy must be "metrics" or "metrics.<category>" with a category of ${OCCUPANCY_CATEGORIES.join(', ')}`);
}
