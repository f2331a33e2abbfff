import { Code as GrpcCode, ConnectError } from '@connectrpc/connect';
import { Code, type Status } from './gen/apache/rocketmq/v2/definition_pb';

/**
 * A RocketMQ answer other than OK, named like the official client's exception for the same
 * code (its StatusChecker), so src/broker/errors.ts maps both transports to the same typed
 * errors (NotFoundException -> InvalidMessageError, UnauthorizedException -> Authentication/
 * AuthorizationError, ...).
 */
export class RocketMqStatusError extends Error {
  constructor(
    name: string,
    readonly code: number,
    message: string,
    /** Worth another attempt on another queue (throttled, proxy timeout, internal error). */
    readonly transient: boolean,
  ) {
    super(`[code=${code}] ${message}`);
    this.name = name;
  }
}

/** A failure below RocketMQ: gRPC status, deadline, connection or TLS (code = gRPC code). */
export class GrpcTransportError extends Error {
  override readonly name = 'GrpcTransportError';
  constructor(
    readonly code: number,
    message: string,
    readonly details: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

const NAMES: Array<[string, boolean, readonly Code[]]> = [
  [
    'BadRequestException',
    false,
    [
      Code.BAD_REQUEST,
      Code.ILLEGAL_ACCESS_POINT,
      Code.ILLEGAL_TOPIC,
      Code.ILLEGAL_CONSUMER_GROUP,
      Code.ILLEGAL_MESSAGE_TAG,
      Code.ILLEGAL_MESSAGE_KEY,
      Code.ILLEGAL_MESSAGE_GROUP,
      Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
      Code.INVALID_TRANSACTION_ID,
      Code.ILLEGAL_MESSAGE_ID,
      Code.ILLEGAL_FILTER_EXPRESSION,
      Code.ILLEGAL_INVISIBLE_TIME,
      Code.ILLEGAL_DELIVERY_TIME,
      Code.INVALID_RECEIPT_HANDLE,
      Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
      Code.UNRECOGNIZED_CLIENT_TYPE,
      Code.MESSAGE_CORRUPTED,
      Code.CLIENT_ID_REQUIRED,
      Code.ILLEGAL_POLLING_TIME,
    ],
  ],
  ['UnauthorizedException', false, [Code.UNAUTHORIZED]],
  ['PaymentRequiredException', false, [Code.PAYMENT_REQUIRED]],
  ['ForbiddenException', false, [Code.FORBIDDEN]],
  ['NotFoundException', false, [Code.NOT_FOUND, Code.TOPIC_NOT_FOUND, Code.CONSUMER_GROUP_NOT_FOUND]],
  ['PayloadTooLargeException', false, [Code.PAYLOAD_TOO_LARGE, Code.MESSAGE_BODY_TOO_LARGE]],
  ['TooManyRequestsException', true, [Code.TOO_MANY_REQUESTS]],
  [
    'RequestHeaderFieldsTooLargeException',
    false,
    [Code.REQUEST_HEADER_FIELDS_TOO_LARGE, Code.MESSAGE_PROPERTIES_TOO_LARGE],
  ],
  ['InternalErrorException', true, [Code.INTERNAL_ERROR, Code.INTERNAL_SERVER_ERROR, Code.HA_NOT_AVAILABLE]],
  [
    'ProxyTimeoutException',
    true,
    [Code.PROXY_TIMEOUT, Code.MASTER_PERSISTENCE_TIMEOUT, Code.SLAVE_PERSISTENCE_TIMEOUT],
  ],
];
const BY_CODE = new Map<number, [string, boolean]>();
for (const [name, transient, codes] of NAMES) for (const c of codes) BY_CODE.set(c, [name, transient]);

/** Undefined for OK (and for an absent status, as the official client does). */
export function statusError(status: Status | undefined): RocketMqStatusError | undefined {
  if (!status) return undefined;
  if (status.code === Code.OK || status.code === Code.MULTIPLE_RESULTS) return undefined;
  const [name, transient] = BY_CODE.get(status.code) ?? ['UnsupportedException', false];
  return new RocketMqStatusError(name, status.code, status.message, transient);
}

/**
 * A ConnectError from the gRPC transport as the official path's errors look (grpc-js
 * ServiceError: numeric gRPC `code`, `details`), so TLS failures (UNAVAILABLE + a certificate
 * message) and the rest classify alike. Connection-level causes (ECONNREFUSED, a TLS alert)
 * are kept in the message and as `cause`.
 */
export function transportError(err: unknown): Error {
  if (err instanceof RocketMqStatusError || err instanceof GrpcTransportError) return err;
  const ce = ConnectError.from(err);
  const causeText = describeCause(ce.cause);
  let code: number = ce.code;
  if (TLS_CODE_RE.test(causeText) || TLS_CODE_RE.test(ce.rawMessage)) code = GrpcCode.Unavailable;
  const details = causeText ? `${ce.rawMessage} (${causeText})` : ce.rawMessage;
  return new GrpcTransportError(code, `${code} ${GrpcCode[ce.code] ?? 'Unknown'}: ${details}`, details, {
    cause: err,
  });
}

/** Node's TLS verification error codes, and the OpenSSL texts of a failed handshake. */
const TLS_CODE_RE =
  /CERT|SELF_SIGNED|UNABLE_TO_(?:VERIFY|GET)|ERR_TLS|ERR_SSL|certificate|altnames|SSL routines|wrong version number/i;

function describeCause(cause: unknown): string {
  if (!(cause instanceof Error)) return '';
  const code = (cause as NodeJS.ErrnoException).code;
  return code ? `${code}: ${cause.message}` : cause.message;
}

/** True for a failure where the connection itself is gone or never came up. */
export function isConnectionFailure(err: Error): boolean {
  return err instanceof GrpcTransportError && err.code === GrpcCode.Unavailable;
}
