/**
 * One root error for everything the SDK throws. Callers branch on `code` (stable) and
 * `retriable` (safe to try the same call again), never on message text.
 */
export type ErrorCode =
  | 'INVALID_OPTION'
  | 'INVALID_MESSAGE'
  | 'BROKER_UNAVAILABLE'
  | 'TRANSACTION_FENCED'
  | 'TRANSACTION_OUTCOME_UNKNOWN'
  | 'NO_ACTIVE_TRANSACTION'
  | 'PRODUCER_NOT_RUNNING'
  | 'STORE_ERROR'
  | 'STORE_ACCESS_DENIED'
  | 'CONSUMER_NOT_RUNNING'
  | 'RELAY_NOT_RUNNING'
  | 'UNHANDLED_EVENT'
  | 'MISSING_DEPENDENCY'
  | 'AUTHENTICATION_FAILED'
  | 'AUTHORIZATION_DENIED'
  | 'TLS_FAILED';

export class RocketMqTxError extends Error {
  readonly code: ErrorCode;
  readonly retriable: boolean;

  constructor(code: ErrorCode, message: string, options: { retriable: boolean; cause?: unknown }) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.retriable = options.retriable;
  }
}

/** An integer option's inclusive bounds, when the rule is a range. */
export interface AllowedRange {
  min: number;
  max: number;
}

/**
 * A constructor option is missing, of the wrong type or out of range. Fix the configuration.
 * Read `.option`, `.value`, `.allowed` (and `.range` for an integer range); never the message.
 */
export class InvalidOptionError extends RocketMqTxError {
  /** The option's path, e.g. `checkBack.concurrency` or `transactionTopics[0]`. */
  readonly option: string;
  /**
   * The value given, as given (`'(hidden)'` for a secret). Kept off the enumerable fields, so a
   * logger that serializes the error prints the message's short rendering, never the value.
   */
  declare readonly value: unknown;
  /** What is allowed, e.g. `an integer from 1 to 64` (the message's text after "expected"). */
  readonly allowed: string;
  /** Set when the rule is an integer range. */
  readonly range: AllowedRange | undefined;
  constructor(option: string, value: unknown, allowed: string, range?: AllowedRange) {
    super('INVALID_OPTION', `Invalid option ${option}: got ${describeValue(value)}; expected ${allowed}`, {
      retriable: false,
    });
    this.option = option;
    Object.defineProperty(this, 'value', { value, enumerable: false });
    this.allowed = allowed;
    this.range = range;
  }

  /** The same text as `allowed` (its first name, kept for compatibility). */
  get expected(): string {
    return this.allowed;
  }
}

/** An event passed to transact/publish is malformed. Nothing was written or sent. */
export class InvalidMessageError extends RocketMqTxError {
  readonly path: string;
  constructor(path: string, value: unknown, allowed: string, cause?: unknown) {
    super('INVALID_MESSAGE', `Invalid message ${path}: got ${describeValue(value)}; expected ${allowed}`, {
      retriable: false,
      cause,
    });
    this.path = path;
  }
}

/** The broker could not be reached or refused the half message. Nothing was committed. */
export class BrokerUnavailableError extends RocketMqTxError {
  constructor(message: string, cause?: unknown) {
    super('BROKER_UNAVAILABLE', message, { retriable: true, cause });
  }
}

/**
 * A check-back decided ROLLBACK for this txId before the local transaction could insert its
 * tx_record row (the transaction ran too long). The business work was rolled back and no
 * message is delivered; calling transact again runs it under a new txId.
 */
export class TransactionFencedError extends RocketMqTxError {
  readonly txId: string;
  constructor(txId: string, cause?: unknown) {
    super('TRANSACTION_FENCED', `Transaction ${txId} was fenced by a broker check-back before it committed`, {
      retriable: true,
      cause,
    });
    this.txId = txId;
  }
}

