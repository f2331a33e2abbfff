/**
 * `npm run demo`: the order service and the inventory service on a real RocketMQ broker and
 * MariaDB/MySQL (scripts/demo.js starts the local broker first, unless ROCKETMQ_ENDPOINTS is set).
 *
 * Environment: ROCKETMQ_ENDPOINTS (default 127.0.0.1:8081), ROCKETMQ_TX_DB_URL (default
 * mysql://root@127.0.0.1:3306/test), DEMO_ORDERS (checkout orders, default 6).
 * Exits 0 when every number of the summary matches the scenario and the database, 1 otherwise.
 */
import { DatabaseUnreachableError, DEFAULT_DB_URL } from './database';
import { checkDeployment, formatDoctor } from './doctor';
import { DEMO_LOCK_WAIT_MS, formatSummary, runScenario } from './scenario';

async function main(): Promise<number> {
  const say = (line: string) => process.stdout.write(`${line}\n`);
  const endpoints = process.env.ROCKETMQ_ENDPOINTS ?? '127.0.0.1:8081';
  const dbUrl = process.env.ROCKETMQ_TX_DB_URL ?? DEFAULT_DB_URL;
  const report = await runScenario({
    endpoints,
    dbUrl,
    txTopic: 'orders_tx',
    eventsTopic: 'orders_events',
    producerGroup: 'order-service',
    consumerGroup: 'inventory-service',
    checkoutOrders: Number(process.env.DEMO_ORDERS ?? 6),
    log: say,
  });
  say('');
  say(`summary of run ${report.runId} (${(report.durationMs / 1000).toFixed(1)} s):`);
  say(formatSummary(report));
  say('');
  // The production checklist on this deployment (docs/doctor.md): no check may fail.
  const doctor = await checkDeployment({
    endpoints,
    ...(process.env.ROCKETMQ_NAMESRV ? { nameServer: process.env.ROCKETMQ_NAMESRV } : {}),
    dbUrl,
    txTopic: 'orders_tx',
    eventsTopic: 'orders_events',
    consumerGroup: `inventory-service_${report.runId}`,
    lockWaitTimeoutMs: DEMO_LOCK_WAIT_MS,
  });
  for (const line of formatDoctor(doctor)) say(line);
  say('');
  if (doctor.status === 'fail') report.failures.push('doctor found a failed check (above)');
  if (report.ok && doctor.status !== 'fail') {
    say('self-check passed: every number matches the scenario and the database; doctor: no failed check');
    return 0;
  }
  say(`self-check FAILED (${report.failures.length}):`);
  for (const f of report.failures) say(`  - ${f}`);
  return 1;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof DatabaseUnreachableError) process.stderr.write(`demo: ${err.message}\n`);
    else
      process.stderr.write(
        `demo failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
      );
    process.exit(1);
  },
);
