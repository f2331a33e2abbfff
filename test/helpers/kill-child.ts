/**
 * One service instance for the kill scenario (killScenario.ts): a producer of the scenario's group
 * running transactions in a loop until it is SIGKILLed. Prints "ready" once started.
 * argv: topic, producerGroup. env: KILL_CONCURRENCY (default 2), KILL_RECOVERY_HORIZON_MS
 * (the discard recovery's horizon; "off" turns it off; unset: the option is not passed),
 * KILL_ROLLBACK_PERCENT (share of transactions whose work throws; default 10).
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
    ...(horizon === 'off'
      ? { discardRecovery: false }
      : horizon
        ? { discardRecovery: { horizonMs: Number(horizon), intervalMs: 1000, leaseMs: 5000 } }
        : {}),
  });
  await producer.start();
  process.stdout.write('ready\n');
  const worker = async (): Promise<never> => {
    for (let i = 0; ; i++) {
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
}

main().catch((err: unknown) => {
  process.stderr.write(`kill-child failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(3);
});
