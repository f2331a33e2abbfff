import { RocketMqGateway } from '../../src/broker/RocketMqGateway';
import { noopLogger } from '../../src/util/logger';
import { ENDPOINTS } from '../helpers/env';

/**
 * rocketmq-client-nodejs 1.0.8 listens for the proxy's settings answer only after it fetched every
 * topic route; with several topics the answer arrives first and startup() never completes (seen:
 * 0 of 4 starts with 4 topics completed in 8 s). The gateway re-sends the settings while it waits.
 */
describe('client start-up with several topics', () => {
  it('completes every time, well within the start timeout', async () => {
    for (let i = 0; i < 5; i++) {
      const gateway = new RocketMqGateway(
        {
          endpoints: ENDPOINTS,
          namespace: '',
          topics: ['rmqtx_normal_1', 'rmqtx_tx_8', 'rmqtx_tx_10', 'rmqtx_normal_4'],
          sslEnabled: false,
          requestTimeoutMs: 3000,
          startTimeoutMs: 15_000,
          shutdownTimeoutMs: 5000,
        },
        noopLogger,
      );
      try {
        await gateway.start();
      } finally {
        await gateway.shutdown();
      }
    }
  });
});
