/**
 * Smoke test of the local broker with the raw rocketmq-client-nodejs client (no SDK code):
 * normal send/receive, transactional commit, rollback, and broker check-back.
 * Needs a running broker: `npm run rocketmq:start` (or ROCKETMQ_ENDPOINTS).
 */
import { randomUUID } from 'node:crypto';
import { format } from 'node:util';
import { Producer, SimpleConsumer, type MessageView } from 'rocketmq-client-nodejs';
import { TransactionResolution } from 'rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb';
import { ENDPOINTS, waitFor } from '../helpers/env';

const NORMAL_TOPIC = 'rmqtx_normal_0';
const TX_TOPIC = 'rmqtx_tx_0';
const RUN = randomUUID().slice(0, 8);
const ID_PROP = 'smoke_id';
const CASE_PROP = 'smoke_case';

/** The client's default logger writes under the home folder: keep it quiet, keep errors for diagnostics. */
function quietLogger(name: string, sink: string[]) {
  return {
    info() {},
    debug() {},
    warn() {},
    error(...args: unknown[]) {
      sink.push(`${name}: ${format(...args)}`);
    },
  };
}

const clientErrors: string[] = [];
/** Consumer closes still waiting for their in-flight long poll (<= 5 s); awaited once at the end. */
const pendingCloses: Promise<unknown>[] = [];

/**
 * A SimpleConsumer with its own group (new per run), polling in the background, acking everything,
 * indexing received messages by our id property. `ready` resolves after the first receive round
 * returned: by then the group's offsets exist, so anything sent afterwards is delivered to it.
 */
class Collector {
  readonly received = new Map<string, MessageView>();
  readonly receiveErrors: unknown[] = [];
  rounds = 0;
  private running = true;
  private loop?: Promise<void>;

  private constructor(
    readonly topic: string,
    readonly group: string,
    private readonly consumer: SimpleConsumer,
  ) {}

  static async start(topic: string): Promise<Collector> {
    const group = `rmqtx_smoke_${topic}_${RUN}`;
    const consumer = new SimpleConsumer({
      endpoints: ENDPOINTS,
      namespace: '',
      consumerGroup: group,
      subscriptions: new Map([[topic, '*']]),
      // The proxy clamps long polling to >= 5 s; deadline = requestTimeout + awaitDuration must exceed it.
      awaitDuration: 5000,
      requestTimeout: 3000,
      logger: quietLogger(`consumer ${group}`, clientErrors),
    });
    await consumer.startup(); // waits until the proxy has our settings (avoids apache/rocketmq #8133)
    const c = new Collector(topic, group, consumer);
    c.loop = c.run();
    await waitFor(() => c.rounds > 0, { timeoutMs: 30_000, description: `first receive round of ${group}` });
    return c;
  }

  private async run(): Promise<void> {
    while (this.running) {
      try {
        const views = await this.consumer.receive(16, 15_000);
        for (const view of views) {
          const id = view.properties.get(ID_PROP);
          if (id) this.received.set(id, view);
          await this.consumer.ack(view);
        }
      } catch (err) {
        if (!this.running) break;
        this.receiveErrors.push(err);
        await new Promise((r) => setTimeout(r, 200));
      }
      this.rounds++;
    }
  }

  async close(): Promise<void> {
    this.running = false;
    try {
      await this.consumer.shutdown(); // cancels the in-flight long poll
    } finally {
      await this.loop;
    }
  }
}

function newId(kind: string): string {
  return `${kind}-${RUN}-${randomUUID().slice(0, 8)}`;
}

function message(topic: string, id: string, kase: string) {
  return {
    topic,
    body: Buffer.from(JSON.stringify({ id, kase })),
    keys: [id],
    tag: 'smoke',
    properties: new Map([
      [ID_PROP, id],
      [CASE_PROP, kase],
    ]),
  };
}

async function shutdownQuietly(client: { shutdown(): Promise<void> } | undefined): Promise<void> {
  if (!client) return;
  try {
    await client.shutdown();
  } catch (err) {
    clientErrors.push(`shutdown: ${String(err)}`);
  }
}

afterAll(async () => {
  await Promise.all(pendingCloses);
  if (clientErrors.length) console.log(`client errors seen (for diagnostics):\n${clientErrors.join('\n')}`);
});

