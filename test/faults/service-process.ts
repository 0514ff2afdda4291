// The service as a real process (test/helpers/server-process.ts) in production mode on the fault
// tier's private Kafka and ClickHouse. An unhandled rejection shows in its output as main's fatal
// line (it keeps serving) or Node's report (it dies): `unhandled` finds either.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PrivateInfra } from './private-infra.js';
import { startServer, type ServerProcess } from '../helpers/server-process.js';

export type ServiceProcess = ServerProcess;
export interface FaultApp {
  appId: string;
  key: string;
  /** a channel of the app's persisted namespace: its history lives in ClickHouse */
  channel: string;
  appsFile: string;
  dataDir: string;
}

/** An app with a `persisted` namespace, in an APPS_FILE of its own. */
export function faultApp(name: string): FaultApp {
  const dataDir = mkdtempSync(join(tmpdir(), `cm-faults-${name}-`));
  const appId = `${name}app`;
  const key = `${appId}.k1:${name}-secret-${name}-secret`;
  const appsFile = join(dataDir, 'apps.json');
  writeFileSync(appsFile, JSON.stringify({ apps: [{ appId, keys: [{ key }], namespaces: [{ id: 'persisted', persisted: true }] }] }));
  return { appId, key, channel: `persisted:${name}`, appsFile, dataDir };
}

/**
 * Lines telling of a rejection or exception nobody handled: Node's own report when the process
 * dies of one, or main's fatal log line when it keeps serving.
 */
export const unhandled = (output: string[]): string[] =>
  output
    .join('')
    .split('\n')
    .filter((line) => /unhandled promise rejection|uncaught exception|UnhandledPromiseRejection|triggerUncaughtException/i.test(line));

/** Throws with the end of its output when the process has exited (a crash shows as such, not as a refused request). */
export function assertRunning(service: ServiceProcess): void {
  if (service.running()) return;
  const tail = service.output.join('').split('\n').slice(-30).join('\n');
  throw new Error(`the service process exited (${service.child.exitCode ?? service.child.signalCode}); its last output:\n${tail}`);
}

/** The service in production mode on the private infrastructure, with the fault app's APPS_FILE. */
export function startServiceProcess(infra: PrivateInfra, app: FaultApp, env: Record<string, string> = {}): Promise<ServiceProcess> {
  return startServer(
    {
      KAFKA_BROKERS: infra.brokers.join(','),
      CLICKHOUSE_URL: infra.clickhouseUrl,
      // librdkafka's mock broker cannot serve the idempotent producer (ARCHITECTURE).
      KAFKA_IDEMPOTENT: '0',
      DATA_DIR: app.dataDir,
      APPS_FILE: app.appsFile,
      ...env,
    },
    60_000,
  );
}
