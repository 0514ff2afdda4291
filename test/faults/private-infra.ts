// The fault tier stops and restarts Kafka and ClickHouse, so it runs on infrastructure of its own:
// each test file starts the local parts (infra/local/start.sh) in a private state dir and stops them
// after the file. Other suites keep theirs, even when files run in parallel; only loopback
// addresses are involved. Where the local parts cannot be started (no clickhouse-server, no
// librdkafka-dev), the tier skips loudly, or fails under REQUIRE_INFRA=1 (test/helpers/infra.ts).
// A Kafka or ClickHouse given by the environment or testcontainers is not used here: the tier
// needs to take it down, which only the local parts allow (the mock broker keeps its data while
// down; see infra/kafka-mock/mock-broker.c).
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../..');

/** What describeWithInfra tells when the fault tier cannot start its parts. */
export const PRIVATE_INFRA_NEEDS =
  'install clickhouse-server, librdkafka-dev, gcc and curl (bash .ci/run does): the fault tier starts its own Kafka mock broker and clickhouse-server with infra/local/start.sh';

export interface PrivateInfra {
  source: 'infra/local';
  stateDir: string;
  brokers: string[];
  clickhouseUrl: string;
  /** Every mock broker closes its connections and refuses new ones; the data stays. */
  kafkaDown(): Promise<void>;
  kafkaUp(): Promise<void>;
  /** SIGTERM, or SIGKILL with `kill`; returns once the process has exited. */
  clickhouseStop(kill?: boolean): Promise<void>;
  /** The same config, ports and data; returns once it answers /ping. */
  clickhouseStart(): Promise<void>;
  stop(): Promise<void>;
}

function script(name: string, args: string[], stateDir: string): Promise<string> {
  return new Promise((done, fail) => {
    execFile('bash', [join(ROOT, 'infra/local', name), ...args], { env: { ...process.env, INFRA_STATE_DIR: stateDir }, timeout: 120_000 }, (err, stdout, stderr) =>
      err ? fail(new Error(`infra/local/${name} ${args.join(' ')} failed: ${err.message}\n${stderr}`)) : done(stdout),
    );
  });
}

/** Starts a mock broker and a clickhouse-server of its own; undefined (with the reason printed) when it cannot. */
export async function startPrivateInfra(): Promise<PrivateInfra | undefined> {
  const stateDir = mkdtempSync(join(tmpdir(), 'cm-faults-infra-'));
  let stdout: string;
  try {
    stdout = await script('start.sh', [], stateDir);
  } catch (err) {
    console.warn(`the fault tier could not start its own local infrastructure: ${(err as Error).message}`);
    await script('stop.sh', [], stateDir).catch(() => undefined);
    rmSync(stateDir, { recursive: true, force: true });
    return undefined;
  }
  const env = Object.fromEntries([...stdout.matchAll(/^export ([A-Z_]+)=(.*)$/gm)].map((m) => [m[1], m[2]]));
  return {
    source: 'infra/local',
    stateDir,
    brokers: env.KAFKA_BROKERS.split(','),
    clickhouseUrl: env.CLICKHOUSE_URL,
    kafkaDown: async () => void (await script('kafka.sh', ['down'], stateDir)),
    kafkaUp: async () => void (await script('kafka.sh', ['up'], stateDir)),
    clickhouseStop: async (kill = false) => void (await script('clickhouse.sh', kill ? ['stop', '--kill'] : ['stop'], stateDir)),
    clickhouseStart: async () => void (await script('clickhouse.sh', ['start'], stateDir)),
    stop: async () => {
      await script('stop.sh', [], stateDir);
      rmSync(stateDir, { recursive: true, force: true });
    },
  };
}
