import type { Logger } from 'pino';
import { loadAppsFile } from './apps-file.js';
import { defaultAppFile, loadDefaultApp, loadOrCreateDefaultApp } from './default-app.js';
import { keyString, type AppDefinition } from '../domain/app.js';

export interface ConfiguredApps {
  apps: AppDefinition[];
  /** The default app's root key when this start created it (printed once by main.ts). */
  createdDefaultKey?: string;
  /** What the operator should read at start (logged as warnings). */
  warnings: { message: string; fields: Record<string, unknown> }[];
}

/**
 * The apps the configuration gives, before the apps topic is replayed (key management and sandbox
 * apps come from there). With no APPS_FILE: the default app of DATA_DIR, created at the first start.
 * With an APPS_FILE: its apps, and the default app DATA_DIR already holds as well (with a warning),
 * so that setting APPS_FILE does not take away its key, history and stats; an app of the file with
 * the same appId replaces it.
 */
export function configuredApps(options: { appsFile?: string; dataDir: string; now: number }): ConfiguredApps {
  if (!options.appsFile) {
    const { app, created } = loadOrCreateDefaultApp(options.dataDir, options.now);
    return { apps: [app], createdDefaultKey: created ? keyString(app.keys[0]) : undefined, warnings: [] };
  }
  const apps = loadAppsFile(options.appsFile, options.now);
  const warnings: ConfiguredApps['warnings'] = [];
  const kept = loadDefaultApp(options.dataDir);
  if (kept && !apps.some((a) => a.appId === kept.appId)) {
    apps.push(kept);
    warnings.push({
      message: `APPS_FILE is set and DATA_DIR holds the default app "${kept.appId}" of an earlier start: it is kept beside the file's apps (its key, history and stats stay reachable); delete ${defaultAppFile(options.dataDir)} to drop it, or move its key into APPS_FILE`,
      fields: { appId: kept.appId, appsFile: options.appsFile },
    });
  }
  return { apps, warnings };
}

/**
 * An apps file that leaves out an app with data (stats count every publish and request) says so,
 * at start, naming the app; the apps known (the file's, the kept default, the apps topic's) are not named.
 */
export async function warnOfAppsLeftOut(options: { appsFile: string; withData: () => Promise<string[]>; known: (appId: string) => boolean; logger: Logger }): Promise<void> {
  const { appsFile, logger } = options;
  try {
    for (const appId of (await options.withData()).filter((id) => !options.known(id))) {
      logger.warn({ appId, appsFile }, `app "${appId}" has data here (history, stats) but is not in APPS_FILE: its keys do not work and its data cannot be read until it is added back`);
    }
  } catch (err) {
    logger.warn({ err }, 'could not list the apps with data, to check that APPS_FILE names them all');
  }
}

/** How long the start's check of the apps with data waits for the stats writers (their groups forming, a stand-in at half). */
export const APPS_CHECK_WAIT_MS = 30_000;

/**
 * The start's check of the apps with data that APPS_FILE leaves out, beside the start: once the
 * stats store holds what the log held at the start (`written`; in production mode the shared
 * writers write it once their groups have formed, seconds on, or a stand-in does). Read at once,
 * the store lacked what the writers had not written yet, and the check missed an app. Nothing is
 * said once the service is closing.
 */
export function checkAppsLeftOutOnceWritten(options: { appsFile: string; written: () => Promise<void>; closing: () => boolean; withData: () => Promise<string[]>; known: (appId: string) => boolean; logger: Logger }): void {
  const { appsFile, logger } = options;
  void (async () => {
    const failed = await options.written().catch((err: unknown) => err);
    if (options.closing()) return;
    if (failed !== undefined) logger.warn({ err: failed }, 'the stats writers did not write what the log held at the start in time: the apps with data are checked against what the stats store holds now');
    await warnOfAppsLeftOut(options);
    logger.info({ appsFile }, 'apps with data checked against APPS_FILE');
  })().catch((err: unknown) => logger.warn({ err }, 'apps with data not checked against APPS_FILE'));
}
