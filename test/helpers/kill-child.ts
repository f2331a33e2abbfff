/**
 * One service instance for the kill scenario (killScenario.ts): a producer of the scenario's group
 * running transactions in a loop until it is SIGKILLed. Prints "ready" once started.
 * argv: topic, producerGroup. env: KILL_CONCURRENCY (default 2), KILL_RECOVERY_HORIZON_MS
 * (the discard recovery's horizon; "off" turns it off; unset: the option is not passed),
 * KILL_ROLLBACK_PERCENT (share of transactions whose work throws; default 10),
 * KILL_REPORT_CHECKBACKS=1 (prints "checkback <decidedBy> <resolution>" for each check-back answered),
 * KILL_CONFIRM_BY (the producer's confirmBy; unset: its default).
 * SIGUSR2: stop starting transactions (the instance stays up and keeps answering check-backs).
 */
import { openDataSource } from './db';
import { ENDPOINTS } from './env';
import { makeProducer } from './producer';

async function main(): Promise<void> {
  const [topic, group] = process.argv.slice(2) as [string, string];
  const concurrency = Number(process.env.KILL_CONCURRENCY ?? 2);
  const rollbackPercent = Number(process.env.KILL_ROLLBACK_PERCENT ?? 10);
  const horizon = process.env.KILL_RECOVERY_HORIZON_MS;
  const ds = await openDataSource({ poolSize: concurrency + 4 });
  const producer = makeProducer(ds, {
    endpoints: ENDPOINTS,
    topics: [topic],
    producerGroup: group,
    ...(process.env.KILL_CONFIRM_BY
      ? { confirmBy: process.env.KILL_CONFIRM_BY as 'endTransaction' | 'delivery' }
      : {}),
    ...(process.env.KILL_REPORT_CHECKBACKS === '1'
      ? {
          checkBack: {
            onResolved: (o: { decidedBy: string; resolution: unknown }) =>
              process.stdout.write(`checkback ${o.decidedBy} ${String(o.resolution)}\n`),
          },
        }
      : {}),
    ...(horizon === 'off'
      ? { discardRecovery: false }
      : horizon
        ? { discardRecovery: { horizonMs: Number(horizon), intervalMs: 1000, leaseMs: 5000 } }
        : {}),
  });
  await producer.start();
  process.stdout.write('ready\n');
  let idle = false;
  process.on('SIGUSR2', () => {
    idle = true;
    process.stdout.write('idle\n');
  });
  const worker = async (): Promise<void> => {
    for (let i = 0; !idle; i++) {
      const events = i % 5 === 0 ? 2 : 1;
      await producer
        .transact(
          Array.from({ length: events }, (_, n) => ({ topic, body: { n } })),
          async () => {
            if (Math.random() * 100 < rollbackPercent) throw new Error('rolled back on purpose');
          },
        )
        .catch(() => undefined);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  // Idle: keep the producer (and its check-back answers) up until the process is killed.
  await new Promise(() => undefined);
}

main().catch((err: unknown) => {
  process.stderr.write(`kill-child failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(3);
});
