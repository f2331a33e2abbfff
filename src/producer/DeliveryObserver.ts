import type { ConsumerGateway } from '../broker/consumerGateway';
import { errorFields, type Logger } from '../util/logger';

/** What the observer saw of this producer group's messages. */
export interface DeliveryObserverStats {
  /** Messages of this producer group received (and acked) by the confirmation consumer. */
  observed: number;
  /** Messages of other producer groups on the same topics (acked and ignored). */
  ignored: number;
  /** Failed receive or ack calls (retried after a pause). */
  errors: number;
}

interface Deps {
  gateway: ConsumerGateway;
  producerGroup: string;
  /** A delivered event: its outbox row is confirmed (SENT), the discard recovery leaves it alone. */
  onEvent: (eventId: string) => void;
  /** A delivered transaction (one of its events seen). */
  onTransaction: (txId: string) => void;
  logger: Logger;
  /** Pause after a failed receive or ack. */
  retryDelayMs?: number;
}

/**
 * `confirmBy: 'delivery'`: confirms an event when the broker delivers it to the producer group's
 * own confirmation consumer, not when the proxy acknowledges its EndTransaction. A proxy in
 * Cluster mode forwards EndTransaction to the broker one way and answers OK before the broker
 * applied it: a broker that dies then has the half message and no commit, and if its checks of
 * that half are all wasted (the channel of a killed instance, no channel yet after the broker's
 * restart) it discards the half. An event confirmed on the proxy's OK would then never be
 * republished; an event confirmed on delivery is republished by the discard recovery.
 */
export class DeliveryObserver {
  private readonly stats_: DeliveryObserverStats = { observed: 0, ignored: 0, errors: 0 };
  private running = false;
  private loop: Promise<void> = Promise.resolve();
  private pause: { timer: NodeJS.Timeout; resolve: () => void } | undefined;

  constructor(private readonly deps: Deps) {}

  get stats(): Readonly<DeliveryObserverStats> {
    return { ...this.stats_ };
  }

  async start(): Promise<void> {
    await this.deps.gateway.start();
    this.running = true;
    this.loop = this.run();
  }

  /**
   * Stops receiving: closes the client (the long poll under way ends with it; messages received
   * and not acked yet come back to another instance after their invisible time), then waits for
   * the loop.
   */
  async stop(): Promise<void> {
    this.running = false;
    if (this.pause) {
      clearTimeout(this.pause.timer);
      this.pause.resolve();
    }
    await this.deps.gateway.shutdown();
    await this.loop;
  }

  private async run(): Promise<void> {
    const { gateway, producerGroup, logger } = this.deps;
    while (this.running) {
      try {
        const messages = await gateway.receive(32);
        for (const m of messages) {
          const ours = m.properties.TX_ORIGIN === producerGroup;
          const eventId = m.properties.EVENT_ID;
          const txId = m.properties.TX_ID;
          if (ours && eventId) {
            this.stats_.observed++;
            this.deps.onEvent(eventId);
            if (txId) this.deps.onTransaction(txId);
          } else {
            this.stats_.ignored++;
          }
        }
        // Acked after the confirmations were queued: a lost ack redelivers (a second confirmation
        // of the same event changes nothing).
        await Promise.all(messages.map((m) => gateway.ack(m)));
      } catch (err) {
        if (!this.running) return;
        this.stats_.errors++;
        logger.warn(errorFields(err), 'delivery confirmation consumer: receive or ack failed; retrying');
        await new Promise<void>((resolve) => {
          this.pause = { timer: setTimeout(resolve, this.deps.retryDelayMs ?? 1000), resolve };
        });
        this.pause = undefined;
      }
    }
  }
}
