import type * as PromClient from 'prom-client';
import type * as OtelApi from '@opentelemetry/api';
import { MissingDependencyError } from '../errors';

/**
 * Optional peer dependencies, loaded on first use so the SDK imports and runs without them.
 * Each require names its package literally, so bundlers can see it.
 */

export type PromClientModule = typeof PromClient;
export type OtelApiModule = typeof OtelApi;

function isNotFound(err: unknown, name: string): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  return (
    typeof e === 'object' &&
    e !== null &&
    e.code === 'MODULE_NOT_FOUND' &&
    typeof e.message === 'string' &&
    e.message.includes(name)
  );
}

/** prom-client, or MissingDependencyError naming it. */
export function requirePromClient(feature: string): PromClientModule {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require('prom-client') as PromClientModule;
  } catch (err) {
    if (isNotFound(err, 'prom-client')) throw new MissingDependencyError('prom-client', feature, err);
    throw err;
  }
}

let otel: OtelApiModule | null | undefined;

/** @opentelemetry/api, or null when it is not installed (looked up once). */
export function optionalOtelApi(): OtelApiModule | null {
  if (otel === undefined) {
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      otel = require('@opentelemetry/api') as OtelApiModule;
    } catch (err) {
      if (!isNotFound(err, '@opentelemetry/api')) throw err;
      otel = null;
    }
  }
  return otel;
}
