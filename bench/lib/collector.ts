/**
 * The bench's correctness check: a raw SimpleConsumer per topic, filtered by the run's tag, that
 * registers its group before anything is produced and receives only between measurements (so it
 * takes no CPU from the columns while they are timed).
 */
import { SimpleConsumer } from 'rocketmq-client-nodejs';
import { ENDPOINTS, quietLogger } from './env';

export interface DrainReport {
  topic: string;
  expected: number;
  received: number;
  missing: string[];
  /** Rolled-back keys that were delivered: must be empty. */
  forbidden: string[];
  /** Deliveries of a key already seen (at-least-once redeliveries). */
  duplicates: number;
  elapsedMs: number;
  /** When the last expected key arrived, ms after the drain started (before the straggler round). */
  allArrivedMs: number;
}

export class Collector {
  private readonly consumer: SimpleConsumer;
  private readonly seen = new Set<string>();
  private duplicates = 0;

  constructor(
    readonly topic: string,
    readonly tag: string,
    readonly group: string,
  ) {
    this.consumer = new SimpleConsumer({
      endpoints: ENDPOINTS,
      namespace: '',
      consumerGroup: group,
      subscriptions: new Map([[topic, tag]]),
      awaitDuration: 5000,
      requestTimeout: 3000,
      logger: quietLogger,
    });
  }

  /** Starts the client and completes one long poll, so the group's position exists at the proxy. */
  async start(): Promise<this> {
    try {
      await this.consumer.startup();
    } catch (err) {
      await this.consumer.shutdown().catch(() => undefined);
      throw err;
    }
    await this.receiveOnce(1000);
    return this;
  }

  has(key: string): boolean {
    return this.seen.has(key);
  }

  private async receiveOnce(wait: number): Promise<number> {
    let views;
    try {
      views = await this.consumer.receive(32, 30_000);
    } catch {
      await new Promise((r) => setTimeout(r, wait));
      return 0;
    }
    for (const v of views) {
      let fresh = false;
      for (const k of v.keys) {
        if (this.seen.has(k)) continue;
        this.seen.add(k);
        fresh = true;
      }
      if (!fresh) this.duplicates++;
    }
    await Promise.all(views.map((v) => this.consumer.ack(v).catch(() => undefined)));
    return views.length;
  }

  /**
   * Receives until every expected key arrived (or timeout), then one more empty long poll, and
   * reports missing keys and any forbidden (rolled-back) key that was delivered.
   */
  async drain(
    expected: Iterable<string>,
    forbidden: Iterable<string>,
    timeoutMs: number,
  ): Promise<DrainReport> {
    const start = Date.now();
    const want = [...expected];
    let outstanding = want.filter((k) => !this.seen.has(k));
    const loops = 4;
    while (outstanding.length > 0 && Date.now() - start < timeoutMs) {
      await Promise.all(Array.from({ length: loops }, () => this.receiveOnce(200)));
      outstanding = outstanding.filter((k) => !this.seen.has(k));
    }
    const allArrivedMs = Date.now() - start;
    // Rolled-back messages would arrive among the others; one more round catches stragglers.
    await Promise.all(Array.from({ length: loops }, () => this.receiveOnce(200)));
    const forbiddenSeen = [...forbidden].filter((k) => this.seen.has(k));
    return {
      topic: this.topic,
      expected: want.length,
      received: want.length - outstanding.length,
      missing: outstanding.slice(0, 20),
      forbidden: forbiddenSeen.slice(0, 20),
      duplicates: this.duplicates,
      elapsedMs: Date.now() - start,
      allArrivedMs,
    };
  }

  async stop(): Promise<void> {
    await this.consumer.shutdown().catch(() => undefined);
  }
}
