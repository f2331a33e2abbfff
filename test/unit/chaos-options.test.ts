import * as path from 'node:path';
import { resolveConsumerChaosOptions } from '../../src/testing/chaos/runConsumerChaos';
import { resolveProducerChaosOptions } from '../../src/testing/chaos/runProducerChaos';
import { runCli } from './fakes/cli';
import { optionError } from '../helpers/optionError';

const MODULE = path.join(__dirname, '../../samples/order-service/chaos-consumer-target.ts');
const base = { module: MODULE, endpoints: '127.0.0.1:8081', topic: 'orders_tx' };

describe('consumer chaos options', () => {
  it('defaults: a fresh group, every consumer window, 5 events per round, 2 processes', () => {
    const o = resolveConsumerChaosOptions(base);
    expect(o.consumerGroup).toMatch(/^rmqtx_chaos_c_[0-9a-f]{12}$/);
    expect(o.windows).toEqual(['random', 'in-handler', 'before-ack']);
    expect(o).toMatchObject({ eventsPerRound: 5, parallel: 2, rounds: 50, windowTimeoutMs: 20_000 });
    expect(o.module).toBe(MODULE);
  });

  it('names the bad option: a producer window, a zero event count, an unknown key, a missing module', () => {
    expect(optionError(() => resolveConsumerChaosOptions({ ...base, windows: ['after-half'] })).option).toBe(
      'windows',
    );
    expect(optionError(() => resolveConsumerChaosOptions({ ...base, eventsPerRound: 0 })).option).toBe(
      'eventsPerRound',
    );
    expect(optionError(() => resolveConsumerChaosOptions({ ...base, concurrency: 2 })).option).toBe(
      'options.concurrency',
    );
    expect(optionError(() => resolveConsumerChaosOptions({ ...base, module: '/nope.ts' })).option).toBe(
      'module',
    );
    expect(optionError(() => resolveConsumerChaosOptions({ ...base, consumerGroup: 'a b' })).option).toBe(
      'consumerGroup',
    );
  });

  it('the producer runner keeps its own options and refuses the consumer ones', () => {
    const o = resolveProducerChaosOptions({ ...base, checkHorizonMs: 15_000 });
    expect(o).toMatchObject({ checkHorizonMs: 15_000, recoveryHorizonMs: 20_000, concurrency: 2 });
    expect(optionError(() => resolveProducerChaosOptions({ ...base, eventsPerRound: 5 })).option).toBe(
      'options.eventsPerRound',
    );
    expect(optionError(() => resolveProducerChaosOptions({ ...base, windows: ['in-handler'] })).option).toBe(
      'windows',
    );
  });
});

describe('rocketmq-tx chaos --consumer (command line)', () => {
  it('refuses producer-only flags with --consumer and consumer-only flags without it (exit 2)', async () => {
    const consumerCli = (...flags: string[]) =>
      runCli(['chaos', '--consumer', '--module', MODULE, '--topic', 't', ...flags]);
    const withConsumer = await consumerCli('--check-horizon', '5s');
    expect(withConsumer.code).toBe(2);
    expect(withConsumer.stderr).toContain('--check-horizon is not used with --consumer');
    const without = await runCli(['chaos', '--module', MODULE, '--topic', 't', '--events-per-round', '3']);
    expect(without.code).toBe(2);
    expect(without.stderr).toContain('--events-per-round needs --consumer');
    const badWindow = await consumerCli('--windows', 'in-work');
    expect(badWindow.code).toBe(2);
    expect(badWindow.stderr).toContain('in-handler');
  });
});
