import { InvalidOptionError } from '../errors';

/** Validators for constructor options: each throws InvalidOptionError naming option, value and rule. */

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function requireObject(option: string, value: unknown): Record<string, unknown> {
  if (!isPlainObject(value)) throw new InvalidOptionError(option, value, 'an object');
  return value;
}

export function optionalObject(option: string, value: unknown): Record<string, unknown> {
  if (value === undefined) return {};
  return requireObject(option, value);
}

export function rejectUnknownKeys(
  option: string,
  value: Record<string, unknown>,
  known: readonly string[],
): void {
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) {
      throw new InvalidOptionError(
        `${option}.${key}`,
        value[key],
        `no such option (known: ${known.join(', ')})`,
      );
    }
  }
}

export function requireString(
  option: string,
  value: unknown,
  rule: { pattern?: RegExp; maxLength?: number; describe?: string } = {},
): string {
  const maxLength = rule.maxLength ?? 255;
  const describe = rule.describe ?? `a non-empty string of at most ${maxLength} characters`;
  if (typeof value !== 'string' || value.length === 0 || value.length > maxLength) {
    throw new InvalidOptionError(option, value, describe);
  }
  if (rule.pattern && !rule.pattern.test(value)) throw new InvalidOptionError(option, value, describe);
  return value;
}

export function optionalString(
  option: string,
  value: unknown,
  fallback: string,
  rule: { pattern?: RegExp; maxLength?: number; describe?: string } = {},
): string {
  if (value === undefined) return fallback;
  return requireString(option, value, rule);
}

export function optionalInt(
  option: string,
  value: unknown,
  fallback: number,
  min: number,
  max: number,
): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidOptionError(option, value, `an integer from ${min} to ${max}`, { min, max });
  }
  return value;
}

/**
 * One of `allowed` (string literals), or `fallback` when undefined. The error lists them:
 * '"a" or "b"', '"a", "b" or "c"'.
 */
export function optionalOneOf<T extends string>(
  option: string,
  value: unknown,
  allowed: readonly T[],
  fallback: T,
): T {
  if (value === undefined) return fallback;
  if (!(allowed as readonly unknown[]).includes(value)) {
    const quoted = allowed.map((a) => `"${a}"`);
    throw new InvalidOptionError(option, value, `${quoted.slice(0, -1).join(', ')} or ${quoted.at(-1)!}`);
  }
  return value as T;
}

export function optionalBoolean(option: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw new InvalidOptionError(option, value, 'true or false');
  return value;
}

export function optionalFunctionsOf<T>(
  option: string,
  value: unknown,
  methods: readonly string[],
): T | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null) {
    throw new InvalidOptionError(option, value, `an object with methods ${methods.join(', ')}`);
  }
  for (const m of methods) {
    if (typeof (value as Record<string, unknown>)[m] !== 'function') {
      throw new InvalidOptionError(`${option}.${m}`, (value as Record<string, unknown>)[m], 'a function');
    }
  }
  return value as T;
}

const ENDPOINTS_RULE = '"host:port" or "host1:port;host2:port"';
const ENDPOINT_RE = /^[A-Za-z0-9.-]+(?::([^:]*))?$/;
const PORT_RE = /^\d{1,5}$/;

/** RocketMQ proxy endpoints: "host:port" or "host1:port;host2:port", every port from 1 to 65535. */
export function requireEndpoints(value: unknown, option = 'endpoints'): string {
  const endpoints = requireString(option, value, { describe: ENDPOINTS_RULE });
  for (const endpoint of endpoints.split(';')) {
    const match = ENDPOINT_RE.exec(endpoint);
    if (!match) throw new InvalidOptionError(option, value, ENDPOINTS_RULE);
    const port = match[1];
    if (port !== undefined && !(PORT_RE.test(port) && Number(port) >= 1 && Number(port) <= 65535)) {
      throw new InvalidOptionError(
        option,
        value,
        `${ENDPOINTS_RULE} with ports from 1 to 65535 (port "${port}" of "${endpoint}" is not)`,
      );
    }
  }
  return endpoints;
}
