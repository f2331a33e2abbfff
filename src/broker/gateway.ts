import type { CheckBackMessage, TransactionResolution } from '../checkback/resolution';

/** A message as the SDK hands it to the broker layer. */
export interface OutgoingMessage {
  topic: string;
  tag?: string;
  keys: string[];
  properties: Record<string, string>;
  body: Buffer;
  messageGroup?: string;
}

/** Opaque handle of a sent half message, needed to end its broker transaction. */
export interface HalfMessage {
  readonly messageId: string;
  readonly topic: string;
}

/**
 * How the producer's SendMessage and EndTransaction calls reach the proxy: `official` through
 * rocketmq-client-nodejs, `lean` through src/broker/lean/ (the official client still does
 * start-up, routes, heartbeats and check-backs).
 */
export type BrokerTransport = 'official' | 'lean';

export type CheckBackHandler = (message: CheckBackMessage) => Promise<TransactionResolution>;
/**
 * Called once the answer to a check-back reached the proxy (its EndTransaction returned OK), never
 * for an answer that was not sent or failed: the "COMMIT answered -> confirm" step hangs on it.
 */
export type CheckBackAnswerSent = (message: CheckBackMessage, resolution: TransactionResolution) => void;

/**
 * The port between the SDK and a RocketMQ client. Only src/broker/ implements it, so the
 * client library's types never leak; tests use a fake implementation.
 */
export interface BrokerGateway {
  start(): Promise<void>;
  sendHalf(message: OutgoingMessage): Promise<HalfMessage>;
  endTransaction(half: HalfMessage, commit: boolean): Promise<void>;
  send(message: OutgoingMessage): Promise<{ messageId: string }>;
  shutdown(): Promise<void>;
}

export interface GatewayConfig {
  endpoints: string;
  namespace: string;
  topics: readonly string[];
  credentials?: { accessKey: string; accessSecret: string };
  sslEnabled: boolean;
  /** Custom CA (PEM) for the proxy's TLS certificate; needs sslEnabled. */
  tlsCa?: Buffer;
  requestTimeoutMs: number;
  startTimeoutMs: number;
  shutdownTimeoutMs: number;
  onCheckBack?: CheckBackHandler;
  onCheckBackAnswerSent?: CheckBackAnswerSent;
  /** Default 'official'. */
  transport?: BrokerTransport;
}

/** The connection settings every resolved client option set carries. */
export interface ClientConnection {
  endpoints: string;
  namespace: string;
  topics: readonly string[];
  credentials?: { accessKey: string; accessSecret: string };
  sslEnabled: boolean;
  /** Custom CA (PEM) for the proxy's TLS certificate; needs sslEnabled. */
  tlsCa?: Buffer;
  requestTimeoutMs: number;
  startTimeoutMs: number;
  shutdownTimeoutMs: number;
  transport?: BrokerTransport;
}

/** How a client reaches the proxy: the part every gateway config (producer, relay, consumer) shares. */
export type ConnectionFields = Pick<
  GatewayConfig,
  | 'endpoints'
  | 'namespace'
  | 'credentials'
  | 'sslEnabled'
  | 'tlsCa'
  | 'requestTimeoutMs'
  | 'startTimeoutMs'
  | 'shutdownTimeoutMs'
>;

export function connectionFields(o: Omit<ClientConnection, 'topics' | 'transport'>): ConnectionFields {
  return {
    endpoints: o.endpoints,
    namespace: o.namespace,
    ...(o.credentials ? { credentials: o.credentials } : {}),
    sslEnabled: o.sslEnabled,
    ...(o.tlsCa ? { tlsCa: o.tlsCa } : {}),
    requestTimeoutMs: o.requestTimeoutMs,
    startTimeoutMs: o.startTimeoutMs,
    shutdownTimeoutMs: o.shutdownTimeoutMs,
  };
}

export function gatewayConfig(
  o: ClientConnection,
  onCheckBack?: CheckBackHandler,
  onCheckBackAnswerSent?: CheckBackAnswerSent,
): GatewayConfig {
  return {
    ...connectionFields(o),
    topics: o.topics,
    ...(onCheckBack ? { onCheckBack } : {}),
    ...(onCheckBackAnswerSent ? { onCheckBackAnswerSent } : {}),
    ...(o.transport ? { transport: o.transport } : {}),
  };
}
