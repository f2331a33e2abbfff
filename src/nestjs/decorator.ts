import 'reflect-metadata';
import { InvalidOptionError } from '../errors';
import type { EventDefinition } from '../envelope/envelope';

/** Reflect metadata key of the handler declarations on a method (an array: one method may handle several). */
export const HANDLER_METADATA = 'rocketmq-tx:handlers';

/** What `@RocketMqTxHandler()` takes: an event definition (from defineEvent) or its type and version. */
export type HandlerDeclaration =
  | (Pick<EventDefinition<unknown>, 'eventType' | 'eventVersion'> & {
      readonly validate?: (data: unknown) => string | void;
    })
  | { readonly eventType: string; readonly eventVersion: number };

export interface DeclaredHandler {
  readonly eventType: string;
  readonly eventVersion: number;
  readonly validate?: (data: unknown) => string | void;
}

/**
 * Declares a provider method as the consumer's handler of one (eventType, eventVersion).
 * RocketMqTxModule finds it at bootstrap and adds it to the IdempotentConsumer's handlers; the
 * method is called as `handle(envelope, context)` inside the consumer's transaction
 * (`context.manager`), on the provider's (singleton) instance. With a definition from
 * defineEvent its `validate` checks the data first (a verdict makes the message malformed).
 *
 * @example
 * \@Injectable()
 * class Inventory {
 *   \@RocketMqTxHandler(OrderCreated)
 *   async reserve(event: Envelope<OrderCreatedData>, ctx: HandlerContext) { ... }
 * }
 *
 * @throws InvalidOptionError when the declaration has no valid eventType/eventVersion.
 */
export function RocketMqTxHandler(declaration: HandlerDeclaration): MethodDecorator {
  const d = declaration as unknown as Record<string, unknown> | null;
  if (typeof d !== 'object' || d === null) {
    throw new InvalidOptionError(
      '@RocketMqTxHandler()',
      declaration,
      'an event definition or { eventType, eventVersion }',
    );
  }
  if (typeof d.eventType !== 'string' || d.eventType.length === 0 || d.eventType.length > 255) {
    throw new InvalidOptionError(
      '@RocketMqTxHandler().eventType',
      d.eventType,
      'a non-empty string of at most 255 characters',
    );
  }
  if (!Number.isInteger(d.eventVersion) || (d.eventVersion as number) < 1) {
    throw new InvalidOptionError('@RocketMqTxHandler().eventVersion', d.eventVersion, 'an integer >= 1');
  }
  if (d.validate !== undefined && typeof d.validate !== 'function') {
    throw new InvalidOptionError('@RocketMqTxHandler().validate', d.validate, 'a function');
  }
  const entry: DeclaredHandler = {
    eventType: d.eventType,
    eventVersion: d.eventVersion as number,
    ...(typeof d.validate === 'function' ? { validate: d.validate as (data: unknown) => string | void } : {}),
  };
  return (target, propertyKey, descriptor) => {
    if (typeof descriptor.value !== 'function') {
      throw new InvalidOptionError(
        '@RocketMqTxHandler()',
        String(propertyKey),
        'a decorator on a method (not an accessor or property)',
      );
    }
    const existing = (Reflect.getMetadata(HANDLER_METADATA, target, propertyKey) ?? []) as DeclaredHandler[];
    Reflect.defineMetadata(HANDLER_METADATA, [...existing, entry], target, propertyKey);
  };
}

/** The declarations on `prototype[name]` (empty when none). */
export function declaredHandlers(prototype: object, name: string): readonly DeclaredHandler[] {
  return (Reflect.getMetadata(HANDLER_METADATA, prototype, name) ?? []) as DeclaredHandler[];
}