describe('local RocketMQ broker smoke test (raw rocketmq-client-nodejs)', () => {
  describe('normal message', () => {
    let collector: Collector | undefined;
    let producer: Producer | undefined;

    afterAll(async () => {
      // Not awaited here: the close finishes its long poll while the next tests run.
      if (collector) pendingCloses.push(collector.close().catch((e) => clientErrors.push(String(e))));
      await shutdownQuietly(producer);
    });

    it(`is sent to ${NORMAL_TOPIC} and received by a SimpleConsumer`, async () => {
      collector = await Collector.start(NORMAL_TOPIC);
      producer = new Producer({
        endpoints: ENDPOINTS,
        namespace: '',
        topics: [NORMAL_TOPIC],
        logger: quietLogger('normal producer', clientErrors),
      });
      await producer.startup();

      const id = newId('normal');
      const t0 = Date.now();
      const receipt = await producer.send(message(NORMAL_TOPIC, id, 'normal'));
      expect(receipt.messageId).toBeTruthy();

      const c = collector;
      await waitFor(() => c.received.has(id), { timeoutMs: 30_000, description: `normal message ${id}` });
      const view = c.received.get(id)!;
      console.log(`normal message delivered ${Date.now() - t0} ms after send`);
      expect(view.topic).toBe(NORMAL_TOPIC);
      expect(view.keys).toContain(id);
      expect(view.tag).toBe('smoke');
      expect(JSON.parse(view.body.toString())).toEqual({ id, kase: 'normal' });
    });
  });

  describe('transactional messages', () => {
    let collector: Collector;
    let producer: Producer;
    const checks: { id: string; kase: string; at: number }[] = [];

    beforeAll(async () => {
      collector = await Collector.start(TX_TOPIC);
      producer = new Producer({
        endpoints: ENDPOINTS,
        namespace: '',
        topics: [TX_TOPIC], // must be declared to receive check-backs for it
        logger: quietLogger('tx producer', clientErrors),
        checker: {
          async check(view: MessageView): Promise<TransactionResolution> {
            const id = view.properties.get(ID_PROP) ?? '';
            const kase = view.properties.get(CASE_PROP) ?? '';
            checks.push({ id, kase, at: Date.now() });
            // Only our own orphan of this run is committed; anything else (e.g. a leftover from an
            // older run) gets no answer, so the broker keeps it to itself.
            if (kase === 'orphan' && id.includes(RUN)) return TransactionResolution.COMMIT;
            return TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED;
          },
        },
      });
      await producer.startup();
    });

    afterAll(async () => {
      await collector?.close().catch((e) => clientErrors.push(String(e)));
      await shutdownQuietly(producer);
    });

    it('committed -> delivered', async () => {
      const id = newId('commit');
      const tx = producer.beginTransaction();
      await producer.send(message(TX_TOPIC, id, 'commit'), tx);
      expect(collector.received.has(id)).toBe(false);
      const t0 = Date.now();
      await tx.commit();
      await waitFor(() => collector.received.has(id), {
        timeoutMs: 30_000,
        description: `committed message ${id}`,
      });
      console.log(`committed message delivered ${Date.now() - t0} ms after commit`);
      expect(JSON.parse(collector.received.get(id)!.body.toString())).toEqual({ id, kase: 'commit' });
    });

    it('rolled back -> never delivered (a later committed marker arrives, the rolled-back one does not)', async () => {
      const rolledBack = newId('rollback');
      const tx1 = producer.beginTransaction();
      await producer.send(message(TX_TOPIC, rolledBack, 'rollback'), tx1);
      await tx1.rollback();

      const marker = newId('marker');
      const tx2 = producer.beginTransaction();
      await producer.send(message(TX_TOPIC, marker, 'marker'), tx2);
      await tx2.commit();

      await waitFor(() => collector.received.has(marker), {
        timeoutMs: 30_000,
        description: `marker ${marker}`,
      });
      expect(collector.received.has(rolledBack)).toBe(false);
      expect(checks.find((c) => c.id === rolledBack)).toBeUndefined();
    });

    it('left without EndTransaction -> broker check-back -> checker answers COMMIT -> delivered', async () => {
      const id = newId('orphan');
      const tx = producer.beginTransaction();
      await producer.send(message(TX_TOPIC, id, 'orphan'), tx);
      const sentAt = Date.now();
      // never tx.commit() / tx.rollback(): only the broker's check-back can resolve it

      await waitFor(() => checks.some((c) => c.id === id), {
        timeoutMs: 60_000,
        intervalMs: 50,
        description: `a check-back for ${id}`,
      });
      const check = checks.find((c) => c.id === id)!;
      expect(check.kase).toBe('orphan');

      await waitFor(() => collector.received.has(id), {
        timeoutMs: 30_000,
        description: `checked-back message ${id}`,
      });
      const deliveredAt = Date.now();
      console.log(
        `check-back latency: checker called ${check.at - sentAt} ms after the half message was sent; ` +
          `delivered ${deliveredAt - sentAt} ms after send (checks of this message: ${checks.filter((c) => c.id === id).length})`,
      );
      expect(JSON.parse(collector.received.get(id)!.body.toString())).toEqual({ id, kase: 'orphan' });
    });
  });
});
