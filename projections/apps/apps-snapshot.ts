// The apps topic's snapshot (README: A bounded start): the apps and keys its events made (compacted,
// projections/apps/app-registry.ts) and the token revocations that can still reach a token
// (projections/revocations), with the apps topic's position they reflect. A start restores it over
// the configured apps and reads only the topic after it; without one it reads the topic whole.
import { Topics, type Checkpoint } from '../../src/log/port.js';
import type { SnapshotPositions, SnapshotStore } from '../snapshots.js';
import type { AppEvent, AppRegistry } from './app-registry.js';
import type { RevocationRegistry, RevocationsSnapshot } from '../revocations/revocation-registry.js';

export const APPS_SNAPSHOT = 'apps';
/** The state's shape (AppsSnapshot): a snapshot of another version is not used. */
export const APPS_SNAPSHOT_VERSION = 1;

interface AppsSnapshot {
  events: AppEvent[];
  revocations: RevocationsSnapshot;
}

/** Both registries and the apps topic's position they reflect, at one instant. */
export function takeAppsSnapshot(registry: AppRegistry, revocations: RevocationRegistry, applied: Checkpoint): { positions: SnapshotPositions; state: AppsSnapshot } {
  return { positions: new Map([[Topics.apps, new Map(applied)]]), state: { events: registry.compacted(), revocations: revocations.snapshot() } };
}

/**
 * Restores the newest usable snapshot into the registries (the configured apps already in
 * `registry`) and says where the apps topic resumes: after it, or at 0 (the topic whole).
 */
export async function restoreAppsSnapshot(snapshots: SnapshotStore | undefined, registry: AppRegistry, revocations: RevocationRegistry): Promise<Checkpoint> {
  const snapshot = await snapshots?.load<AppsSnapshot>(APPS_SNAPSHOT, APPS_SNAPSHOT_VERSION);
  if (!snapshot) return new Map();
  for (const event of snapshot.state.events) registry.evolve(event);
  revocations.restore(snapshot.state.revocations);
  return new Map(snapshot.positions.get(Topics.apps));
}
