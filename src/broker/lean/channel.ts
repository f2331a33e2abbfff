import * as http2 from 'node:http2';
import { GrpcTransportError, GRPC } from './status';

export interface ChannelSettings {
  host: string;
  port: number;
  sslEnabled: boolean;
  /** Custom CA (PEM) trusted instead of the system CAs. */
  tlsCa?: Buffer;
  /** While calls are in flight, an HTTP/2 PING this often (gRPC keepalive time). */
  keepaliveMs: number;
  /** A PING unanswered this long closes the connection (gRPC keepalive timeout). */
  keepaliveTimeoutMs: number;
  connectTimeoutMs: number;
  backoff: { baseMs: number; maxMs: number };
  clock?: () => number;
  random?: () => number;
  /** For tests: how a connection is opened. */
  connect?: (authority: string, options: http2.SecureClientSessionOptions) => http2.ClientHttp2Session;
}

const { NGHTTP2_CANCEL } = http2.constants;
const HEADER_PREFIX = 5;

/**
 * One HTTP/2 connection to a proxy endpoint carrying gRPC unary calls (the lean transport's
 * SendMessage and EndTransaction): a length-prefixed protobuf message out, one back, the
 * status in the trailers. A lost connection (proxy restart, GOAWAY, failed PING) is dropped and
 * the next call opens a new one; after a connection failure calls fail fast with UNAVAILABLE
 * until a backoff (base x 2^n, capped, jittered) has passed, as a grpc-js channel in
 * TRANSIENT_FAILURE does, so a dead proxy is not hammered by every caller.
 */
export class Channel {
  private session: http2.ClientHttp2Session | undefined;
  private readonly authority: string;
  private failures = 0;
  private retryAt = 0;
  private inFlight = 0;
  /** Calls in flight per connection, so a connection left after GOAWAY closes when they end. */
  private readonly calls = new WeakMap<http2.ClientHttp2Session, number>();
  private keepalive: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly clock: () => number;
  private readonly random: () => number;

  constructor(private readonly s: ChannelSettings) {
    this.clock = s.clock ?? Date.now;
    this.random = s.random ?? Math.random;
    const host = s.host.includes(':') ? `[${s.host}]` : s.host;
    this.authority = `${s.sslEnabled ? 'https' : 'http'}://${host}:${s.port}`;
  }

  /**
   * One unary call: `path` is "/apache.rocketmq.v2.MessagingService/SendMessage", `request`
   * the encoded message. Resolves with the encoded answer; rejects with GrpcTransportError
   * (gRPC status, deadline, connection or TLS failure).
   */
  unary(
    path: string,
    request: Uint8Array,
    headers: Record<string, string>,
    timeoutMs: number,
  ): Promise<Uint8Array> {
    const now = this.clock();
    if (this.closed) return Promise.reject(unavailable('the lean transport is shut down'));
    if (now < this.retryAt) {
      return Promise.reject(
        unavailable(`reconnecting to ${this.s.host}:${this.s.port} in ${this.retryAt - now} ms`),
      );
    }
    let session: http2.ClientHttp2Session;
    try {
      session = this.open();
    } catch (err) {
      return Promise.reject(this.failed(connectionError(err)));
    }
    return new Promise<Uint8Array>((resolve, reject) => {
      const stream = session.request({
        ...headers,
        ':method': 'POST',
        ':path': path,
        'content-type': 'application/grpc',
        te: 'trailers',
        'grpc-timeout': `${timeoutMs}m`,
      });
      this.inFlight++;
      this.calls.set(session, (this.calls.get(session) ?? 0) + 1);
      const chunks: Buffer[] = [];
      let status: number | undefined;
      let message = '';
      let settled = false;
      const finish = (err?: GrpcTransportError, body?: Uint8Array) => {
        if (settled) return;
        settled = true;
        this.inFlight--;
        this.calls.set(session, (this.calls.get(session) ?? 1) - 1);
        clearTimeout(deadline);
        if (session !== this.session) this.retire(session);
        if (err) {
          if (!stream.closed) stream.close(NGHTTP2_CANCEL);
          reject(err.code === GRPC.UNAVAILABLE ? this.failed(err) : err);
        } else {
          this.failures = 0;
          resolve(body!);
        }
      };
      const deadline = setTimeout(
        () => finish(new GrpcTransportError(GRPC.DEADLINE_EXCEEDED, `deadline of ${timeoutMs} ms exceeded`)),
        timeoutMs,
      );
      const readStatus = (h: http2.IncomingHttpHeaders) => {
        const s = h['grpc-status'];
        if (s !== undefined) {
          status = Number(s);
          const m = h['grpc-message'];
          message = typeof m === 'string' ? decodeURIComponent(m) : '';
        }
      };
      stream.on('response', (h) => {
        const httpStatus = Number(h[':status']);
        if (httpStatus !== 200) {
          finish(new GrpcTransportError(httpStatusToGrpc(httpStatus), `HTTP status ${httpStatus}`));
          return;
        }
        readStatus(h); // a trailers-only answer carries the status in the headers
      });
      stream.on('trailers', readStatus);
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('error', (err) => finish(streamError(err)));
      stream.on('close', () => {
        if (settled) return;
        if (status === undefined) {
          finish(
            streamError(stream.rstCode ? new Error(`stream reset (code ${stream.rstCode})`) : undefined),
          );
          return;
        }
        if (status !== GRPC.OK) {
          finish(new GrpcTransportError(status, message || `gRPC status ${status}`));
          return;
        }
        const data = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
        if (data.length < HEADER_PREFIX || data[0] !== 0) {
          finish(new GrpcTransportError(GRPC.INTERNAL, 'malformed or compressed gRPC response'));
          return;
        }
        const length = data.readUInt32BE(1);
        if (data.length !== HEADER_PREFIX + length) {
          finish(new GrpcTransportError(GRPC.INTERNAL, 'truncated gRPC response'));
          return;
        }
        finish(undefined, data.subarray(HEADER_PREFIX));
      });
      const frame = Buffer.allocUnsafe(HEADER_PREFIX + request.length);
      frame[0] = 0;
      frame.writeUInt32BE(request.length, 1);
      frame.set(request, HEADER_PREFIX);
      stream.end(frame);
    });
  }

