/**
 * A producer process to be killed with SIGKILL inside a crash window.
 * argv: mode, topic, producerGroup, orderId. Modes of transact(): before-commit, after-commit.
 * Modes of publish() inside the caller's own transaction: join-after-half (the half message was
 * accepted, the outbox rows not yet written), join-in-work (publish returned, the caller's work
 * goes on, no COMMIT yet), join-after-commit (the caller committed, EndTransaction not sent).
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
      afterHalf: async (_half, message) => {
        if (mode === 'join-after-half') {
          report(message.properties.TX_ID!);
          await hang();
        }
      },
      beforeEnd: async (_half, commit) => {
        if ((mode === 'after-commit' || mode === 'join-after-commit') && commit) {
          report(currentTx);
          await hang();
        }
        return true;
      },
    },
  );
  await producer.start();
  if (mode.startsWith('join-')) {
    await ds.transaction(async (manager) => {
      await manager.query(sql('INSERT INTO test_order (id, note) VALUES (?, ?)'), [orderId, mode]);
      const { txId } = await producer.publish(manager, { topic, body: { orderId } });
      currentTx = txId;
      if (mode === 'join-in-work') {
        report(currentTx);
        await hang();
      }
    });
    return;
  }
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
