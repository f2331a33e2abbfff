/** A message as the consumer half of the SDK sees it (no client or protobuf types). */
export interface InboundMessage {
  readonly messageId: string;
  readonly topic: string;
  readonly tag?: string;
  readonly keys: readonly string[];
  readonly properties: Readonly<Record<string, string>>;
  readonly body: Buffer;
  /** 1 on the first delivery; the broker counts redeliveries. */
  readonly deliveryAttempt: number;
  readonly bornAt?: Date;
}

/**
 * The port between IdempotentConsumer and a RocketMQ consumer client. Every message received
 * must be settled exactly once: ack, retryLater or deadLetter.
 */
export interface ConsumerGateway {
  start(): Promise<void>;
  /** Long-polls one subscription for up to `max` messages; resolves [] when nothing came. */
  receive(max: number): Promise<InboundMessage[]>;
  ack(message: InboundMessage): Promise<void>;
  /** Makes the message visible again after about `delayMs` (the broker counts a delivery attempt). */
  retryLater(message: InboundMessage, delayMs: number): Promise<void>;
  /** Moves the message to the group's dead-letter queue (%DLQ%<group>) at once. */
  deadLetter(message: InboundMessage): Promise<void>;
  /** The group's max delivery attempts as the proxy reported it (retryMaxTimes + 1), when known. */
  readonly maxDeliveryAttempts: number | undefined;
  shutdown(): Promise<void>;
}

export interface ConsumerGatewayConfig {
  endpoints: string;
  namespace: string;
  consumerGroup: string;
  /** topic -> tag filter expression ("*" for all). */
  subscriptions: ReadonlyMap<string, string>;
  credentials?: { accessKey: string; accessSecret: string };
  sslEnabled: boolean;
  /** Custom CA (PEM) for the proxy's TLS certificate; needs sslEnabled. */
  tlsCa?: Buffer;
  requestTimeoutMs: number;
  longPollingMs: number;
  invisibleDurationMs: number;
  startTimeoutMs: number;
  shutdownTimeoutMs: number;
}

/** `gateway` with its ack replaced; every other call goes to `gateway` (crash windows in tests). */
export function withAck(
  gateway: ConsumerGateway,
  ack: (message: InboundMessage) => Promise<void>,
): ConsumerGateway {
  return {
    start: () => gateway.start(),
    receive: (max) => gateway.receive(max),
    ack,
    retryLater: (m, d) => gateway.retryLater(m, d),
    deadLetter: (m) => gateway.deadLetter(m),
    get maxDeliveryAttempts() {
      return gateway.maxDeliveryAttempts;
    },
    shutdown: () => gateway.shutdown(),
  };
}
