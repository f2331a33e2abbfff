import type { EntityManager } from 'typeorm';
import { InvalidOptionError, UnhandledEventError } from '../errors';
import type { Envelope, EventDefinition } from '../envelope/envelope';

/** What a handler learns about the delivery it runs in. */
export interface HandlerContext {
  /** The consumer's transaction: write business rows through it, and only through it. */
  readonly manager: EntityManager;
  readonly consumerGroup: string;
  readonly message: {
    readonly messageId: string;
    readonly topic: string;
    readonly tag?: string;
    readonly deliveryAttempt: number;
    /** The producer's W3C trace context (`traceparent` property), when it had an active span. */
    readonly traceparent?: string;
  };
  /** Set when the event's version was upcast from an older contract version. */
  readonly upcastFrom?: number;
  /** Set when the 'accept' gap policy applied this event over missing versions. */
  readonly gap?: { readonly expectedVersion: number; readonly receivedVersion: number };
}

export type EventHandlerFn<T = unknown> = (event: Envelope<T>, context: HandlerContext) => Promise<void>;

/** A handler for one (eventType, eventVersion). */
export interface EventHandler<T = unknown> {
  eventType: string;
  eventVersion: number;
  /** A method signature on purpose: a typed handler fits the untyped handlers array. */
  handle(event: Envelope<T>, context: HandlerContext): Promise<void>;
  /** Checks `data` before the handler runs; a verdict makes the message malformed (dead-lettered). */
  validate?: (data: unknown) => string | void;
}

/** Turns `data` of version `fromVersion` into the shape of version `fromVersion + 1`. */
export interface Upcaster {
  eventType: string;
  fromVersion: number;
  upcast: (data: unknown, envelope: Envelope) => unknown;
}

/** A handler bound to an event definition (its type, version and data validator). */
export function on<T>(
  definition: EventDefinition<T> & { readonly validate?: (data: unknown) => string | void },
  handle: EventHandlerFn<T>,
): EventHandler<T> {
  return {
    eventType: definition.eventType,
    eventVersion: definition.eventVersion,
    handle,
    ...(definition.validate ? { validate: definition.validate } : {}),
  };
}

export type Resolution =
  | { kind: 'handler'; handler: EventHandler; envelope: Envelope; upcastFrom?: number }
  | { kind: 'unknown-type'; error: UnhandledEventError }
  | { kind: 'unknown-version'; error: UnhandledEventError };

/** Handlers by (eventType, eventVersion), with upcaster chains from older versions. */
export class HandlerRegistry {
  private readonly handlers = new Map<string, Map<number, EventHandler>>();
  private readonly upcasters = new Map<string, Map<number, Upcaster>>();

  constructor(handlers: unknown, upcasters: unknown) {
    if (!Array.isArray(handlers) || handlers.length === 0) {
      throw new InvalidOptionError(
        'handlers',
        handlers,
        'a non-empty array of { eventType, eventVersion, handle }',
      );
    }
    Array.from(handlers).forEach((h: unknown, i) => this.addHandler(h, `handlers[${i}]`));
    if (upcasters !== undefined) {
      if (!Array.isArray(upcasters)) {
        throw new InvalidOptionError(
          'upcasters',
          upcasters,
          'an array of { eventType, fromVersion, upcast }',
        );
      }
      Array.from(upcasters).forEach((u: unknown, i) => this.addUpcaster(u, `upcasters[${i}]`));
    }
  }

  /**
   * Where an event of this type and version would go, without running an upcaster: the handled
   * version it reaches (through `upcasts` steps), or why none (doctor's code-level check).
   */
  route(
    eventType: string,
    eventVersion: number,
  ):
    | { kind: 'handler'; handledVersion: number; upcasts: number }
    | { kind: 'unknown-type' }
    | { kind: 'unknown-version'; handled: number[] } {
    const byVersion = this.handlers.get(eventType);
    if (!byVersion) return { kind: 'unknown-type' };
    const steps = this.upcasters.get(eventType);
    for (let v = eventVersion, upcasts = 0; ; v++, upcasts++) {
      if (byVersion.has(v)) return { kind: 'handler', handledVersion: v, upcasts };
      if (!steps?.has(v))
        return { kind: 'unknown-version', handled: [...byVersion.keys()].sort((a, b) => a - b) };
    }
  }

