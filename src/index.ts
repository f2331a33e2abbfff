// The public API of rocketmq-tx: everything else is internal and may change.
export {
  RocketMqTxError,
  InvalidOptionError,
  InvalidMessageError,
  BrokerUnavailableError,
  TransactionFencedError,
  TransactionOutcomeUnknownError,
  NoActiveTransactionError,
  NotRunningError,
  ProducerNotRunningError,
  StoreError,
  StoreAccessDeniedError,
  ConsumerNotRunningError,
  RelayNotRunningError,
  UnhandledEventError,
  MissingDependencyError,
  AuthenticationError,
  AuthorizationError,
  TlsError,
  type ErrorCode,
  type Component,
  type AllowedRange,
} from './errors';
// Lifecycle, connection and retry contracts shared by producer, consumer and relay.
export type { LifecycleState } from './lifecycle/Lifecycle';
export type { BrokerConnectionOptions, ConnectionOptions } from './util/clientOptions';
export { retryDelay, type RetryPolicy, type RetryOptions } from './util/retryPolicy';
export type { RelayOutcome } from './relay/outcome';
export type { TransactionOutcome } from './producer/outcome';
export type { TransactionOutcomeLabel } from './observability/observer';
export {
  TransactionalProducer,
  type TransactResult,
  type ProducerStats,
  type TransactionContext,
  type TransactionWork,
  type TransactOptions,
  type PublishOptions,
  type PublishResult,
} from './producer/TransactionalProducer';
export type { PublishOutcome } from './producer/joinedTransactions';
export type {
  TransactionalProducerOptions,
  CheckBackOptions,
  ConfirmBy,
  DeliveryMode,
  DiscardRecoveryOptions,
} from './producer/options';
export type { DiscardRecoveryStats } from './relay/DiscardRecovery';
export type { DeliveryObserverStats } from './producer/DeliveryObserver';
export type { Credentials, TlsOption, TlsOptions } from './util/clientOptions';
export type { BrokerTransport } from './broker/gateway';
export { OutboxRelay, type RelayStats } from './relay/OutboxRelay';
export {
  Retention,
  type RetentionOptions,
  type RetentionReport,
  type RetentionPlan,
  type RetentionProgress,
  type RetentionRunOptions,
  type RetentionTable,
} from './relay/Retention';
export type { OutboxRelayOptions } from './relay/options';
export {
  FactReconciler,
  type MissingFact,
  type ReconcileProgress,
  type ReconcileReport,
  type ReconcileRunOptions,
} from './relay/FactReconciler';
export type {
  Fact,
  FactPage,
  FactPageRequest,
  FactSource,
  FactEventBuilder,
  FactReconcilerOptions,
} from './relay/factReconcilerOptions';
export { backoffDelay, type BackoffPolicy } from './relay/backoff';
export { TypeOrmOutboxStore } from './store/typeorm/outboxStore';
export {
  rocketMqTxGrants,
  tableGrants,
  GRANT_COMPONENTS,
  type GrantComponent,
  type GrantOptions,
  type SdkTable,
  type TablePrivilege,
} from './store/typeorm/grants';
export type { DialectName } from './store/typeorm/dialect';
export { OutboxEventEntity, type OutboxEvent, type OutboxStatus } from './store/typeorm/outboxEntities';
export { CreateOutboxEvent1764633900000 } from './store/typeorm/outboxMigrations';
export {
  CreateOutboxEventArchive1764634100000,
  rocketMqTxArchiveMigrations,
} from './store/typeorm/outboxArchiveMigrations';
export { AddTxRecordCreatedIndex1764634000000 } from './store/typeorm/retentionMigrations';
export {
  OutboxEventArchiveEntity,
  outboxEventArchiveEntityFor,
  type ArchivedOutboxEvent,
} from './store/typeorm/outboxArchiveEntities';
export type { TransactEvent, BodyEvent, EnvelopeEvent } from './outbox/events';
export {
  TransactionResolution,
  TX_ID_PROPERTY,
  TX_ORIGIN_PROPERTY,
  EVENT_ID_PROPERTY,
  type CheckBackMessage,
  type CheckBackResolver,
} from './checkback/resolution';
export { TxRecordResolver, type TxRecordResolverOptions, type FenceBatching } from './checkback/fence';
export type {
  ResolverScope,
  CheckBackStats,
  CheckBackOutcome,
  CheckBackDecision,
} from './checkback/CheckBackDispatcher';
export { TypeOrmTxRecordStore } from './store/typeorm/TypeOrmTxRecordStore';
export type {
  TxRecordStore,
  TombstoneOutcome,
  TombstonesOutcome,
  TxRecordState,
  NewTxRecord,
  TxStatus,
  OutboxStore,
  NewOutboxEvent,
  ClaimedOutboxEvent,
  ClaimOptions,
  ClaimUnconfirmedOptions,
  OutboxInitialStatus,
  TxStatusReader,
} from './store/ports';
export {
  TxRecordEntity,
  rocketMqTxEntities,
  rocketMqTxEntitiesFor,
  type TxRecord,
} from './store/typeorm/entities';
export type { SchemaDatabase } from './store/typeorm/columnTypes';
export { CreateTxRecord1764633600000, rocketMqTxMigrations } from './store/typeorm/migrations';
export { noopLogger, type Logger } from './util/logger';
export {
  collectStatus,
  type StatusOptions,
  type StatusReport,
  type OutboxStatusCounts,
  type InDoubtCounts,
  type InDoubtState,
  type StatusTxStatus,
  type StatusResolvedBy,
  type StatusOutboxStatus,
  type StatusConsumedOutcome,
} from './observability/status';
export {
  RocketMqTxMetrics,
  METRIC_PREFIX,
  type RocketMqTxMetricsOptions,
  type StatusMetricsOptions,
  type MetricsRegistry,
} from './observability/metrics';
export type { ObservableComponent } from './observability/observer';
export { uuidv7 } from './util/uuidv7';
export {
  defineEvent,
  createEnvelope,
  parseEnvelope,
  validateEnvelope,
  EVENT_TYPE_PROPERTY,
  AGGREGATE_ID_PROPERTY,
  type Envelope,
  type EnvelopeInput,
  type EnvelopeRules,
  type EventDefinition,
} from './envelope/envelope';
export { IdempotentConsumer, type ConsumerStats } from './consumer/IdempotentConsumer';
export type {
  IdempotentConsumerOptions,
  Subscription,
  ConsumerRetryOptions,
  GapPolicy,
  UnknownEventTypePolicy,
} from './consumer/options';
export {
  on,
  type EventHandler,
  type EventHandlerFn,
  type HandlerContext,
  type Upcaster,
} from './consumer/handlers';
export type { ConsumeOutcome, OutcomeKind } from './consumer/outcome';
export {
  ConsumedEventEntity,
  AggregateCursorEntity,
  type ConsumedEvent,
  type AggregateCursor,
} from './store/typeorm/consumerEntities';
export {
  CreateConsumedEvent1764633700000,
  CreateAggregateCursor1764633800000,
} from './store/typeorm/consumerMigrations';
export { runDoctor } from './doctor/runDoctor';
export type {
  DoctorOptions,
  DoctorBrokerOptions,
  DoctorConsumerOptions,
  DoctorEventType,
  DoctorThresholds,
} from './doctor/options';
export {
  DOCTOR_GROUPS,
  type DoctorReport,
  type DoctorCheck,
  type DoctorStatus,
  type DoctorGroup,
} from './doctor/report';
