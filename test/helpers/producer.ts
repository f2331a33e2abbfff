import type { DataSource } from 'typeorm';
import { TransactionalProducer, type TransactionalProducerOptions } from '../../src';
import { createGateway } from '../../src/broker/createGateway';
import type { BrokerGateway, HalfMessage, OutgoingMessage } from '../../src/broker/gateway';
import { ENDPOINTS, TRANSPORT } from './env';

export interface Interceptors {
  /** Runs after a half message was accepted, before the local transaction starts. */
  afterHalf?: (half: HalfMessage, message: OutgoingMessage) => Promise<void>;
  /** Return false to drop the EndTransaction (as if the process died or the reply was lost). */
  beforeEnd?: (half: HalfMessage, commit: boolean) => Promise<boolean>;
}

/**
 * A producer on the real broker; interceptors wrap the real gateway to open crash windows.
 * ROCKETMQ_TX_TRANSPORT=official|lean picks its transport unless `options.transport` says.
 */
export function makeProducer(
  dataSource: DataSource,
  options: Partial<TransactionalProducerOptions> & { topics: string[]; producerGroup: string },
  interceptors: Interceptors = {},
  internals: { withoutOutbox?: boolean } = {},
): TransactionalProducer {
  return new TransactionalProducer(
    {
      endpoints: ENDPOINTS,
      dataSource,
      startTimeoutMs: 30_000,
      ...(TRANSPORT ? { transport: TRANSPORT } : {}),
      ...options,
    },
    {
      // withoutOutbox: a publisher that writes no outbox rows (to re-send an eventId on purpose).
      ...(internals.withoutOutbox ? { outbox: null } : {}),
      gateway: (config, logger) => {
        const real = createGateway(config, logger);
        const wrapped: BrokerGateway = {
          start: () => real.start(),
          send: (m) => real.send(m),
          shutdown: () => real.shutdown(),
          sendHalf: async (m) => {
            const half = await real.sendHalf(m);
            if (interceptors.afterHalf) await interceptors.afterHalf(half, m);
            return half;
          },
          endTransaction: async (half, commit) => {
            if (interceptors.beforeEnd && !(await interceptors.beforeEnd(half, commit))) return;
            await real.endTransaction(half, commit);
          },
        };
        return wrapped;
      },
    },
  );
}
