import { Topics, type Log } from '../log/port.js';
import { decodeEvent } from '../log/event-codec.js';
import { partitionFor } from '../log/partitioner.js';

/**
 * An app's key history for audits (`replay --keys`): its key management events (made, changed,
 * revoked) and token revocations, read from the apps topic itself in log order. Never a secret.
 * The app's events are in one partition (the apps topic is keyed by the app).
 */
export async function* replayKeyEvents(log: Log, appId: string, batch = 1000): AsyncGenerator<Record<string, unknown>> {
  const partition = partitionFor(appId, await log.partitions(Topics.apps));
  const end = (await log.endOffsets(Topics.apps)).get(partition) ?? 0;
  for (let offset = 0; offset < end; ) {
    const records = await log.read(Topics.apps, partition, offset, Math.min(batch, end - offset));
    if (records.length === 0) break;
    for (const record of records) {
      if (record.key !== appId) continue;
      const event = decodeEvent(record.value);
      const at = { offset: record.offset, timestamp: record.timestamp, type: event.type, appId };
      if (event.type === 'key.created') {
        const { keySecret: _secret, ...key } = event.key;
        yield { ...at, ...key };
      } else if (event.type === 'key.updated' || event.type === 'key.revoked') {
        const { type: _type, appId: _appId, ...change } = event;
        yield { ...at, ...change };
      } else if (event.type === 'tokens.revoked') {
        yield { ...at, keyName: event.keyName, targets: event.targets, issuedBefore: event.issuedBefore, appliesAt: event.appliesAt };
      }
    }
    offset = records[records.length - 1].offset + 1;
  }
}
