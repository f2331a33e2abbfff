/**
 * One producer process of the crash-window runner: runs the target's business transactions in
 * a loop and freezes inside its crash window (see protocol.ts) until the runner SIGKILLs it.
 * Configured by the ROCKETMQ_TX_CHAOS_CHILD environment variable (JSON).
 */
import { createGateway } from '../../broker/createGateway';
import type { BrokerGateway } from '../../broker/gateway';
import { TransactionalProducer } from '../../producer/TransactionalProducer';
import { CHILD_ENV, hit, say, type ProducerWindow } from './protocol';
import { loadTarget, type ChaosProducerTarget } from './target';

export interface ProducerChildConfig {
  module: string;
  window: ProducerWindow;
  endpoints: string;
  namespace: string;
  topics: string[];
  producerGroup: string;
  concurrency: number;
}

/** Transactions left in doubt before a check-back window child waits for its check-back. */
const IN_DOUBT_BEFORE_WAIT = 3;

async function main(): Promise<void> {
  const cfg = JSON.parse(process.env[CHILD_ENV] ?? '{}') as ProducerChildConfig;
  const target = loadTarget<ChaosProducerTarget>(cfg.module, ['dataSource', 'transaction']);
  const dataSource = await target.dataSource();
  const w = cfg.window;
  const producer = new TransactionalProducer(
    {
      endpoints: cfg.endpoints,
      ...(cfg.namespace ? { namespace: cfg.namespace } : {}),
      dataSource,
      producerGroup: cfg.producerGroup,
      topics: cfg.topics,
      startTimeoutMs: 30_000,
      discardRecovery: false,
    },
    {
      gateway: (config, logger) => {
        const onCheckBack = config.onCheckBack;
        const real = createGateway(
          w === 'check-back' && onCheckBack
            ? {
                ...config,
                // The fence decides (a tombstone may be written), then the process dies before it answers.
                onCheckBack: async (message) => {
                  await onCheckBack(message);
                  return hit('check-back', message.txId);
                },
              }
            : config,
          logger,
        );
        const gateway: BrokerGateway = {
          start: () => real.start(),
          send: (m) => real.send(m),
          shutdown: () => real.shutdown(),
          sendHalf: async (m) => {
            const half = await real.sendHalf(m);
            if (w === 'after-half') hit('after-half', half.messageId);
            return half;
          },
          endTransaction: async (half, commit) => {
            if (commit && w === 'after-commit') hit('after-commit', half.messageId);
            // Left in doubt on purpose: the broker checks back, and this process dies answering.
            // It must fail like a lost EndTransaction (ambiguous: nothing confirmed), not succeed:
            // a silent success confirmed the events as SENT, so when the broker then discarded
            // the half message (its checks sent to killed processes) discard recovery skipped it
            // and the event was lost, a state no real producer reaches.
            if (commit && w === 'check-back') {
              throw new Error('rocketmq-tx chaos: EndTransaction(COMMIT) withheld (check-back window)');
            }
            await real.endTransaction(half, commit);
          },
        };
        return gateway;
      },
    },
  );
  await producer.start();
  // The target sees the real producer; transact/publish report each txId before the COMMIT can happen.
  const reported = new Proxy(producer, {
    get(target, prop) {
      if (prop === 'transact') {
        return (events: unknown, work: (...a: unknown[]) => Promise<unknown>, options?: unknown) =>
          target.transact(
            events as never,
            async (manager, context) => {
              say({ t: 'tx', txId: context.txId });
              const result = await work(manager, context);
              if (w === 'in-work') hit('in-work', context.txId);
              return result;
            },
            options as never,
          );
      }
      const value: unknown = Reflect.get(target, prop, target);
      if (prop === 'publish' && typeof value === 'function') {
        return async (...args: unknown[]) => {
          const result = (await value.apply(target, args)) as { txId: string };
          say({ t: 'tx', txId: result.txId });
          if (w === 'in-work') hit('in-work', result.txId);
          return result;
        };
      }
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  say({ t: 'ready' });
  let sequence = 0;
  const topic = cfg.topics[0]!;
  const worker = async (): Promise<void> => {
    for (;;) {
      if (w === 'check-back' && sequence >= IN_DOUBT_BEFORE_WAIT) return;
      await target.transaction(reported, { topic, sequence: sequence++ }).catch(() => undefined);
    }
  };
  await Promise.all(Array.from({ length: cfg.concurrency }, worker));
  // check-back: wait for a check-back (the runner kills after its window timeout otherwise).
  await new Promise<never>(() => undefined);
}

main().catch((err: unknown) => {
  process.stderr.write(`chaos producer child failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(3);
});
