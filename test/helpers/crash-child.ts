/**
 * A producer process to be killed with SIGKILL inside a crash window.
 * argv: mode, topic, producerGroup, orderId. Modes of transact(): before-commit, after-commit.
 * Modes of publish() inside the caller's own transaction: join-after-half (the half message was
 * accepted, the outbox rows not yet written), join-in-work (publish returned, the caller's work
 * goes on, no COMMIT yet), join-after-commit (the caller committed, EndTransaction not sent).
 * Savepoint modes (publish in the outer transaction, two events in a nested savepoint, one more in
 * the outer transaction after it, then the outer COMMIT; killed before EndTransaction):
 * join-savepoint-rolled-back (the savepoint is rolled back; its immediate ROLLBACK
 * EndTransaction is dropped, as if lost, so only the check-back resolves its halves) and
 * join-savepoint-released (the savepoint is released).
 * Prints one JSON line {"window": mode, "txId": ...} when it is inside the window, then hangs;
 * the savepoint modes add savepointTxId, outerEventIds and savepointEventIds.
 */
import { openDataSource, sql } from './db';
import { makeProducer } from './producer';

async function main(): Promise<void> {
  const [mode, topic, group, orderId] = process.argv.slice(2) as [string, string, string, string];
  const ds = await openDataSource({ poolSize: 2 });
  const hang = () => new Promise<never>(() => undefined);
  const report = (txId: string) => process.stdout.write(`${JSON.stringify({ window: mode, txId })}\n`);
  let currentTx = '';
  const savepointMode = mode === 'join-savepoint-rolled-back' || mode === 'join-savepoint-released';
  const savepoint = { savepointTxId: '', outerEventIds: [] as string[], savepointEventIds: [] as string[] };
  let reported = false;
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
        // The savepoint's rollback is lost: its halves are left to the check-back.
        if (mode === 'join-savepoint-rolled-back' && !commit) return false;
        if (savepointMode && commit) {
          // Every fence of the transaction ends after its COMMIT: report once, hang them all.
          if (!reported) {
            reported = true;
            process.stdout.write(`${JSON.stringify({ window: mode, txId: currentTx, ...savepoint })}\n`);
          }
          await hang();
        }
        return true;
      },
    },
  );
  await producer.start();
  if (savepointMode) {
    await ds.transaction(async (manager) => {
      await manager.query(sql('INSERT INTO test_order (id, note) VALUES (?, ?)'), [orderId, mode]);
      const outer = await producer.publish(manager, { topic, body: { orderId, part: 'outer' } });
      currentTx = outer.txId;
      savepoint.outerEventIds.push(...outer.eventIds);
      const undo = new Error('savepoint rolled back on purpose');
      await manager
        .transaction(async (nested) => {
          const inner = await producer.publish(nested, [
            { topic, body: { orderId, part: 'savepoint-1' } },
            { topic, body: { orderId, part: 'savepoint-2' } },
          ]);
          savepoint.savepointTxId = inner.txId;
          savepoint.savepointEventIds.push(...inner.eventIds);
          if (mode === 'join-savepoint-rolled-back') throw undo;
        })
        .catch((err: unknown) => {
          if (err !== undo) throw err;
        });
      const after = await producer.publish(manager, { topic, body: { orderId, part: 'after-savepoint' } });
      // After a rollback it joins the outer fence; after a release, the released fence (either commits).
      (after.txId === currentTx ? savepoint.outerEventIds : savepoint.savepointEventIds).push(
        ...after.eventIds,
      );
    });
    return;
  }
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
