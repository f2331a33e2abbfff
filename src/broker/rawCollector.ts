import { SimpleConsumer } from 'rocketmq-client-nodejs';

/** A message as a raw consumer saw it. */
export interface CollectedMessage {
  messageId: string;
  topic: string;
  properties: Record<string, string>;
}

const quiet = { info() {}, warn() {}, error() {}, debug() {} };

/**
 * Receives everything on some topics into memory with a plain SimpleConsumer of its own group
 * (no inbox, no dedupe: every delivery is counted) and acks it. Used by the crash-window runner.
 * Start it before producing: a new group does not see older messages.
 */
export class RawCollector {
  readonly received: CollectedMessage[] = [];
  private readonly consumer: SimpleConsumer;
  private running = false;
  private loop: Promise<void> = Promise.resolve();
  private polls = 0;

  constructor(endpoints: string, group: string, topics: readonly string[], namespace = '') {
    this.consumer = new SimpleConsumer({
      endpoints,
      namespace,
      consumerGroup: group,
      subscriptions: new Map(topics.map((t) => [t, '*'])),
      awaitDuration: 5000,
      requestTimeout: 3000,
      logger: quiet,
    });
  }

  /** Resolves once a first long poll completed (the subscription is live at the proxy). */
  async start(timeoutMs = 30_000): Promise<void> {
    try {
      await this.consumer.startup();
    } catch (err) {
      await this.consumer.shutdown().catch(() => undefined);
      throw err;
    }
    this.running = true;
    this.loop = this.run();
    const deadline = Date.now() + timeoutMs;
    while (this.polls === 0) {
      if (Date.now() > deadline) throw new Error('the collector saw no completed receive round');
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  private async run(): Promise<void> {
    while (this.running) {
      try {
        const views = await this.consumer.receive(32, 15_000);
        for (const v of views) {
          const properties: Record<string, string> = {};
          for (const [k, val] of v.properties) properties[k] = val;
          this.received.push({ messageId: v.messageId, topic: v.topic, properties });
        }
        await Promise.all(views.map((v) => this.consumer.ack(v).catch(() => undefined)));
      } catch {
        if (this.running) await new Promise((r) => setTimeout(r, 200));
      }
      this.polls++;
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
    await this.consumer.shutdown().catch(() => undefined);
  }
}
