import { Code, type Status } from './gen/apache/rocketmq/v2/definition_pb';

/** gRPC status codes (grpc/doc/statuscodes.md) the lean transport produces or reads. */
export const GRPC = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  DEADLINE_EXCEEDED: 4,
  PERMISSION_DENIED: 7,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;

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

/**
 * A failure below RocketMQ, shaped like grpc-js's ServiceError (numeric gRPC `code`,
 * `details`) so src/broker/errors.ts classifies it as it does the official path's: a TLS
 * failure is UNAVAILABLE with the certificate error in the message.
 */
export class GrpcTransportError extends Error {
  override readonly name = 'GrpcTransportError';
  readonly details: string;
  constructor(
    readonly code: number,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${code} ${codeName(code)}: ${message}`, options);
    this.details = message;
  }
}

function codeName(code: number): string {
  const entry = Object.entries(GRPC).find(([, v]) => v === code);
  return entry ? entry[0] : 'STATUS';
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
