import { ClientException, NotFoundException, Producer, StatusChecker } from 'rocketmq-client-nodejs';
import { QueryRouteRequest } from 'rocketmq-client-nodejs/proto/apache/rocketmq/v2/service_pb';
import type { QueryRouteResponse } from 'rocketmq-client-nodejs/proto/apache/rocketmq/v2/service_pb';
import {
  MessageType,
  Permission,
  Resource,
} from 'rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb';
import { AuthorizationError, BrokerUnavailableError, type RocketMqTxError } from '../errors';
import { noopLogger, type Logger } from '../util/logger';
import { withTimeout } from '../util/time';
import { clientLogger } from './clientLogger';
import { sessionCredentials } from './credentials';
import { classifySecurityError } from './errors';
import { useCustomCa } from './tls';

/** A topic's message type as the proxy's QueryRoute answer states it (accept_message_types). */
export type TopicMessageType =
  'NORMAL' | 'FIFO' | 'DELAY' | 'TRANSACTION' | 'LITE' | 'PRIORITY' | 'UNSPECIFIED';

export type TopicRoute =
  | {
      topic: string;
      state: 'found';
      queues: number;
      /** Distinct accept_message_types over the topic's queues; empty when the proxy sent none. */
      messageTypes: TopicMessageType[];
      /** Every queue accepts writes (permission WRITE or READ_WRITE). */
      writable: boolean;
      /** Distinct names of the brokers holding its queues (more than one: a Cluster-mode proxy). */
      brokers: string[];
    }
  | { topic: string; state: 'not-found'; detail: string }
  | { topic: string; state: 'denied'; error: AuthorizationError }
  | { topic: string; state: 'unreadable'; detail: string };

export interface RouteReadConfig {
  endpoints: string;
  namespace: string;
  credentials?: { accessKey: string; accessSecret: string };
  sslEnabled: boolean;
  tlsCa?: Buffer;
  requestTimeoutMs: number;
}

const TYPE_NAMES: Record<number, TopicMessageType> = {
  [MessageType.NORMAL]: 'NORMAL',
  [MessageType.FIFO]: 'FIFO',
  [MessageType.DELAY]: 'DELAY',
  [MessageType.TRANSACTION]: 'TRANSACTION',
  [MessageType.LITE]: 'LITE',
  [MessageType.PRIORITY]: 'PRIORITY',
};

interface RouteClient {
  endpoints: unknown;
  rpcClientManager: {
    queryRoute(
      endpoints: unknown,
      request: QueryRouteRequest,
      timeoutMs: number,
    ): Promise<QueryRouteResponse>;
    close(): void;
  };
}

/**
 * Reads each topic's route with one QueryRoute RPC, as a client never started: no telemetry
 * session and no producer settings reach the proxy, so it is never chosen for a check-back of a
 * TRANSACTION topic (the proxy asks any client that declared the topic).
 *
 * @throws AuthenticationError, TlsError (not retriable) at the first refusal, and
 *   BrokerUnavailableError when the proxy cannot be reached: they concern every topic.
 *   A topic the user may not see is `denied`; anything else about one topic is `unreadable`.
 */
export async function readTopicRoutes(
  config: RouteReadConfig,
  topics: readonly string[],
  logger: Logger = noopLogger,
): Promise<TopicRoute[]> {
  const producer = new Producer({
    endpoints: config.endpoints,
    namespace: config.namespace,
    topics: [],
    sslEnabled: config.sslEnabled,
    requestTimeout: config.requestTimeoutMs,
    logger: clientLogger(logger),
    ...sessionCredentials(config.credentials),
  });
  if (config.tlsCa) useCustomCa(producer, config.tlsCa);
  const client = producer as unknown as RouteClient;
  try {
    const out: TopicRoute[] = [];
    for (const topic of topics) out.push(await readOne(client, config, topic));
    return out;
  } finally {
    client.rpcClientManager.close();
  }
}

async function readOne(client: RouteClient, config: RouteReadConfig, topic: string): Promise<TopicRoute> {
  const resource = new Resource().setName(topic);
  if (config.namespace) resource.setResourceNamespace(config.namespace);
  const request = new QueryRouteRequest().setTopic(resource);
  let response: QueryRouteResponse;
  try {
    response = await withTimeout(
      client.rpcClientManager.queryRoute(client.endpoints, request, config.requestTimeoutMs),
      config.requestTimeoutMs + 1000,
      () => new Error(`QueryRoute(${topic}) got no answer within ${config.requestTimeoutMs} ms`),
    );
    StatusChecker.check(response.getStatus()?.toObject());
  } catch (err) {
    const accessKey = config.credentials?.accessKey;
    const security = classifySecurityError(err, config.endpoints, `Topic:${topic}`, accessKey);
    if (security instanceof AuthorizationError) return { topic, state: 'denied', error: security };
    if (security) throw security;
    // Any other answer of the proxy concerns this topic; no answer at all concerns them all.
    if (err instanceof NotFoundException)
      return { topic, state: 'not-found', detail: firstLine(err.message) };
    if (err instanceof ClientException) return { topic, state: 'unreadable', detail: firstLine(err.message) };
    throw unreachable(config.endpoints, err);
  }
  const queues = response.getMessageQueuesList();
  const types = new Set<TopicMessageType>();
  for (const q of queues) {
    for (const t of q.getAcceptMessageTypesList()) types.add(TYPE_NAMES[t] ?? 'UNSPECIFIED');
  }
  const writable = queues.every(
    (q) => q.getPermission() === Permission.WRITE || q.getPermission() === Permission.READ_WRITE,
  );
  const brokers = new Set<string>();
  for (const q of queues) {
    const name = q.getBroker()?.getName();
    if (name) brokers.add(name);
  }
  return {
    topic,
    state: 'found',
    queues: queues.length,
    messageTypes: [...types].sort(),
    writable,
    brokers: [...brokers].sort(),
  };
}

function unreachable(endpoints: string, err: unknown): RocketMqTxError {
  const message = err instanceof Error ? err.message : String(err);
  return new BrokerUnavailableError(
    `cannot reach the RocketMQ proxy at ${endpoints}: ${firstLine(message)}`,
    err,
  );
}

function firstLine(text: string): string {
  return text.split('\n')[0]!.trim();
}
