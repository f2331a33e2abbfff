import { SimpleConsumer } from 'rocketmq-client-nodejs';
import type { MessageView } from 'rocketmq-client-nodejs';
import { ForwardMessageToDeadLetterQueueRequest } from 'rocketmq-client-nodejs/proto/apache/rocketmq/v2/service_pb';
import { Resource } from 'rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb';
import { BrokerUnavailableError } from '../errors';
import { errorFields, type Logger } from '../util/logger';
import { withTimeout } from '../util/time';
import { startClient } from './startup';
import { useCustomCa } from './tls';
import { clientLogger } from './clientLogger';
import { sessionCredentials } from './credentials';
import type { ConsumerGateway, ConsumerGatewayConfig, InboundMessage } from './consumerGateway';

interface ClientInbound extends InboundMessage {
  readonly view: MessageView;
}

type SettingsListener = (endpoints: unknown, settings: { getBackoffPolicy(): unknown }) => void;

/**
 * ConsumerGateway over the client's SimpleConsumer. Why not its PushConsumer (1.0.8): it
 * ignores the proxy's customized backoff (a failed message is made visible again at once),
 * runs a whole received batch concurrently, and its shutdown always sleeps. The SimpleConsumer
 * lets the SDK own backoff, concurrency and shutdown.
 */
export class RocketMqConsumerGateway implements ConsumerGateway {
  /** Built on first use (start()), as RocketMqGateway's client: its constructor starts a timer. */
  private built: SimpleConsumer | undefined;
  private maxAttempts: number | undefined;

  constructor(
    private readonly config: ConsumerGatewayConfig,
    private readonly logger: Logger,
  ) {}

  private get consumer(): SimpleConsumer {
    return (this.built ??= this.build());
  }

  private build(): SimpleConsumer {
    const consumer = new SimpleConsumer({
      endpoints: this.config.endpoints,
      namespace: this.config.namespace,
      consumerGroup: this.config.consumerGroup,
      subscriptions: new Map(this.config.subscriptions),
      awaitDuration: this.config.longPollingMs,
      requestTimeout: this.config.requestTimeoutMs,
      sslEnabled: this.config.sslEnabled,
      logger: clientLogger(this.logger),
      ...sessionCredentials(this.config.credentials),
    });
    if (this.config.tlsCa) useCustomCa(consumer, this.config.tlsCa);
    this.captureRetryPolicy(consumer);
    return consumer;
  }

  get maxDeliveryAttempts(): number | undefined {
    return this.maxAttempts;
  }

  async start(): Promise<void> {
    try {
      // startup() resolves after the proxy's first settings command, so the subscription is
      // known to the proxy before the first receive (apache/rocketmq #8133).
      await startClient(this.consumer, this.config.startTimeoutMs, {
        what: 'consumer',
        endpoints: this.config.endpoints,
        resource: `group ${this.config.consumerGroup} and topics ${[...this.config.subscriptions.keys()].join(', ')}`,
        accessKey: this.config.credentials?.accessKey,
      });
    } catch (err) {
      await this.shutdown();
      throw err;
    }
  }

  async receive(max: number): Promise<InboundMessage[]> {
    const views = await this.consumer.receive(max, this.config.invisibleDurationMs);
    return views.map((view) => toInbound(view));
  }

  async ack(message: InboundMessage): Promise<void> {
    await this.consumer.ack((message as ClientInbound).view);
  }

  async retryLater(message: InboundMessage, delayMs: number): Promise<void> {
    await this.consumer.changeInvisibleDuration((message as ClientInbound).view, delayMs);
  }

  async deadLetter(message: InboundMessage): Promise<void> {
    const view = (message as ClientInbound).view;
    const request = new ForwardMessageToDeadLetterQueueRequest()
      .setGroup(resource(this.config.namespace, this.config.consumerGroup))
      .setTopic(resource(this.config.namespace, view.topic))
      .setReceiptHandle(view.receiptHandle)
      .setMessageId(view.messageId)
      .setDeliveryAttempt(message.deliveryAttempt)
      .setMaxDeliveryAttempts(this.maxAttempts ?? message.deliveryAttempt);
    const response = await this.consumer.forwardMessageToDeadLetterQueueViaRpc(
      view.endpoints,
      request,
      this.config.requestTimeoutMs,
    );
    const status = response.getStatus()?.toObject();
    if (!status || status.code !== 20000) {
      throw new BrokerUnavailableError(
        `proxy refused to dead-letter message ${view.messageId}: ${status ? `${status.code} ${status.message}` : 'no status'}`,
      );
    }
  }

  /** Never rejects: the client's shutdown rejects when the proxy is gone. */
  async shutdown(): Promise<void> {
    const client = this.built;
    if (client === undefined) return; // never started: no client, nothing to close
    try {
      await withTimeout(
        client.shutdown(),
        this.config.shutdownTimeoutMs,
        () => new Error(`consumer client shutdown did not finish within ${this.config.shutdownTimeoutMs} ms`),
      );
    } catch (err) {
      this.logger.warn(errorFields(err), 'RocketMQ consumer client shutdown was not clean');
    }
  }

  /** The proxy sends the group's retry policy in its settings; the client drops the customized kind. */
  private captureRetryPolicy(consumer: SimpleConsumer): void {
    const target = consumer as unknown as { onSettingsCommand: SettingsListener };
    const original = target.onSettingsCommand.bind(consumer);
    target.onSettingsCommand = (endpoints, settings) => {
      try {
        const policy = settings.getBackoffPolicy() as { getMaxAttempts(): number } | undefined;
        const max = policy?.getMaxAttempts();
        if (typeof max === 'number' && max > 0) this.maxAttempts = max;
      } catch (err) {
        this.logger.debug(errorFields(err), 'could not read the retry policy from the proxy settings');
      }
      original(endpoints, settings);
    };
  }
}

function resource(namespace: string, name: string): Resource {
  return new Resource().setResourceNamespace(namespace).setName(name);
}

function toInbound(view: MessageView): ClientInbound {
  const properties: Record<string, string> = {};
  for (const [k, v] of view.properties ?? new Map<string, string>()) properties[k] = v;
  return {
    view,
    messageId: view.messageId,
    topic: view.topic,
    ...(view.tag !== undefined ? { tag: view.tag } : {}),
    keys: [...(view.keys ?? [])],
    properties,
    body: view.body,
    deliveryAttempt: view.deliveryAttempt ?? 1,
    ...(view.bornTimestamp ? { bornAt: view.bornTimestamp } : {}),
  };
}
