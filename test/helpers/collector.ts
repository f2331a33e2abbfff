import { SimpleConsumer } from 'rocketmq-client-nodejs';
import { ENDPOINTS, waitFor } from './env';

export interface Received {
  messageId: string;
  topic: string;
  tag?: string;
  keys: string[];
  properties: Record<string, string>;
  body: string;
  deliveryAttempt?: number;
  /** The queue the message was stored in, read from its receipt handle (undefined if unreadable). */
  queueId?: number;
}

/**
 * RocketMQ 5.3's receipt handle: "startOffset retrieveTime invisibleTime reviveQueueId
 * topicType brokerName queueId offset commitLogOffset" (space-separated; the broker name is the
 * first field that is not a number). Undefined when the format is not that.
 */
export function queueIdOf(receiptHandle: string): number | undefined {
  const fields = receiptHandle.split(' ');
  const broker = fields.findIndex((f) => !/^-?\d+$/.test(f));
  const q = broker >= 0 ? fields[broker + 1] : undefined;
  return q !== undefined && /^\d+$/.test(q) ? Number(q) : undefined;
}

const quiet = { info() {}, warn() {}, error() {}, debug() {} };

/**
 * Receives everything on a topic into memory with a raw SimpleConsumer of its own group, acking
 * each message. Start it before producing: a new group does not see older messages.
 */
export class Collector {
  readonly received: Received[] = [];
  private readonly consumer: SimpleConsumer;
  private running = false;
  private loop: Promise<void> = Promise.resolve();
  private polls = 0;

  constructor(
    readonly topic: string,
    readonly group: string = `rmqtx_collect_${process.pid}_${Math.random().toString(36).slice(2, 8)}`,
    endpoints: string = ENDPOINTS,
  ) {
    this.consumer = new SimpleConsumer({
      endpoints,
      namespace: '',
      consumerGroup: group,
      subscriptions: new Map([[topic, '*']]),
      // The proxy clamps long polling to at least 5 s; the client deadline is requestTimeout + awaitDuration.
      awaitDuration: 5000,
      requestTimeout: 3000,
      logger: quiet,
    });
  }

  async start(): Promise<this> {
    try {
      await this.consumer.startup();
    } catch (err) {
      // A failed startup leaves the client's timers running: close it, or jest cannot exit.
      await this.consumer.shutdown().catch(() => undefined);
      throw err;
    }
    this.running = true;
    this.loop = this.run();
    // Wait for a completed long poll so the subscription is live at the proxy (apache/rocketmq #8133).
    await waitFor(() => this.polls > 0, {
      timeoutMs: 30_000,
      description: `first receive round of ${this.group}`,
    });
    return this;
  }

  private async run(): Promise<void> {
    while (this.running) {
      try {
        const views = await this.consumer.receive(16, 15_000);
        for (const v of views) {
          const properties: Record<string, string> = {};
          for (const [k, val] of v.properties) properties[k] = val;
          this.received.push({
            messageId: v.messageId,
            topic: v.topic,
            ...(v.tag !== undefined ? { tag: v.tag } : {}),
            keys: [...v.keys],
            properties,
            body: v.body.toString('utf8'),
            ...(v.deliveryAttempt !== undefined ? { deliveryAttempt: v.deliveryAttempt } : {}),
            ...(queueIdOf(v.receiptHandle) !== undefined ? { queueId: queueIdOf(v.receiptHandle) } : {}),
          });
        }
        // Acked together: one round trip per message in turn made the collector the bottleneck
        // under the kill scenario's load.
        await Promise.all(views.map((v) => this.consumer.ack(v).catch(() => undefined)));
      } catch {
        if (this.running) await new Promise((r) => setTimeout(r, 200));
      }
      this.polls++;
    }
  }

  withProperty(name: string, value: string): Received[] {
    return this.received.filter((m) => m.properties[name] === value);
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
    await this.consumer.shutdown().catch(() => undefined);
  }
}
