import { hostname } from 'node:os';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { MessageIdFactory } from 'rocketmq-client-nodejs/dist/message/MessageId';
import { UserAgent } from 'rocketmq-client-nodejs/dist/client/UserAgent';
import { BrokerUnavailableError, InvalidMessageError } from '../../errors';
import { mapSendError } from '../errors';
import type { BrokerGateway, GatewayConfig, HalfMessage, OutgoingMessage } from '../gateway';
import { RocketMqGateway, type RouteQueue } from '../RocketMqGateway';
import type { Logger } from '../../util/logger';
import { Channel } from './channel';
import { RequestHeaders } from './headers';
import { QueueSelector } from './queues';
import {
  END_TRANSACTION,
  SEND_MESSAGE,
  decodeEndTransaction,
  decodeSendMessage,
  endTransactionRequest,
  firstReceipt,
  sendMessageRequest,
} from './codec';
import { MessageType } from './gen/apache/rocketmq/v2/definition_pb';
import { RocketMqStatusError, statusError } from './status';

interface LeanHalf extends HalfMessage {
  readonly transactionId: string;
  readonly channel: Channel;
}

/** Same attempts as the official client for a normal send (transactional sends: one). */
const NORMAL_SEND_ATTEMPTS = 3;
const KEEPALIVE_MS = 30_000;
const KEEPALIVE_TIMEOUT_MS = 10_000;
const BACKOFF = { baseMs: 100, maxMs: 5_000 };

/**
 * BrokerGateway whose two hot calls, SendMessage (half and normal messages) and
 * EndTransaction, go straight over one HTTP/2 connection per proxy (./channel.ts, node:http2)
 * with messages generated from the RocketMQ v2 protocol (@bufbuild/protobuf, ./gen), while
 * the official client keeps everything
 * else: start-up, routes, telemetry session and heartbeats, check-backs (which it answers
 * through its own EndTransaction) and shutdown. Sends carry the official client's id and the
 * same signed headers, and spread over every writable queue of the route that accepts the
 * message type (the official client writes queue 0 only, rocketmq-clients #1093).
 * FIFO sends (messageGroup) stay on the official path, which hashes the group to its queue.
 */
export class LeanGateway implements BrokerGateway {
  private readonly channels = new Map<string, Channel>();
  private readonly queues = new QueueSelector();
  private headers: RequestHeaders | undefined;
  private readonly bornHost = hostname();
  /** Set when an HTTP CONNECT proxy is configured: every call then goes the official way. */
  private viaOfficial = false;

  constructor(
    private readonly config: GatewayConfig,
    private readonly logger: Logger,
    private readonly official: RocketMqGateway = new RocketMqGateway(config, logger),
  ) {}

  async start(): Promise<void> {
    await this.official.start();
    const proxy = connectProxyFor(this.config.endpoints, process.env);
    if (proxy) {
      // grpc-js tunnels through an HTTP CONNECT proxy from these variables; this path does not.
      this.viaOfficial = true;
      this.logger.warn(
        { proxyVariable: proxy },
        "transport 'lean' does not use HTTP CONNECT proxies: the official client sends every message",
      );
    }
    this.headers = new RequestHeaders({
      clientId: this.official.clientId(),
      namespace: this.config.namespace,
      ...(this.config.credentials ? { credentials: this.config.credentials } : {}),
      clientVersion: UserAgent.INSTANCE.version,
    });
  }

  async sendHalf(message: OutgoingMessage): Promise<HalfMessage> {
    if (this.viaOfficial) return this.official.sendHalf(message);
    if (message.messageGroup !== undefined) {
      throw new InvalidMessageError(
        'message.messageGroup',
        message.messageGroup,
        'no messageGroup on a transactional message',
      );
    }
    try {
      const queue = await this.pickQueue(message.topic, MessageType.TRANSACTION, 0);
      const channel = this.channel(queue);
      const receipt = await this.sendOnce(channel, message, queue, MessageType.TRANSACTION);
      const half: LeanHalf = {
        messageId: receipt.messageId,
        topic: message.topic,
        transactionId: receipt.transactionId,
        channel,
      };
      return half;
    } catch (err) {
      throw this.sendFailure(err, message.topic);
    }
  }

