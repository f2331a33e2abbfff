import { spawn } from 'node:child_process';
import { once } from 'node:events';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { Producer } from 'rocketmq-client-nodejs';
import type { DataSource } from 'typeorm';
import { IdempotentConsumer, createEnvelope, uuidv7 } from '../../src';
import { ensureSchema, openDataSource, sql } from '../helpers/db';
import { ENDPOINTS, waitFor } from '../helpers/env';

const TOPIC = 'rmqtx_normal_4';
const GROUP = `it_cons_crash_${process.pid}_${Date.now().toString(36)}`;
const CHILD = path.join(__dirname, '..', 'helpers', 'consumer-child.ts');
const quiet = { info() {}, warn() {}, error() {}, debug() {} };

describe('consumer killed with SIGKILL after the DB commit and before the ack', () => {
  let ds: DataSource;
  let producer: Producer;
  let survivor: IdempotentConsumer | undefined;

  beforeAll(async () => {
    ds = await openDataSource();
    await ensureSchema(ds);
    producer = new Producer({ endpoints: ENDPOINTS, namespace: '', logger: quiet });
    await producer.startup();
  });

  afterAll(async () => {
    await survivor?.shutdown();
    await producer?.shutdown().catch(() => undefined);
    await ds?.destroy();
  });

  it('the redelivery is a duplicate: effect once, acked by the next instance', async () => {
    const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', CHILD, TOPIC, GROUP], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, TS_NODE_TRANSPILE_ONLY: '1' },
    });
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = once(child, 'exit');
    const lines = readline.createInterface({ input: child.stdout! });
    const next = () =>
      Promise.race([
        once(lines, 'line').then(([l]) => JSON.parse(String(l)) as { window: string; eventId?: string }),
        exited.then(([code]) => {
          throw new Error(`consumer child exited early (code ${code}): ${stderr}`);
        }),
      ]);
    expect((await next()).window).toBe('started');
    const cart = `cart-${uuidv7()}`;
    const event = createEnvelope({
      eventType: 'ItemAdded',
      eventVersion: 1,
      aggregateType: 'Cart',
      aggregateId: cart,
      aggregateVersion: 1,
      data: { sku: 'K', qty: 1 },
    });
    await producer.send({
      topic: TOPIC,
      tag: GROUP,
      body: Buffer.from(JSON.stringify(event)),
      properties: new Map(),
    });
    const inWindow = await next();
    expect(inWindow).toEqual({ window: 'after-commit', eventId: event.eventId });
    child.kill('SIGKILL');
    await exited;
    const rows = () =>
      ds.query(
        sql('SELECT event_id FROM test_consumer_effect WHERE consumer_group = ? AND aggregate_id = ?'),
        [GROUP, cart],
      );
    expect(await rows()).toHaveLength(1); // committed before the kill

    survivor = new IdempotentConsumer({
      endpoints: ENDPOINTS,
      dataSource: ds,
      consumerGroup: GROUP,
      subscriptions: [{ topic: TOPIC, tag: GROUP }],
      startTimeoutMs: 30_000,
      handlers: [
        {
          eventType: 'ItemAdded',
          eventVersion: 1,
          handle: async (e, { manager }) => {
            await manager.query(
              sql(
                'INSERT INTO test_consumer_effect (consumer_group, aggregate_id, aggregate_version, event_id) VALUES (?, ?, ?, ?)',
              ),
              [GROUP, e.aggregateId, e.aggregateVersion, e.eventId],
            );
          },
        },
      ],
    });
    await survivor.start();
    // The child received it with a 10 s invisible duration; then the broker redelivers it.
    await waitFor(() => survivor!.stats.duplicates >= 1, {
      timeoutMs: 90_000,
      description: 'redelivery after the crash recognised as a duplicate',
    });
    expect(survivor.stats.applied).toBe(0);
    expect(await rows()).toEqual([{ event_id: event.eventId }]);
  });
});
