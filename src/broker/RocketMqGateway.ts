import { Producer } from 'rocketmq-client-nodejs';
import type { Endpoints, MessageView } from 'rocketmq-client-nodejs';
import {
  Permission,
  TransactionResolution as ProtoResolution,
  TransactionSource,
} from 'rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb';
import { BrokerUnavailableError } from '../errors';
import {
  TX_ID_PROPERTY,
  TX_ORIGIN_PROPERTY,
  TransactionResolution,
  type CheckBackMessage,
} from '../checkback/resolution';
import { errorFields, type Logger } from '../util/logger';
import { withTimeout } from '../util/time';
import { clientLogger } from './clientLogger';
import { sessionCredentials } from './credentials';
import { startClient } from './startup';
import { useCustomCa } from './tls';
import { mapSendError } from './errors';
import type { BrokerGateway, GatewayConfig, HalfMessage, OutgoingMessage } from './gateway';

/** A queue of a topic's route as the official client caches it, for the lean transport. */
export interface RouteQueue {
  queueId: number;
  /** "host:port" of the proxy that serves the queue, and its parts. */
  facade: string;
  host: string;
  port: number;
  /** Permission WRITE or READ_WRITE. */
  writable: boolean;
  /** MessageType numbers of the v2 protocol (TRANSACTION = 4, NORMAL = 1). */
  acceptMessageTypes: readonly number[];
}

interface CachedRoute {
  messageQueues: Array<{
    queueId: number;
    permission: number;
    acceptMessageTypesList: number[];
    broker: { endpoints: { facade: string; addressesList: Array<{ host: string; port: number }> } };
  }>;
}

interface RouteCacheClient {
  clientId: string;
  topicRouteCache: Map<string, CachedRoute>;
  getRouteData(topic: string): Promise<CachedRoute>;
}

interface ClientHalf extends HalfMessage {
  readonly endpoints: Endpoints;
  readonly transactionId: string;
}

/** BrokerGateway over rocketmq-client-nodejs 1.0.8, absorbing its known traits (DESIGN.md). */
export class RocketMqGateway implements BrokerGateway {
  /**
   * Built on first use (start()): the client's constructor starts an interval timer that keeps
   * the process alive until the client's shutdown, so a producer or relay that is constructed
   * and never started (or whose start failed before reaching the broker) must not build one.
   */
  private built: Producer | undefined;
  private readonly routeViews = new WeakMap<CachedRoute, RouteQueue[]>();
  /** Check-back answers decided, waiting for the client's EndTransaction (keyed by its view). */
  private readonly answers = new WeakMap<
    object,
    { message: CheckBackMessage; answer: TransactionResolution }
  >();

  constructor(
    private readonly config: GatewayConfig,
    private readonly logger: Logger,
  ) {}

  private get producer(): Producer {
    return (this.built ??= this.build());
  }

  private build(): Producer {
    const onCheckBack = this.config.onCheckBack;
    const producer = new Producer({
      endpoints: this.config.endpoints,
      namespace: this.config.namespace,
      topics: [...this.config.topics],
      sslEnabled: this.config.sslEnabled,
      requestTimeout: this.config.requestTimeoutMs,
      logger: clientLogger(this.logger),
      // Transactional sends are never retried by the client; other sends get its default 3 attempts.
      maxAttempts: 3,
      ...sessionCredentials(this.config.credentials),
      // The client throws in beginTransaction without a checker, so there is always one.
      checker: {
        check: async (view: MessageView) => {
          if (!onCheckBack) return ProtoResolution.TRANSACTION_RESOLUTION_UNSPECIFIED;
          const message = toCheckBackMessage(view);
          const answer = await onCheckBack(message).catch((err: unknown) => {
            this.logger.error({ ...errorFields(err), messageId: view.messageId }, 'check-back handler threw');
            return TransactionResolution.UNKNOWN;
          });
          // The client sends the answer right after this returns, with this same view.
          if (answer !== TransactionResolution.UNKNOWN) this.answers.set(view, { message, answer });
          return toProto(answer);
        },
      },
    });
    if (this.config.tlsCa) useCustomCa(producer, this.config.tlsCa);
    this.guardRecoverCommand(producer);
    return producer;
  }

  async start(): Promise<void> {
    try {
      await startClient(this.producer, this.config.startTimeoutMs, {
        what: 'producer',
        endpoints: this.config.endpoints,
        resource: `topics ${this.config.topics.join(', ')}`,
        accessKey: this.config.credentials?.accessKey,
      });
    } catch (err) {
      await this.shutdown();
      throw err;
    }
  }

  /** The client's id: the lean transport sends under it, so the proxy sees one client. */
  clientId(): string {
    return (this.producer as unknown as RouteCacheClient).clientId;
  }

  /**
   * The topic's queues from the client's route cache (refreshed by the client every 30 s), or
   * from one QueryRoute through the client for a topic it has not cached yet.
   */
  async routeQueues(topic: string): Promise<readonly RouteQueue[]> {
    const client = this.producer as unknown as RouteCacheClient;
    const route = client.topicRouteCache.get(topic) ?? (await client.getRouteData(topic));
    let view = this.routeViews.get(route);
    if (!view) {
      view = route.messageQueues.map((mq) => {
        const address = mq.broker.endpoints.addressesList[0]!;
        return {
          queueId: mq.queueId,
          facade: mq.broker.endpoints.facade,
          host: address.host,
          port: address.port,
          writable: mq.permission === Permission.WRITE || mq.permission === Permission.READ_WRITE,
          acceptMessageTypes: [...mq.acceptMessageTypesList],
        };
      });
      this.routeViews.set(route, view);
    }
    return view;
  }

