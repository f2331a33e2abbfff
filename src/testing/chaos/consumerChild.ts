/**
 * One consumer process of the crash-window runner: runs your IdempotentConsumer (your handlers
 * and settings) and freezes inside its crash window (see protocol.ts) until the runner
 * SIGKILLs it. Configured by the ROCKETMQ_TX_CHAOS_CHILD environment variable (JSON).
 */
import { RocketMqConsumerGateway } from '../../broker/RocketMqConsumerGateway';
import { withAck } from '../../broker/consumerGateway';
import { IdempotentConsumer } from '../../consumer/IdempotentConsumer';
import { ACKED_KINDS } from '../../consumer/outcome';
import type { EventHandler } from '../../consumer/handlers';
import { CHILD_ENV, hit, say, type ConsumerWindow } from './protocol';
import { CONSUMER_TARGET_FUNCTIONS, loadTarget, type ChaosConsumerTarget } from './target';

export interface ConsumerChildConfig {
  module: string;
  window: ConsumerWindow;
  endpoints: string;
  namespace: string;
  topic: string;
  tag: string;
  consumerGroup: string;
}

async function main(): Promise<void> {
  const cfg = JSON.parse(process.env[CHILD_ENV] ?? '{}') as ConsumerChildConfig;
  const target = loadTarget<ChaosConsumerTarget>(cfg.module, CONSUMER_TARGET_FUNCTIONS);
  const dataSource = await target.dataSource();
  const w = cfg.window;
  const options = target.consumerOptions();
  // in-handler: your handler ran inside the consumer's transaction (its effect and the dedupe
  // row written, uncommitted, locks held); the process dies before the COMMIT.
  const handlers: EventHandler[] = options.handlers.map((h) =>
    w === 'in-handler'
      ? {
          ...h,
          handle: async (event, context) => {
            await h.handle(event, context);
            hit('in-handler', context.message.messageId);
          },
        }
      : h,
  );
  const consumer = new IdempotentConsumer(
    {
      ...options,
      handlers,
      // Every ack reported to the runner: it waits until what a killed process held came back.
      onOutcome: (outcome) => {
        if (ACKED_KINDS.includes(outcome.kind)) say({ t: 'settled', id: outcome.messageId });
        options.onOutcome?.(outcome);
      },
      endpoints: cfg.endpoints,
      ...(cfg.namespace ? { namespace: cfg.namespace } : {}),
      dataSource,
      consumerGroup: cfg.consumerGroup,
      subscriptions: [{ topic: cfg.topic, tag: cfg.tag }],
    },
    {
      // before-ack: the effect and the dedupe row are committed; the process dies before the
      // ack, so the broker delivers the message again (to another process of the group).
      gateway: (config, logger) => {
        const real = new RocketMqConsumerGateway(config, logger);
        return withAck(real, async (m) => {
          if (w === 'before-ack') hit('before-ack', m.messageId);
          await real.ack(m);
        });
      },
    },
  );
  await consumer.start();
  say({ t: 'ready' });
  await new Promise<never>(() => undefined);
}

main().catch((err: unknown) => {
  process.stderr.write(`chaos consumer child failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(3);
});
