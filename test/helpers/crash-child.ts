/**
 * A producer process to be killed with SIGKILL inside a crash window.
 * argv: mode (before-commit | after-commit), topic, producerGroup, orderId.
 * Prints one JSON line {"window": mode, "txId": ...} when it is inside the window, then hangs.
 */
import { openDataSource, sql } from './db';
import { makeProducer } from './producer';

async function main(): Promise<void> {
  const [mode, topic, group, orderId] = process.argv.slice(2) as [string, string, string, string];
  const ds = await openDataSource({ poolSize: 2 });
  const hang = () => new Promise<never>(() => undefined);
  const report = (txId: string) => process.stdout.write(`${JSON.stringify({ window: mode, txId })}\n`);
  let currentTx = '';
  const producer = makeProducer(
    ds,
    { topics: [topic], producerGroup: group },
    {
      beforeEnd: async (_half, commit) => {
        if (mode === 'after-commit' && commit) {
          report(currentTx);
          await hang();
        }
        return true;
      },
    },
  );
  await producer.start();
  await producer.transact({ topic, body: { orderId } }, async (manager, { txId }) => {
    await manager.query(sql('INSERT INTO test_order (id, note) VALUES (?, ?)'), [orderId, mode]);
    currentTx = txId;
    if (mode === 'before-commit') {
      report(currentTx);
      await hang();
    }
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`crash-child failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(3);
});
