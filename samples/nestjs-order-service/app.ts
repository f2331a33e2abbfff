/**
 * A NestJS order service on rocketmq-tx (docs/nestjs.md): POST /orders -> OrderService.place()
 * under typeorm-transactional's @Transactional() -> OrderRepository + producer.publish(manager,
 * event) in the same transaction; an @RocketMqTxHandler() method applies OrderPlaced events
 * (idempotently, in the consumer's transaction). Started for real by
 * test/integration/nestjs-order-service.test.ts.
 */
import 'reflect-metadata';
import {
  Body,
  Controller,
  HttpCode,
  Inject,
  Injectable,
  Module,
  Post,
  UnprocessableEntityException,
  type INestApplication,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Column, DataSource, Entity, PrimaryColumn } from 'typeorm';
import {
  StorageDriver,
  Transactional,
  addTransactionalDataSource,
  initializeTransactionalContext,
} from 'typeorm-transactional';
import {
  TransactionalProducer,
  defineEvent,
  rocketMqTxEntitiesFor,
  uuidv7,
  type Envelope,
  type HandlerContext,
} from '../../src';
import { RocketMqTxHandler, RocketMqTxModule } from '../../src/nestjs';

export interface OrderServiceConfig {
  endpoints: string;
  /** mysql://... or postgres://... */
  dbUrl: string;
  /** A TRANSACTION topic: the producer's and the consumer's. */
  topic: string;
  producerGroup: string;
  consumerGroup: string;
}

export const OrderPlaced = defineEvent<{ orderId: string; sku: string; qty: number }>({
  eventType: 'OrderPlaced',
  eventVersion: 1,
  aggregateType: 'Order',
  validate: (d) => {
    const o = d as { orderId?: unknown; qty?: unknown } | null;
    return typeof o?.orderId === 'string' && Number.isInteger(o.qty) ? undefined : 'orderId and qty required';
  },
});

@Entity('nest_order')
export class OrderEntity {
  @PrimaryColumn({ type: 'varchar', length: 64 }) id!: string;
  @Column({ type: 'varchar', length: 64 }) sku!: string;
  @Column({ type: 'int' }) qty!: number;
}

/** What the consumer side did: one row per applied delivery (a duplicate would add a second). */
@Entity('nest_order_applied')
export class OrderAppliedEntity {
  @PrimaryColumn({ type: 'varchar', length: 64 }) id!: string;
  @Column({ name: 'order_id', type: 'varchar', length: 64 }) orderId!: string;
  @Column({ type: 'int' }) qty!: number;
}

const CONFIG = 'ORDER_SERVICE_CONFIG';

/** The application's DataSource (typeorm-transactional patches its manager and repositories). */
@Module({
  providers: [
    {
      provide: DataSource,
      inject: [CONFIG],
      useFactory: async (config: OrderServiceConfig) => {
        const postgres = /^postgres(ql)?:/i.test(config.dbUrl);
        const ds = new DataSource({
          type: postgres ? 'postgres' : 'mysql',
          url: config.dbUrl,
          entities: [
            ...rocketMqTxEntitiesFor(postgres ? 'postgres' : 'mysql'),
            OrderEntity,
            OrderAppliedEntity,
          ],
          poolSize: 8,
        });
        await ds.initialize();
        // The sample's own tables (the SDK's come from its migrations).
        await ds.query(
          'CREATE TABLE IF NOT EXISTS nest_order (id VARCHAR(64) PRIMARY KEY, sku VARCHAR(64) NOT NULL, qty INT NOT NULL)',
        );
        await ds.query(
          'CREATE TABLE IF NOT EXISTS nest_order_applied (id VARCHAR(64) PRIMARY KEY, order_id VARCHAR(64) NOT NULL, qty INT NOT NULL)',
        );
        return addTransactionalDataSource(ds);
      },
    },
  ],
  exports: [DataSource],
})
class DatabaseModule implements OnApplicationShutdown {
  constructor(@Inject(DataSource) private readonly ds: DataSource) {}
  // After RocketMqTxModule drained (beforeApplicationShutdown).
  async onApplicationShutdown(): Promise<void> {
    if (this.ds.isInitialized) await this.ds.destroy();
  }
}