  /** The handler for an envelope, upcasting older versions step by step when a chain exists. */
  resolve(envelope: Envelope): Resolution {
    const byVersion = this.handlers.get(envelope.eventType);
    if (!byVersion) {
      return {
        kind: 'unknown-type',
        error: new UnhandledEventError(envelope.eventType, envelope.eventVersion, []),
      };
    }
    let current = envelope;
    const steps = this.upcasters.get(envelope.eventType);
    for (;;) {
      const handler = byVersion.get(current.eventVersion);
      if (handler) {
        return {
          kind: 'handler',
          handler,
          envelope: current,
          ...(current !== envelope ? { upcastFrom: envelope.eventVersion } : {}),
        };
      }
      const step = steps?.get(current.eventVersion);
      if (!step) {
        return {
          kind: 'unknown-version',
          error: new UnhandledEventError(
            envelope.eventType,
            envelope.eventVersion,
            [...byVersion.keys()].sort(),
          ),
        };
      }
      current = {
        ...current,
        eventVersion: current.eventVersion + 1,
        data: step.upcast(current.data, current),
      };
    }
  }

  private addHandler(raw: unknown, path: string): void {
    if (typeof raw !== 'object' || raw === null) {
      throw new InvalidOptionError(path, raw, 'an object { eventType, eventVersion, handle }');
    }
    const h = raw as Record<string, unknown>;
    const type = requireType(h.eventType, `${path}.eventType`);
    const version = requireVersion(h.eventVersion, `${path}.eventVersion`);
    if (typeof h.handle !== 'function')
      throw new InvalidOptionError(`${path}.handle`, h.handle, 'a function');
    if (h.validate !== undefined && typeof h.validate !== 'function') {
      throw new InvalidOptionError(`${path}.validate`, h.validate, 'a function');
    }
    const byVersion = this.handlers.get(type) ?? new Map<number, EventHandler>();
    if (byVersion.has(version)) {
      throw new InvalidOptionError(path, `${type} v${version}`, 'one handler per (eventType, eventVersion)');
    }
    byVersion.set(version, raw as EventHandler);
    this.handlers.set(type, byVersion);
  }

  private addUpcaster(raw: unknown, path: string): void {
    if (typeof raw !== 'object' || raw === null) {
      throw new InvalidOptionError(path, raw, 'an object { eventType, fromVersion, upcast }');
    }
    const u = raw as Record<string, unknown>;
    const type = requireType(u.eventType, `${path}.eventType`);
    const from = requireVersion(u.fromVersion, `${path}.fromVersion`);
    if (typeof u.upcast !== 'function')
      throw new InvalidOptionError(`${path}.upcast`, u.upcast, 'a function');
    const byVersion = this.upcasters.get(type) ?? new Map<number, Upcaster>();
    if (byVersion.has(from)) {
      throw new InvalidOptionError(path, `${type} v${from}`, 'one upcaster per (eventType, fromVersion)');
    }
    byVersion.set(from, raw as Upcaster);
    this.upcasters.set(type, byVersion);
  }
}

function requireType(value: unknown, option: string): string {
  if (typeof value !== 'string' || !/^[A-Za-z][A-Za-z0-9_.:-]{0,127}$/.test(value)) {
    throw new InvalidOptionError(
      option,
      value,
      'an event type of 1-128 letters, digits, "_", ".", ":" or "-"',
    );
  }
  return value;
}

function requireVersion(value: unknown, option: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 2_147_483_647) {
    throw new InvalidOptionError(option, value, 'an integer from 1 to 2147483647');
  }
  return value;
}
