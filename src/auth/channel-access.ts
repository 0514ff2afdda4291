import { ServiceError } from '../errors.js';
import { isMetachannel } from '../domain/channel.js';
import { permits, type Capability, type Operation } from './capability.js';

/**
 * What credentials may do on a channel: the one home of the rule, for REST routes and realtime
 * alike. The capability decides, except that publishing and presence are never possible on a
 * metachannel (spec: Channel names, metachannels), whatever the capability says: only the
 * service writes there.
 */
const NEVER_ON_METACHANNELS: Partial<Record<Operation, string>> = { publish: 'publishing', presence: 'presence' };

/** Whether `capability` allows `operation` on `channel`. */
export function allowedOn(capability: Capability, channel: string, operation: Operation): boolean {
  if (NEVER_ON_METACHANNELS[operation] !== undefined && isMetachannel(channel)) return false;
  return permits(capability, channel, operation);
}

/** Throws capabilityDenied (40160) unless `capability` allows `operation` on `channel`. */
export function checkAllowedOn(capability: Capability, channel: string, operation: Operation): void {
  const never = NEVER_ON_METACHANNELS[operation];
  if (never !== undefined && isMetachannel(channel)) throw new ServiceError('capabilityDenied', `${never} is never possible on a metachannel ("${channel}")`);
  if (!permits(capability, channel, operation)) {
    throw new ServiceError('capabilityDenied', `the credentials lack the "${operation}" capability on channel "${channel}"`);
  }
}
