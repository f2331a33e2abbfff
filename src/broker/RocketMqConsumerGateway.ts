import { SimpleConsumer } from 'rocketmq-client-nodejs';
import type { MessageView } from 'rocketmq-client-nodejs';
import { FilterExpression } from 'rocketmq-client-nodejs/dist/consumer/FilterExpression';
import type { MessageQueue } from 'rocketmq-client-nodejs/dist/route/MessageQueue';
import type { TopicRouteData } from 'rocketmq-client-nodejs/dist/route/TopicRouteData';
import {
  AckMessageRequest,
  ForwardMessageToDeadLetterQueueRequest,
} from 'rocketmq-client-nodejs/proto/apache/rocketmq/v2/service_pb';
import {
  Code,
  Permission,
  Resource,
  type Status,
} from 'rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb';
import type { ReceiveMessageRequest } from 'rocketmq-client-nodejs/proto/apache/rocketmq/v2/service_pb';
import { BrokerUnavailableError } from '../errors';
import { errorFields, type Logger } from '../util/logger';
import { withTimeout } from '../util/time';
import { startClient } from './startup';
import { useCustomCa } from './tls';
import { clientLogger } from './clientLogger';
import { sessionCredentials } from './credentials';
import type { ConsumerGateway, ConsumerGatewayConfig, InboundMessage } from './consumerGateway';
import { AckBatcher } from './ackBatcher';
import { ReceiveLanes } from './receiveLanes';

interface ClientInbound extends InboundMessage {
  readonly view: MessageView;
}

type SettingsListener = (endpoints: unknown, settings: { getBackoffPolicy(): unknown }) => void;

/** The SimpleConsumer's protected calls a receive on a chosen queue needs (1.0.x). */
interface ReceiveCalls {
  getRouteData(topic: string): Promise<TopicRouteData>;
  wrapReceiveMessageRequest(
    batchSize: number,
    mq: MessageQueue,
    filterExpression: FilterExpression,
    invisibleDuration: number,
    longPollingTimeout: number,
  ): ReceiveMessageRequest;
  receiveMessage(
    request: ReceiveMessageRequest,
    mq: MessageQueue,
    awaitDuration: number,
  ): Promise<MessageView[]>;
}

interface Lane {
  readonly key: string;
  readonly mq: MessageQueue;
  readonly filter: FilterExpression;
}

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
  /** Acks of one topic on one proxy share an AckMessageRequest (the official ack sends one each). */
  private readonly acks = new AckBatcher<MessageView>((_key, views) => this.sendAcks(views));
  private readonly lanes = new ReceiveLanes();
  private readonly filters: ReadonlyMap<string, FilterExpression>;

  constructor(
    private readonly config: ConsumerGatewayConfig,
    private readonly logger: Logger,
  ) {
    this.filters = new Map(
      [...config.subscriptions].map(([topic, tag]) => [topic, new FilterExpression(tag)]),
    );
  }

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

  /**
   * Long-polls the lane (topic x broker) with the fewest receives open; the request is the one
   * the client's own receive() builds for the queue it picks (ReceiveLanes says why not its
   * round-robin).
   */
  async receive(max: number): Promise<InboundMessage[]> {
    const client = this.consumer as unknown as ReceiveCalls;
    const candidates: Lane[] = [];
    for (const [topic, filter] of this.filters) {
      const route = await client.getRouteData(topic);
      for (const mq of readableQueues(route))
        candidates.push({ key: `${topic}\n${mq.broker.name}`, mq, filter });
    }
    const lane = this.lanes.pick(candidates);
    if (lane === undefined)
      throw new BrokerUnavailableError(`no readable queue for ${[...this.filters.keys()].join(', ')}`);
    const { invisibleDurationMs, longPollingMs } = this.config;
    const views = await this.lanes.within(lane.key, () =>
      client.receiveMessage(
        client.wrapReceiveMessageRequest(max, lane.mq, lane.filter, invisibleDurationMs, longPollingMs),
        lane.mq,
        longPollingMs,
      ),
    );
    return views.map((view) => toInbound(view));
  }

  ack(message: InboundMessage): Promise<void> {
    const view = (message as ClientInbound).view;
    return this.acks.add(`${view.endpoints.facade}\n${view.topic}`, view);
  }

  /** One AckMessageRequest for acks of one topic on one proxy; each entry's own status decides. */
  private async sendAcks(views: readonly MessageView[]): Promise<Array<Error | undefined>> {
    const first = views[0]!;
    // The same resources as the official ack (the namespace travels in the request headers).
    const request = new AckMessageRequest()
      .setGroup(new Resource().setName(this.config.consumerGroup))
      .setTopic(new Resource().setName(first.topic));
    for (const view of views) {
      request.addEntries().setMessageId(view.messageId).setReceiptHandle(view.receiptHandle);
    }
    const response = await this.consumer.ackMessageViaRpc(
      first.endpoints,
      request,
      this.config.requestTimeoutMs,
    );
    const status = response.getStatus()?.toObject();
    const byHandle = new Map<string, Status.AsObject | undefined>();
    const byId = new Map<string, Status.AsObject | undefined>();
    for (const entry of response.getEntriesList()) {
      const s = entry.getStatus()?.toObject();
      byHandle.set(entry.getReceiptHandle(), s);
      byId.set(entry.getMessageId(), s);
    }
    // Per entry when the proxy reports entries (MULTIPLE_RESULTS when some failed); the
    // response's status (OK only when every entry was acked) otherwise.
    return views.map((view) => {
      const s = byHandle.get(view.receiptHandle) ?? byId.get(view.messageId) ?? status;
      return s?.code === Code.OK
        ? undefined
        : new BrokerUnavailableError(
            `proxy refused to ack message ${view.messageId}: ${s ? `${s.code} ${s.message}` : 'no status'}`,
          );
    });
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
    if (!status || status.code !== Code.OK) {
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

/** The queues the client's own receive() chooses from: queue 0 of each broker, readable. */
function readableQueues(route: TopicRouteData): MessageQueue[] {
  return route.messageQueues.filter(
    (mq) =>
      mq.queueId === 0 && (mq.permission === Permission.READ || mq.permission === Permission.READ_WRITE),
  );
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
