import type { Logger } from '../util/logger';
import type { BrokerGateway, GatewayConfig } from './gateway';
import { LeanGateway } from './lean/LeanGateway';
import { RocketMqGateway } from './RocketMqGateway';

/** The gateway for `config.transport` (default: the official client). */
export function createGateway(config: GatewayConfig, logger: Logger): BrokerGateway {
  return config.transport === 'lean' ? new LeanGateway(config, logger) : new RocketMqGateway(config, logger);
}
