import { createClient, type Client } from '@connectrpc/connect';
import { createGrpcTransport, Http2SessionManager } from '@connectrpc/connect-node';
import { MessagingService } from './gen/apache/rocketmq/v2/service_pb';
import { GrpcTransportError, isConnectionFailure, transportError } from './status';

export interface ChannelSettings {
  host: string;
  port: number;
  sslEnabled: boolean;
  /** Custom CA (PEM) trusted instead of the system CAs. */
  tlsCa?: Buffer;
  /** HTTP/2 PING after this long without traffic on a call (gRPC keepalive time). */
  keepaliveMs: number;
  /** A PING unanswered this long closes the connection (gRPC keepalive timeout). */
  keepaliveTimeoutMs: number;
  connectTimeoutMs: number;
  backoff: { baseMs: number; maxMs: number };
  clock?: () => number;
  random?: () => number;
}

export type MessagingClient = Client<typeof MessagingService>;

/**
 * One HTTP/2 connection to a proxy endpoint for the lean calls, through @connectrpc/connect-node's
 * gRPC transport. The session manager reconnects on the next call after the connection is lost
 * (proxy restart, GOAWAY, failed PING). After a connection failure calls fail fast with
 * UNAVAILABLE until a backoff (base x 2^n, capped, jittered) has passed, as a grpc-js channel in
 * TRANSIENT_FAILURE does, so a dead proxy is not hammered by every caller.
 */
export class Channel {
  readonly client: MessagingClient;
  private readonly session: Http2SessionManager;
  private failures = 0;
  private retryAt = 0;
  private readonly clock: () => number;
  private readonly random: () => number;

  constructor(private readonly s: ChannelSettings) {
    this.clock = s.clock ?? Date.now;
    this.random = s.random ?? Math.random;
    const host = s.host.includes(':') ? `[${s.host}]` : s.host;
    const baseUrl = `${s.sslEnabled ? 'https' : 'http'}://${host}:${s.port}`;
    this.session = new Http2SessionManager(
      baseUrl,
      {
        pingIntervalMs: s.keepaliveMs,
        pingTimeoutMs: s.keepaliveTimeoutMs,
        connectTimeoutMs: s.connectTimeoutMs,
      },
      s.sslEnabled && s.tlsCa ? { ca: s.tlsCa } : {},
    );
    this.client = createClient(
      MessagingService,
      createGrpcTransport({ baseUrl, sessionManager: this.session }),
    );
  }

  /** Runs one call; failures come back as RocketMqStatusError / GrpcTransportError. */
  async call<T>(run: (client: MessagingClient) => Promise<T>): Promise<T> {
    const now = this.clock();
    if (now < this.retryAt) {
      throw new GrpcTransportError(
        14,
        `14 Unavailable: reconnecting to ${this.s.host}:${this.s.port} in ${this.retryAt - now} ms`,
        'reconnect backoff',
      );
    }
    try {
      const result = await run(this.client);
      this.failures = 0;
      return result;
    } catch (err) {
      const e = transportError(err);
      if (isConnectionFailure(e) && this.clock() >= this.retryAt) {
        const { baseMs, maxMs } = this.s.backoff;
        const delay = Math.min(maxMs, baseMs * 2 ** this.failures);
        this.failures = Math.min(this.failures + 1, 30);
        this.retryAt = this.clock() + Math.round(delay * (0.5 + this.random() * 0.5));
      }
      throw e;
    }
  }

  /** The next time a call may try to connect again (0: no backoff running). */
  backoffUntil(): number {
    return this.retryAt;
  }

  close(): void {
    this.session.abort();
  }
}
