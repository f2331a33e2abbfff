/**
 * rocketmq-tx/nestjs: the SDK as a NestJS module. Requires @nestjs/common and @nestjs/core
 * (optional peer dependencies of rocketmq-tx; the root entry point never loads them).
 */
export {
  RocketMqTxModule,
  RocketMqTxLifecycle,
  ROCKETMQ_TX_OPTIONS,
  type RocketMqTxModuleRootOptions,
  type RocketMqTxModuleAsyncOptions,
} from './module';
export { RocketMqTxHandler, type HandlerDeclaration } from './decorator';
export type { RocketMqTxModuleOptions, RocketMqTxConsumerOptions, ResolvedModuleOptions } from './options';
