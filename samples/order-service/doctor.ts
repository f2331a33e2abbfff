/**
 * The demo's last step: `runDoctor` (what `npx rocketmq-tx doctor` runs) against the deployment
 * the scenario just used, with the same options as its producer, relay and consumer. A failed
 * check fails the demo; warnings are printed.
 */
import { runDoctor, type DoctorReport } from '../../src'; // 'rocketmq-tx'
import { OrderPlaced } from './contract';
import { openDatabase } from './database';
import { reserveStock } from './inventory';

export interface DemoDoctorOptions {
  endpoints: string;
  /** The NameServer (scripts/demo.js passes the local one): the broker's settings are read. */
  nameServer?: string;
  dbUrl: string;
  txTopic: string;
  eventsTopic: string;
  consumerGroup: string;
  /** The producer's checkBack.lockWaitTimeoutMs (scenario.ts). */
  lockWaitTimeoutMs: number;
}

export async function checkDeployment(o: DemoDoctorOptions): Promise<DoctorReport> {
  const dataSource = await openDatabase(o.dbUrl, { poolSize: 2 });
  try {
    return await runDoctor({
      dataSource,
      broker: { endpoints: o.endpoints, ...(o.nameServer ? { nameServer: o.nameServer } : {}) },
      transactionTopics: [o.txTopic],
      outboxTopics: [o.eventsTopic],
      producerTopics: [o.txTopic, o.eventsTopic],
      lockWaitTimeoutMs: o.lockWaitTimeoutMs,
      consumers: [
        {
          consumerGroup: o.consumerGroup,
          subscriptions: [o.txTopic, o.eventsTopic],
          handlers: [reserveStock],
        },
      ],
      topicEvents: { [o.txTopic]: [OrderPlaced], [o.eventsTopic]: [OrderPlaced] },
    });
  } finally {
    await dataSource.destroy();
  }
}

/** One line per check that is not a plain pass (warnings and failures with their advice, then skips). */
export function formatDoctor(report: DoctorReport): string[] {
  const n = report.counts;
  return [
    `doctor: ${report.status.toUpperCase()} (${n.pass} pass, ${n.warn} warn, ${n.fail} fail, ${n.skip} skipped)`,
    ...report.checks
      .filter((c) => c.status === 'warn' || c.status === 'fail')
      .map((c) => `  ${c.status.toUpperCase()} ${c.id}: ${c.value} (${c.threshold}) - ${c.advice}`),
    ...report.checks.filter((c) => c.status === 'skip').map((c) => `  SKIP ${c.id}: ${c.value}`),
  ];
}