@Injectable()
export class OrderRepository {
  constructor(@Inject(DataSource) private readonly ds: DataSource) {}
  async add(order: OrderEntity): Promise<void> {
    // Inside @Transactional() this repository runs on the transaction's connection.
    await this.ds.getRepository(OrderEntity).insert(order);
  }
}

export class OrderRejectedError extends Error {}

@Injectable()
export class OrderService {
  constructor(
    @Inject(DataSource) private readonly ds: DataSource,
    private readonly orders: OrderRepository,
    @Inject(TransactionalProducer) private readonly producer: TransactionalProducer,
    @Inject(CONFIG) private readonly config: OrderServiceConfig,
  ) {}

  /** The order row and its event commit together, or neither does. */
  @Transactional()
  async place(input: { id?: string; sku: string; qty: number }): Promise<{ orderId: string; txId: string }> {
    const order = Object.assign(new OrderEntity(), {
      id: input.id ?? `o-${uuidv7()}`,
      sku: input.sku,
      qty: input.qty,
    });
    await this.orders.add(order);
    const event = OrderPlaced.create({
      aggregateId: order.id,
      aggregateVersion: 1,
      data: { orderId: order.id, sku: order.sku, qty: order.qty },
    });
    const { txId } = await this.producer.publish(this.ds.manager, { topic: this.config.topic, event });
    // A business rule checked after the write and the publish: the whole transaction rolls back.
    if (order.qty > 100) throw new OrderRejectedError(`order ${order.id}: at most 100 units`);
    return { orderId: order.id, txId };
  }
}

/** The consumer side: applies OrderPlaced in the consumer's transaction (deduplicated by the SDK). */
@Injectable()
export class Fulfilment {
  @RocketMqTxHandler(OrderPlaced)
  async apply(event: Envelope<{ orderId: string; qty: number }>, ctx: HandlerContext): Promise<void> {
    await ctx.manager.insert(OrderAppliedEntity, {
      id: uuidv7(),
      orderId: event.data.orderId,
      qty: event.data.qty,
    });
  }
}

@Controller('orders')
export class OrderController {
  constructor(private readonly service: OrderService) {}

  @Post()
  @HttpCode(201)
  async create(
    @Body() body: { id?: string; sku?: unknown; qty?: unknown },
  ): Promise<{ orderId: string; txId: string }> {
    if (typeof body?.sku !== 'string' || !Number.isInteger(body.qty)) {
      throw new UnprocessableEntityException('sku (string) and qty (integer) required');
    }
    try {
      return await this.service.place({
        ...(body.id ? { id: body.id } : {}),
        sku: body.sku,
        qty: body.qty as number,
      });
    } catch (err) {
      if (err instanceof OrderRejectedError) throw new UnprocessableEntityException(err.message);
      throw err;
    }
  }
}

/** The application's root module for `config`. */
export function appModule(config: OrderServiceConfig): new () => unknown {
  @Module({ providers: [{ provide: CONFIG, useValue: config }], exports: [CONFIG] })
  class ConfigModule {}
  // DatabaseModule needs CONFIG: a global module gives it.
  const GlobalConfig = { module: ConfigModule, global: true };

  @Module({
    imports: [
      GlobalConfig,
      DatabaseModule,
      RocketMqTxModule.forRootAsync({
        imports: [DatabaseModule],
        inject: [DataSource],
        useFactory: (dataSource: DataSource) => ({
          producer: {
            endpoints: config.endpoints,
            producerGroup: config.producerGroup,
            topics: [config.topic],
            dataSource,
          },
          relay: { endpoints: config.endpoints, topics: [config.topic], dataSource },
          consumer: {
            endpoints: config.endpoints,
            consumerGroup: config.consumerGroup,
            subscriptions: [config.topic],
            dataSource,
          },
        }),
      }),
    ],
    controllers: [OrderController],
    providers: [OrderRepository, OrderService, Fulfilment],
  })
  class AppModule {}
  return AppModule;
}

/** Creates the application (typeorm-transactional's context first, once per process). */
export async function createOrderService(config: OrderServiceConfig): Promise<INestApplication> {
  initializeTransactionalContext({ storageDriver: StorageDriver.AUTO });
  const app = await NestFactory.create(appModule(config), { logger: ['error', 'warn'] });
  app.enableShutdownHooks();
  return app;
}