  async sendHalf(message: OutgoingMessage): Promise<HalfMessage> {
    try {
      const transaction = this.producer.beginTransaction();
      const receipt = await this.producer.send(toClientMessage(message), transaction);
      const half: ClientHalf = {
        messageId: receipt.messageId,
        topic: message.topic,
        endpoints: receipt.endpoints,
        transactionId: receipt.transactionId,
      };
      return half;
    } catch (err) {
      throw this.sendFailure(err, message.topic);
    }
  }

  private sendFailure(err: unknown, topic: string): Error {
    return mapSendError(err, topic, 'message', this.config.endpoints, this.config.credentials?.accessKey);
  }

  async endTransaction(half: HalfMessage, commit: boolean): Promise<void> {
    const h = half as ClientHalf;
    const resolution = commit ? ProtoResolution.COMMIT : ProtoResolution.ROLLBACK;
    try {
      await this.producer.endTransaction(
        h.endpoints,
        { topic: h.topic } as Parameters<Producer['endTransaction']>[1],
        h.messageId,
        h.transactionId,
        resolution,
      );
    } catch (err) {
      throw new BrokerUnavailableError(
        `EndTransaction(${commit ? 'COMMIT' : 'ROLLBACK'}) for message ${h.messageId} failed`,
        err,
      );
    }
  }

  async send(message: OutgoingMessage): Promise<{ messageId: string }> {
    try {
      const receipt = await this.producer.send(toClientMessage(message));
      return { messageId: receipt.messageId };
    } catch (err) {
      throw this.sendFailure(err, message.topic);
    }
  }

  /** Never rejects: the client's shutdown rejects or hangs when the proxy is gone. */
  async shutdown(): Promise<void> {
    const client = this.built;
    if (client === undefined) return; // never started: no client, nothing to close
    try {
      await withTimeout(
        client.shutdown(),
        this.config.shutdownTimeoutMs,
        () => new Error(`client shutdown did not finish within ${this.config.shutdownTimeoutMs} ms`),
      );
    } catch (err) {
      this.logger.warn(errorFields(err), 'RocketMQ client shutdown was not clean');
    }
  }

  /**
   * The client calls onRecoverOrphanedTransactionCommand without awaiting it; a command with no
   * message throws there and becomes an unhandled rejection that can kill the process.
   */
  private guardRecoverCommand(producer: Producer): void {
    // The answer counts as given only once its EndTransaction returned OK: a COMMIT decided and
    // then lost (the call failed, the process died) must not confirm the event, or discard
    // recovery would skip it after the broker drops the half message.
    const client = producer as unknown as {
      endTransaction(
        endpoints: unknown,
        message: object,
        messageId: string,
        transactionId: string,
        resolution: ProtoResolution,
        source?: TransactionSource,
      ): Promise<void>;
    };
    const end = client.endTransaction.bind(producer);
    const sent = this.config.onCheckBackAnswerSent;
    client.endTransaction = async (endpoints, message, messageId, transactionId, resolution, source) => {
      await end(endpoints, message, messageId, transactionId, resolution, source);
      if (source !== TransactionSource.SOURCE_SERVER_CHECK) return;
      const given = this.answers.get(message);
      this.answers.delete(message);
      if (given && sent) {
        try {
          sent(given.message, given.answer);
        } catch (err) {
          this.logger.warn(errorFields(err), 'check-back answer hook threw; ignored');
        }
      }
    };
    const original = producer.onRecoverOrphanedTransactionCommand.bind(producer);
    producer.onRecoverOrphanedTransactionCommand = async (endpoints, command) => {
      try {
        await original(endpoints, command);
      } catch (err) {
        this.logger.warn(errorFields(err), 'ignored a malformed check-back command');
      }
    };
  }
}

function toClientMessage(message: OutgoingMessage) {
  return {
    topic: message.topic,
    body: message.body,
    ...(message.tag !== undefined ? { tag: message.tag } : {}),
    keys: message.keys,
    properties: new Map(Object.entries(message.properties)),
    ...(message.messageGroup !== undefined ? { messageGroup: message.messageGroup } : {}),
  };
}

function toCheckBackMessage(view: MessageView): CheckBackMessage {
  const properties: Record<string, string> = {};
  for (const [k, v] of view.properties ?? new Map<string, string>()) properties[k] = v;
  const txId = properties[TX_ID_PROPERTY];
  const origin = properties[TX_ORIGIN_PROPERTY];
  return {
    messageId: view.messageId,
    topic: view.topic,
    ...(view.tag !== undefined ? { tag: view.tag } : {}),
    keys: [...(view.keys ?? [])],
    properties,
    body: view.body,
    ...(view.bornTimestamp ? { bornAt: view.bornTimestamp } : {}),
    ...(txId !== undefined ? { txId } : {}),
    ...(origin !== undefined ? { origin } : {}),
  };
}

function toProto(resolution: TransactionResolution): ProtoResolution {
  if (resolution === TransactionResolution.COMMIT) return ProtoResolution.COMMIT;
  if (resolution === TransactionResolution.ROLLBACK) return ProtoResolution.ROLLBACK;
  return ProtoResolution.TRANSACTION_RESOLUTION_UNSPECIFIED;
}
