// rocketmq-tx/testing: fakes for your unit tests and the crash-window runner. Not imported by
// the root entry point ('rocketmq-tx'), so none of it loads in production code.
export type { RecordedMessage } from './messages';
export {
  InMemoryProducer,
  type InMemoryProducerOptions,
  type InMemoryProducerStats,
  type TransactionalProducerLike,
  type PublishOptions,
  type PublishResult,
} from './InMemoryProducer';
export {
  InMemoryConsumer,
  messageOf,
  type InMemoryConsumerOptions,
  type InMemoryInbox,
  type DeliverAllOptions,
  type DeliveryOrder,
  type DeliveryReport,
} from './InMemoryConsumer';
export type { ChaosContext, ChaosProducerTarget, ChaosConsumerTarget } from './chaos/target';
export {
  PRODUCER_WINDOWS,
  CONSUMER_WINDOWS,
  type ProducerWindow,
  type ConsumerWindow,
} from './chaos/protocol';
export {
  runProducerChaos,
  formatChaosReport,
  type ProducerChaosOptions,
  type ProducerChaosReport,
  type ChaosWindowReport,
} from './chaos/runProducerChaos';
export {
  runConsumerChaos,
  formatConsumerChaosReport,
  type ConsumerChaosOptions,
  type ConsumerChaosReport,
  type ConsumerChaosWindowReport,
} from './chaos/runConsumerChaos';
export type { ChaosRunnerOptions } from './chaos/killLoop';
