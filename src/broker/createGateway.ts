import type { Logger } from '../util/logger';
import type { BrokerGateway, GatewayConfig } from './gateway';
import { LeanGateway } from './lean/LeanGateway';
import { RocketMqGateway } from './RocketMqGateway';

/**
 * The gateway for `config.transport`, the component's resolved option (resolveTransport defaults
 * it to lean); left undefined here it is the official client.
 */
export function createGateway(config: GatewayConfig, logger: Logger): BrokerGateway {
  return config.transport === 'lean' ? new LeanGateway(config, logger) : new RocketMqGateway(config, logger);
}
