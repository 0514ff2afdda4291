// src/main.ts as a process, on topics and tables of its own (TEST_TOPIC_PREFIX, TEST_TABLE_PREFIX),
// which the service's configuration does not name: a production process whose consumer groups no
// other test's or instance's share (test/e2e/production-stop-during-start.test.ts). The signals,
// the start and the stop are src/run-service.ts's, as for src/main.ts.
import { parseConfig } from '../../src/config.js';
import { productionAdapters } from '../../src/production-adapters.js';
import { runService } from '../../src/run-service.js';

const config = parseConfig(process.env, []);
await runService(config, (c, logger) => productionAdapters(c, logger, { topicPrefix: process.env.TEST_TOPIC_PREFIX, tablePrefix: process.env.TEST_TABLE_PREFIX }));
