/**
 * The demo's scenario (samples/order-service) on the real broker and MariaDB, on topics of its
 * own: its self-check must pass, the database must agree independently, and the self-check
 * must catch a wrong number.
 */
import type { DataSource } from 'typeorm';
import { openDatabase, select } from '../../samples/order-service/database';
import {
  formatSummary,
  runScenario,
  selfCheck,
  type ScenarioReport,
} from '../../samples/order-service/scenario';
import { ensureSchema, openDataSource } from '../helpers/db';
import { DB_URL, ENDPOINTS } from '../helpers/env';

const CHECKOUT = 4;
const IMPORT = 2;
const REJECTED = 2;

describe('samples/order-service scenario (npm run demo) against the real broker and MariaDB', () => {
  let ds: DataSource;
  let report: ScenarioReport;
  const lines: string[] = [];

  beforeAll(async () => {
    // The SDK tables first, under the test suite's schema lock (other files migrate concurrently).
    const helper = await openDataSource({ poolSize: 2 });
    try {
      await ensureSchema(helper);
    } finally {
      await helper.destroy();
    }
    report = await runScenario({
      endpoints: ENDPOINTS,
      dbUrl: DB_URL,
      txTopic: 'rmqtx_tx_17',
      eventsTopic: 'rmqtx_normal_10',
      producerGroup: 'it_order_service',
      consumerGroup: 'it_order_inventory',
      checkoutOrders: CHECKOUT,
      importOrders: IMPORT,
      rejectedOrders: REJECTED,
      waitTimeoutMs: 60_000,
      log: (line) => lines.push(line),
    });
    ds = await openDatabase(DB_URL, { poolSize: 2 });
  }, 150_000);

  afterAll(async () => {
    await ds?.destroy();
  });

  it('passes its own self-check: every number matches the scenario and the database', () => {
    // ORDER_SERVICE_SUMMARY=1 prints the run's progress and summary table even when it passes.
    if (!report.ok || process.env.ORDER_SERVICE_SUMMARY)
      process.stdout.write(`${lines.join('\n')}\n\n${formatSummary(report)}\n`);
    expect(report.failures).toEqual([]);
    expect(report.rows.map((r) => [r.metric, r.ok])).toEqual(report.rows.map((r) => [r.metric, true]));
  });

  it('leaves the database in the state the scenario promises (checked here without the self-check)', async () => {
    const prefix = `o-${report.runId}-%`;
    const committed = CHECKOUT + IMPORT + 1;
    const [orders] = await select(ds, 'SELECT COUNT(*) AS n FROM shop_order WHERE id LIKE ?', [prefix]);
    expect(Number(orders.n)).toBe(committed);
    const reservations: Array<{ order_id: string; qty: number }> = await select(
      ds,
      'SELECT order_id, qty FROM inventory_reservation WHERE order_id LIKE ?',
      [prefix],
    );
    expect(reservations).toHaveLength(committed);
    // one reservation per committed order, none for a rolled-back one
    const orderIds: Array<{ id: string }> = await select(ds, 'SELECT id FROM shop_order WHERE id LIKE ?', [
      prefix,
    ]);
    expect(reservations.map((r) => r.order_id).sort()).toEqual(orderIds.map((o) => o.id).sort());
    const [stock] = await select(
      ds,
      'SELECT SUM(reserved) AS reserved, SUM(available) AS available FROM inventory_stock WHERE sku LIKE ?',
      [`%-${report.runId}`],
    );
    const units = reservations.reduce((sum, r) => sum + Number(r.qty), 0);
    expect(Number(stock.reserved)).toBe(units);
    expect(Number(stock.available)).toBe(200 - units);
    // the crashed producer's transaction: committed by it, delivered after a survivor's check-back
    const [crashTx] = await select(ds, 'SELECT status, resolved_by FROM tx_record WHERE tx_id = ?', [
      report.crash.txId,
    ]);
    expect(crashTx).toMatchObject({ status: 'COMMITTED', resolved_by: 'PRODUCER' });
    expect(report.checkBacks.filter((c) => c.txId === report.crash.txId).map((c) => c.resolution)).toContain(
      'COMMIT',
    );
    expect(report.consumerStats.duplicates).toBeGreaterThanOrEqual(1);
    expect(report.producerStats.rolledBack).toBe(REJECTED);
  });

  it('names a wrong number: a reservation applied twice makes the self-check fail', async () => {
    const order = report.facts.committed[0]!;
    await select(
      ds,
      'UPDATE inventory_stock SET reserved = reserved + ?, available = available - ? WHERE sku = ?',
      [order.qty, order.qty, order.sku],
    );
    try {
      const { failures } = await selfCheck(ds, report.facts);
      expect(failures).toHaveLength(1);
      expect(failures[0]).toMatch(/^stock reserved \(units\): expected/);
    } finally {
      await select(
        ds,
        'UPDATE inventory_stock SET reserved = reserved - ?, available = available + ? WHERE sku = ?',
        [order.qty, order.qty, order.sku],
      );
    }
    expect((await selfCheck(ds, report.facts)).failures).toEqual([]);
  });
});