  /** The next time a call may try to connect again (0: no backoff running). */
  backoffUntil(): number {
    return this.retryAt;
  }

  close(): void {
    this.closed = true;
    this.drop();
  }

  private open(): http2.ClientHttp2Session {
    if (this.session && !this.session.closed && !this.session.destroyed) return this.session;
    const options: http2.SecureClientSessionOptions = this.s.tlsCa ? { ca: this.s.tlsCa } : {};
    const session = (this.s.connect ?? http2.connect)(this.authority, options);
    this.session = session;
    const forget = () => {
      if (this.session === session) this.forget();
    };
    // After GOAWAY the proxy still finishes the calls it took: new calls open a new
    // connection, and this one closes once its calls are done.
    session.on('goaway', () => {
      forget();
      this.retire(session);
    });
    session.on('close', forget);
    session.on('error', () => {
      forget();
      session.destroy();
    });
    // Bound the connect: a handshake that hangs fails the calls waiting on it.
    const connectTimer = setTimeout(
      () => session.destroy(new Error(`connect timeout after ${this.s.connectTimeoutMs} ms`)),
      this.s.connectTimeoutMs,
    );
    connectTimer.unref();
    session.once('connect', () => clearTimeout(connectTimer));
    session.once('close', () => clearTimeout(connectTimer));
    this.keepalive = setInterval(() => this.ping(session), this.s.keepaliveMs);
    this.keepalive.unref();
    // An idle connection does not keep the process alive.
    session.unref();
    return session;
  }

  /** gRPC keepalive without permit_without_calls: PING only while calls are in flight. */
  private ping(session: http2.ClientHttp2Session): void {
    if (this.inFlight === 0 || session.destroyed) return;
    const timer = setTimeout(
      () => session.destroy(new Error(`keepalive PING unanswered after ${this.s.keepaliveTimeoutMs} ms`)),
      this.s.keepaliveTimeoutMs,
    );
    timer.unref();
    const sent = session.ping((err) => {
      clearTimeout(timer);
      if (err) session.destroy(err);
    });
    if (!sent) clearTimeout(timer);
  }

  /** A connection no longer used for new calls: destroyed once its last call has ended. */
  private retire(session: http2.ClientHttp2Session): void {
    if (!session.destroyed && (this.calls.get(session) ?? 0) === 0) session.destroy();
  }

  private forget(): void {
    clearInterval(this.keepalive);
    this.keepalive = undefined;
    this.session = undefined;
  }

  private drop(): void {
    const s = this.session;
    this.forget();
    if (s && !s.destroyed) s.destroy();
  }

  /** A connection failure: start (or extend) the backoff once per failure episode. */
  private failed(err: GrpcTransportError): GrpcTransportError {
    this.drop();
    if (this.clock() >= this.retryAt) {
      const { baseMs, maxMs } = this.s.backoff;
      const delay = Math.min(maxMs, baseMs * 2 ** this.failures);
      this.failures = Math.min(this.failures + 1, 30);
      this.retryAt = this.clock() + Math.round(delay * (0.5 + this.random() * 0.5));
    }
    return err;
  }
}

function unavailable(message: string, cause?: unknown): GrpcTransportError {
  return new GrpcTransportError(GRPC.UNAVAILABLE, message, cause === undefined ? undefined : { cause });
}

function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as NodeJS.ErrnoException).code;
  return code ? `${code}: ${err.message}` : err.message;
}

/** The connection could not be opened or was lost: UNAVAILABLE, as grpc-js reports it. */
function connectionError(err: unknown): GrpcTransportError {
  return unavailable(`connection failed: ${describe(err)}`, err);
}

/** A stream error: the session's (refused, TLS, reset) or the stream's own. */
function streamError(err: unknown): GrpcTransportError {
  if (err === undefined) return unavailable('the connection closed before the answer');
  return unavailable(`connection failed: ${describe(err)}`, err);
}

/** gRPC's HTTP-to-status mapping for answers without grpc-status. */
function httpStatusToGrpc(status: number): number {
  if (status === 400) return GRPC.INTERNAL;
  if (status === 401) return GRPC.UNAUTHENTICATED;
  if (status === 403) return GRPC.PERMISSION_DENIED;
  if (status === 404) return GRPC.UNIMPLEMENTED;
  if (status === 429 || status === 502 || status === 503 || status === 504) return GRPC.UNAVAILABLE;
  return GRPC.UNKNOWN;
}
