// The public API of rocketmq-tx: everything else is internal and may change.
export {
  RocketMqTxError,
  InvalidOptionError,
  InvalidMessageError,
  BrokerUnavailableError,
  TransactionFencedError,
  TransactionOutcomeUnknownError,
  ProducerNotRunningError,
  StoreError,
  type ErrorCode,
} from './errors';
export {
  TransactionalProducer,
  type TransactResult,
  type ProducerStats,
  type TransactionContext,
  type TransactionWork,
} from './producer/TransactionalProducer';
export type { TransactionalProducerOptions, CheckBackOptions } from './producer/options';
export type { TransactEvent } from './producer/events';
export {
  TransactionResolution,
  TX_ID_PROPERTY,
  TX_ORIGIN_PROPERTY,
  EVENT_ID_PROPERTY,
  type CheckBackMessage,
  type CheckBackResolver,
} from './checkback/resolution';
export { TxRecordResolver, type TxRecordResolverOptions } from './checkback/TxRecordResolver';
export type { ResolverScope, CheckBackStats, CheckBackOutcome } from './checkback/CheckBackDispatcher';
export { TypeOrmTxRecordStore } from './store/typeorm/TypeOrmTxRecordStore';
export type { TxRecordStore, FenceOutcome, NewTxRecord, TxStatus } from './store/ports';
export { TxRecordEntity, rocketMqTxEntities, type TxRecord } from './store/typeorm/entities';
export { CreateTxRecord1764633600000, rocketMqTxMigrations } from './store/typeorm/migrations';
export { noopLogger, type Logger } from './util/logger';
export { uuidv7 } from './util/uuidv7';