/**
 * COMMIT failed in a way that does not say whether the database committed (connection lost).
 * The broker's check-back reads tx_record and delivers the events if and only if it committed.
 * Do not blindly retry: look up your business row (or txId in tx_record) first.
 */
export class TransactionOutcomeUnknownError extends RocketMqTxError {
  readonly txId: string;
  constructor(txId: string, cause?: unknown) {
    super(
      'TRANSACTION_OUTCOME_UNKNOWN',
      `Commit of transaction ${txId} failed ambiguously; the check-back will deliver its events only if the database committed`,
      { retriable: false, cause },
    );
    this.txId = txId;
  }
}

/**
 * `publish(manager, ...)` was given an EntityManager with no transaction open on its QueryRunner
 * (a plain `dataSource.manager`, or a manager whose transaction already ended). Nothing was
 * written or sent. Call publish inside `dataSource.transaction(...)`, a `@Transactional()` method
 * or a QueryRunner transaction, or use `transact()`, which opens its own.
 */
export class NoActiveTransactionError extends RocketMqTxError {
  constructor() {
    super(
      'NO_ACTIVE_TRANSACTION',
      'publish() needs an EntityManager inside an active transaction (manager.queryRunner has none); nothing was written or sent',
      { retriable: false },
    );
  }
}

/** The SDK components with a start()/shutdown() lifecycle. */
export type Component = 'producer' | 'consumer' | 'relay';

const NOT_RUNNING_CODE = {
  producer: 'PRODUCER_NOT_RUNNING',
  consumer: 'CONSUMER_NOT_RUNNING',
  relay: 'RELAY_NOT_RUNNING',
} as const satisfies Record<Component, ErrorCode>;

/**
 * A component was used before start() completed, or start() was called after shutdown() began
 * (create a new instance then). `component` says which; `code` is `<COMPONENT>_NOT_RUNNING`.
 * Each component throws its own subclass (ProducerNotRunningError, ...), so both
 * `instanceof NotRunningError` and the older per-component checks work.
 */
export class NotRunningError extends RocketMqTxError {
  readonly component: Component;
  constructor(component: Component, message: string) {
    super(NOT_RUNNING_CODE[component], message, { retriable: false });
    this.component = component;
  }

  /** The component's own subclass. */
  static of(component: Component, message: string): NotRunningError {
    if (component === 'producer') return new ProducerNotRunningError(message);
    if (component === 'consumer') return new ConsumerNotRunningError(message);
    return new RelayNotRunningError(message);
  }
}

/** NotRunningError of a TransactionalProducer (`PRODUCER_NOT_RUNNING`). */
export class ProducerNotRunningError extends NotRunningError {
  constructor(message: string) {
    super('producer', message);
  }
}

/** NotRunningError of an IdempotentConsumer (`CONSUMER_NOT_RUNNING`). */
export class ConsumerNotRunningError extends NotRunningError {
  constructor(message: string) {
    super('consumer', message);
  }
}

/** NotRunningError of an OutboxRelay (`RELAY_NOT_RUNNING`). */
export class RelayNotRunningError extends NotRunningError {
  constructor(message: string) {
    super('relay', message);
  }
}

/**
 * No handler is registered for an event's (eventType, eventVersion), and no upcaster chain
 * leads to one. The message is not acked: it is retried (a newer consumer may handle it) and
 * ends in the dead-letter queue after the broker's limit.
 */
export class UnhandledEventError extends RocketMqTxError {
  readonly eventType: string;
  readonly eventVersion: number;
  constructor(eventType: string, eventVersion: number, known: readonly number[]) {
    super(
      'UNHANDLED_EVENT',
      `No handler for ${eventType} version ${eventVersion}` +
        (known.length > 0 ? ` (handled versions: ${known.join(', ')})` : ' (no handler for this event type)'),
      { retriable: true },
    );
    this.eventType = eventType;
    this.eventVersion = eventVersion;
  }
}

/**
 * A feature needs an optional peer dependency that is not installed (e.g. metrics need
 * prom-client). Install the package named in `packageName`.
 */