  async endTransaction(half: HalfMessage, commit: boolean): Promise<void> {
    if (!('channel' in half)) return this.official.endTransaction(half, commit);
    const h = half as LeanHalf;
    try {
      const request = endTransactionRequest(
        this.config.namespace,
        h.topic,
        h.messageId,
        h.transactionId,
        commit,
      );
      const answer = await h.channel.unary(
        END_TRANSACTION,
        request,
        this.nextHeaders(),
        this.config.requestTimeoutMs,
      );
      const failure = statusError(decodeEndTransaction(answer).status);
      if (failure) throw failure;
    } catch (err) {
      throw new BrokerUnavailableError(
        `EndTransaction(${commit ? 'COMMIT' : 'ROLLBACK'}) for message ${h.messageId} failed`,
        err,
      );
    }
  }

  async send(message: OutgoingMessage): Promise<{ messageId: string }> {
    if (message.messageGroup !== undefined || this.viaOfficial) return this.official.send(message);
    let lastError: unknown;
    for (let attempt = 0; attempt < NORMAL_SEND_ATTEMPTS; attempt++) {
      try {
        const queue = await this.pickQueue(message.topic, MessageType.NORMAL, attempt);
        const receipt = await this.sendOnce(this.channel(queue), message, queue, MessageType.NORMAL);
        return { messageId: receipt.messageId };
      } catch (err) {
        lastError = err;
        if (err instanceof RocketMqStatusError && !err.transient) break;
        if (err instanceof TypeError) break;
      }
    }
    throw this.sendFailure(lastError, message.topic);
  }

  /** Never rejects (as RocketMqGateway.shutdown). */
  async shutdown(): Promise<void> {
    for (const channel of this.channels.values()) channel.close();
    this.channels.clear();
    await this.official.shutdown();
  }

  private async sendOnce(channel: Channel, message: OutgoingMessage, queue: RouteQueue, type: MessageType) {
    const request = sendMessageRequest(message, {
      namespace: this.config.namespace,
      queueId: queue.queueId,
      messageId: MessageIdFactory.create().toString(),
      messageType: type,
      bornHost: this.bornHost,
      bornTimestamp: timestampFromMs(Date.now()),
    });
    const answer = await channel.unary(
      SEND_MESSAGE,
      request,
      this.nextHeaders(),
      this.config.requestTimeoutMs,
    );
    return firstReceipt(decodeSendMessage(answer));
  }

  private nextHeaders(): Record<string, string> {
    if (!this.headers) throw new BrokerUnavailableError('the lean transport is not started');
    return this.headers.next();
  }

  private async pickQueue(topic: string, type: MessageType, skip: number): Promise<RouteQueue> {
    return this.queues.select(topic, await this.official.routeQueues(topic), type, skip);
  }

  private channel(queue: RouteQueue): Channel {
    let channel = this.channels.get(queue.facade);
    if (!channel) {
      channel = new Channel({
        host: queue.host,
        port: queue.port,
        sslEnabled: this.config.sslEnabled,
        ...(this.config.tlsCa ? { tlsCa: this.config.tlsCa } : {}),
        keepaliveMs: KEEPALIVE_MS,
        keepaliveTimeoutMs: KEEPALIVE_TIMEOUT_MS,
        connectTimeoutMs: this.config.requestTimeoutMs,
        backoff: BACKOFF,
      });
      this.channels.set(queue.facade, channel);
    }
    return channel;
  }

  private sendFailure(err: unknown, topic: string): Error {
    return mapSendError(err, topic, 'message', this.config.endpoints, this.config.credentials?.accessKey);
  }
}

/**
 * The variable naming an HTTP CONNECT proxy that grpc-js would use for these endpoints
 * (grpc_proxy, https_proxy, http_proxy; not when no_grpc_proxy / no_proxy lists the host), or
 * undefined.
 */
export function connectProxyFor(endpoints: string, env: NodeJS.ProcessEnv): string | undefined {
  const name = ['grpc_proxy', 'https_proxy', 'http_proxy'].find((n) => env[n]);
  if (!name) return undefined;
  const bypass = (env.no_grpc_proxy ?? env.no_proxy ?? '')
    .split(',')
    .map((h) => h.trim())
    .filter(Boolean);
  const hosts = endpoints.split(';').map((e) => e.replace(/:\d+$/, ''));
  const bypassed = hosts.every((h) =>
    bypass.some((b) => b === '*' || h === b || h.endsWith(`.${b.replace(/^\./, '')}`)),
  );
  return bypassed ? undefined : name;
}
