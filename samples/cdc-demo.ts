/**
 * `DEMO_DELIVERY=cdc npm run demo`: the order service publishing OrderPlaced with delivery 'cdc'.
 * scripts/demo.js starts a MariaDB with the binlog on (scripts/mariadb-binlog.js) and the local
 * broker; this runs `rocketmq-tx cdc` as a child process (the Debezium engine reading the
 * binlog), places orders (some refused by a business rule: rolled back), consumes OrderPlaced with
 * an IdempotentConsumer, and checks its summary: every committed order applied once, no refused
 * order delivered, the CDC backlog drained.
 *
 * Environment: ROCKETMQ_ENDPOINTS, ROCKETMQ_NAMESRV, ROCKETMQ_TX_DB_URL (a binlog-enabled
 * MySQL/MariaDB), ROCKETMQ_TX_CDC_HOME (default .rocketmq-tx-cdc), DEMO_ORDERS (default 20).
 */
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { IdempotentConsumer, on, TransactionalProducer, type ConsumeOutcome } from '../src'; // 'rocketmq-tx'
import { OrderPlaced } from './order-service/contract';
import { migrate, openDatabase } from './order-service/database';
import { ShopOrder } from './order-service/entities';

const REPO = path.resolve(__dirname, '..');
const TOPIC = 'orders_events';
const MAX_QTY = 5;

class OrderRefused extends Error {}

async function main(): Promise<number> {
  const say = (line: string) => process.stdout.write(`${line}\n`);
  const endpoints = process.env.ROCKETMQ_ENDPOINTS ?? '127.0.0.1:8081';
  const namesrv = process.env.ROCKETMQ_NAMESRV ?? '127.0.0.1:9876';
  const dbUrl = process.env.ROCKETMQ_TX_DB_URL ?? 'mysql://root@127.0.0.1:3307/test';
  const home = process.env.ROCKETMQ_TX_CDC_HOME ?? path.join(REPO, '.rocketmq-tx-cdc');
  const orders = Number(process.env.DEMO_ORDERS ?? 20);
  const run = Date.now().toString(36);
  const ds = await openDatabase(dbUrl, { poolSize: 8 });
  await migrate(ds);

  // The engine, as users run it: the CLI in a process of its own.
  const engineName = 'demo-cdc';
  const cli = spawn(
    process.execPath,
    ['-r', 'ts-node/register/transpile-only', path.join(REPO, 'src/cli/main.ts'), 'cdc'].concat([
      '--db-url',
      dbUrl,
      '--namesrv',
      namesrv,
      '--home',
      home,
      '--name',
      engineName,
      '--progress-interval',
      '5s',
    ]),
    { cwd: REPO, env: { ...process.env, TS_NODE_TRANSPILE_ONLY: '1' }, stdio: ['ignore', 'inherit', 'pipe'] },
  );
  let engineLog = '';
  cli.stderr.on('data', (d: Buffer) => {
    engineLog += d.toString();
    process.stdout.write(d.toString().replace(/^/gm, '  '));
  });
  const exited = new Promise<number | null>((resolve) => cli.on('close', resolve));
  const until = async (what: string, cond: () => boolean | Promise<boolean>, ms: number) => {
    for (const deadline = Date.now() + ms; !(await cond());) {
      if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  };

  // Applied once per order: the consumed_event row and the handler's writes commit together.
  const applied = new Map<string, number>();
  const outcomes: ConsumeOutcome[] = [];
  const onOutcome = (o: ConsumeOutcome) => {
    outcomes.push(o);
    if (o.kind !== 'APPLIED') return;
    const { orderId } = o.envelope.data as { orderId: string };
    applied.set(orderId, (applied.get(orderId) ?? 0) + 1);
  };
  const consumer = new IdempotentConsumer({
    endpoints,
    dataSource: ds,
    consumerGroup: `cdc-demo-inventory-${run}`,
    subscriptions: [{ topic: TOPIC, tag: `cdc-${run}` }],
    handlers: [on(OrderPlaced, async () => undefined)],
    onOutcome,
  });
  const producer = new TransactionalProducer({
    endpoints,
    dataSource: ds,
    producerGroup: 'cdc-demo-orders',
    topics: [TOPIC],
    delivery: 'cdc',
  });
  const committed: string[] = [];
  const refused: string[] = [];
  try {
    await until('the CDC engine', () => engineLog.includes(`engine ${engineName} running`), 240_000);
    await consumer.start();
    await producer.start();
    say(`placing ${orders} orders with delivery 'cdc' (qty above ${MAX_QTY} is refused: rolled back)`);
    for (let i = 0; i < orders; i++) {
      const id = `cdc-${run}-${i}`;
      const qty = 1 + ((i * 7) % 8);
      const event = OrderPlaced.create({
        aggregateId: id,
        aggregateVersion: 1,
        data: { orderId: id, customer: `c${i % 3}`, sku: 'sku-1', qty, channel: 'import' },
      });
      try {
        await producer.transact({ topic: TOPIC, tag: `cdc-${run}`, event }, async (manager, { txId }) => {
          await manager.insert(ShopOrder, {
            id,
            customer: `c${i % 3}`,
            sku: 'sku-1',
            qty,
            channel: 'import',
            txId,
          });
          if (qty > MAX_QTY) throw new OrderRefused(`order ${id}: qty ${qty} > ${MAX_QTY}`);
        });
        committed.push(id);
      } catch (err) {
        if (!(err instanceof OrderRefused)) throw err;
        refused.push(id);
      }
    }
    say(`${committed.length} committed, ${refused.length} refused; waiting for the consumer`);
    await until('every committed order applied', () => committed.every((id) => applied.has(id)), 120_000);
  } finally {
    await producer.shutdown().catch(() => undefined);
    await consumer.shutdown().catch(() => undefined);
    cli.kill('SIGTERM');
    await exited;
    await ds.destroy();
  }
  const twice = [...applied.values()].filter((n) => n > 1).length;
  const leaked = refused.filter((id) => applied.has(id));
  const duplicates = outcomes.filter((o) => o.kind === 'DUPLICATE').length;
  say('');
  say(`summary of cdc run ${run}:`);
  say(`  orders committed            ${committed.length}`);
  say(`  orders refused (rolled back) ${refused.length}`);
  say(
    `  OrderPlaced applied          ${committed.filter((id) => applied.has(id)).length} (each once: ${twice === 0})`,
  );
  say(`  refused orders delivered     ${leaked.length}`);
  say(`  redeliveries deduplicated    ${duplicates}`);
  const ok = twice === 0 && leaked.length === 0 && committed.every((id) => applied.get(id) === 1);
  say(ok ? 'self-check passed' : 'self-check FAILED');
  return ok ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(
      `cdc demo failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  },
);