export class MissingDependencyError extends RocketMqTxError {
  readonly packageName: string;
  constructor(packageName: string, feature: string, cause?: unknown) {
    super('MISSING_DEPENDENCY', `${feature} needs the package ${packageName}: npm install ${packageName}`, {
      retriable: false,
      cause,
    });
    this.packageName = packageName;
  }
}

/**
 * The broker (ACL 2.0) did not accept the credentials: none were given, the access key is
 * unknown, or the secret is wrong. Not retriable: fix `credentials`.
 */
export class AuthenticationError extends RocketMqTxError {
  constructor(message: string, cause?: unknown) {
    super('AUTHENTICATION_FAILED', message, { retriable: false, cause });
  }
}

/**
 * The broker authenticated the credentials but its ACL does not allow the action (e.g. Pub on
 * the topic, Sub on the topic or group). Not retriable: grant the permission on the broker.
 */
export class AuthorizationError extends RocketMqTxError {
  /** The topic or consumer group the SDK was using when it was refused. */
  readonly resource: string;
  constructor(resource: string, message: string, cause?: unknown) {
    super('AUTHORIZATION_DENIED', message, { retriable: false, cause });
    this.resource = resource;
  }
}

/**
 * The TLS connection to the proxy could not be established: its certificate is not trusted by
 * the configured CA (`tls.ca` / `tls.caFile`, or the system CAs), has the wrong name, or the
 * proxy does not speak TLS. Not retriable: fix the `tls` option or the proxy's certificate.
 */
export class TlsError extends RocketMqTxError {
  constructor(message: string, cause?: unknown) {
    super('TLS_FAILED', message, { retriable: false, cause });
  }
}

/** A database operation the SDK owns failed (not the user's work). */
export class StoreError extends RocketMqTxError {
  /** `code` is for subclasses (StoreAccessDeniedError); a plain StoreError is `STORE_ERROR`. */
  constructor(
    message: string,
    cause?: unknown,
    retriable = true,
    code: Extract<ErrorCode, 'STORE_ERROR' | 'STORE_ACCESS_DENIED'> = 'STORE_ERROR',
  ) {
    super(code, message, { retriable, cause });
  }
}

/**
 * The database user lacks a table privilege the SDK needs (MariaDB/MySQL ER_TABLEACCESS_DENIED_ERROR
 * or ER_COLUMNACCESS_DENIED_ERROR). Code `STORE_ACCESS_DENIED`, still a StoreError. Not retriable:
 * the same statement fails until the privilege is granted. `rocketMqTxGrants(component, ...)` prints what each component needs (docs/security.md).
 */
export class StoreAccessDeniedError extends StoreError {
  /** E.g. `INSERT`. */
  readonly privilege: string;
  /** E.g. `tx_record` (without the database name). */
  readonly table: string;
  /** Set when the server named a column (a column-level check, e.g. SELECT for a WHERE clause). */
  readonly column: string | undefined;
  constructor(context: string, privilege: string, table: string, column: string | undefined, cause: unknown) {
    super(
      `${context}: the database user lacks ${privilege} on ${table}` +
        (column !== undefined ? ` (column ${column})` : '') +
        '; grant it (rocketMqTxGrants() lists what each component needs)',
      cause,
      false,
      'STORE_ACCESS_DENIED',
    );
    this.privilege = privilege;
    this.table = table;
    this.column = column;
  }
}

/** Short, log-safe rendering of a bad value for error messages. */
export function describeValue(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (value === null) return 'null';
  if (typeof value === 'string') {
    return value.length > 80 ? `string of length ${value.length}` : JSON.stringify(value);
  }
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint')
    return String(value);
  if (Buffer.isBuffer(value)) return `Buffer of ${value.length} bytes`;
  if (Array.isArray(value)) return `array of length ${value.length}`;
  if (typeof value === 'function') return 'a function';
  return `object ${Object.prototype.toString.call(value)}`;
}
