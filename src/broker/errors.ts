import {
  AuthenticationError,
  AuthorizationError,
  BrokerUnavailableError,
  InvalidMessageError,
  RocketMqTxError,
  TlsError,
} from '../errors';

/** gRPC status UNAVAILABLE: the channel could not connect (a TLS failure shows up as this). */
const GRPC_UNAVAILABLE = 14;
const TLS_FAILURE_RE =
  /certificate|self[- ]signed|unable to (?:verify|get local issuer)|SSL|TLS|handshake|wrong version number|ERR_TLS|altnames/i;

/** AclAuthorizationHandler: "User:x has no permission to access Topic:t from ip, no matched policies." */
const AUTHORIZATION_DENIED_RE = /has no permission to access (\S+)?/;

/** Walks `cause` links (the client wraps its errors) to the first error satisfying `test`. */
function findInChain(err: unknown, test: (e: Error & { code?: unknown; details?: unknown }) => boolean) {
  const seen = new Set<unknown>();
  let current: unknown = err;
  while (current instanceof Error && !seen.has(current)) {
    seen.add(current);
    if (test(current as Error & { code?: unknown })) return current as Error & { code?: unknown };
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * Failures that retrying cannot fix: the proxy rejected the credentials (ACL 2.0, HTTP-like
 * code 401), denied the action (403), or the TLS handshake failed. Undefined for anything else.
 * Messages name the endpoints and the access key, never the secret.
 */
export function classifySecurityError(
  err: unknown,
  endpoints: string,
  resource: string,
  accessKey: string | undefined,
): RocketMqTxError | undefined {
  if (err instanceof AuthenticationError || err instanceof AuthorizationError || err instanceof TlsError) {
    return err;
  }
  const who = accessKey === undefined ? 'no credentials' : `access key ${JSON.stringify(accessKey)}`;
  const unauthorized = findInChain(err, (e) => e.name === 'UnauthorizedException');
  // RocketMQ 5.3's proxy answers a denied action with 401 too (ResponseBuilder maps
  // AuthorizationException to UNAUTHORIZED); only AclAuthorizationHandler's message tells them apart.
  const denied = unauthorized && AUTHORIZATION_DENIED_RE.exec(unauthorized.message);
  if (unauthorized && denied) {
    const named = denied[1] ?? resource;
    return new AuthorizationError(
      named,
      `RocketMQ proxy at ${endpoints} denied ${who} access to ${named}: ${unauthorized.message}`,
      unauthorized,
    );
  }
  if (unauthorized) {
    return new AuthenticationError(
      `RocketMQ proxy at ${endpoints} rejected the credentials (${who}): ${unauthorized.message}`,
      unauthorized,
    );
  }
  const forbidden = findInChain(err, (e) => e.name === 'ForbiddenException');
  if (forbidden) {
    return new AuthorizationError(
      resource,
      `RocketMQ proxy at ${endpoints} denied ${who} access to ${resource}: ${forbidden.message}`,
      forbidden,
    );
  }
  const tls = findInChain(
    err,
    (e) => e.code === GRPC_UNAVAILABLE && TLS_FAILURE_RE.test(`${e.message} ${String(e.details ?? '')}`),
  );
  if (tls) {
    return new TlsError(
      `TLS connection to the RocketMQ proxy at ${endpoints} failed (check tls.ca / tls.caFile and the proxy's certificate): ${tls.message}`,
      tls,
    );
  }
  return undefined;
}

/** Maps a client or gRPC failure of a send to the SDK's typed errors. */
export function mapSendError(
  err: unknown,
  topic: string,
  path: string,
  endpoints = '(proxy)',
  accessKey?: string,
): RocketMqTxError {
  if (err instanceof RocketMqTxError) return err;
  const security = classifySecurityError(err, endpoints, `topic ${topic}`, accessKey);
  if (security) return security;
  const name = err instanceof Error ? err.name : '';
  const message = err instanceof Error ? err.message : String(err);
  if (name === 'NotFoundException' || /TOPIC_NOT_FOUND|topic.*not.*exist|No topic route/i.test(message)) {
    return new InvalidMessageError(`${path}.topic`, topic, 'a topic that exists on the broker', err);
  }
  if (name === 'PayloadTooLargeException' || name === 'RequestHeaderFieldsTooLargeException') {
    return new InvalidMessageError(path, topic, 'a message within the broker size limits', err);
  }
  if (err instanceof TypeError && /message type not match/i.test(message)) {
    return new InvalidMessageError(
      `${path}.topic`,
      topic,
      'a topic whose message.type accepts this message',
      err,
    );
  }
  if (name === 'BadRequestException') {
    return new InvalidMessageError(path, topic, 'a message the broker accepts', err);
  }
  return new BrokerUnavailableError(`Broker did not accept the message for topic ${topic}: ${message}`, err);
}
