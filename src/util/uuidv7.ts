import { v7 } from 'uuid';

/**
 * A new RFC 9562 UUIDv7 (the `uuid` package's `v7()`): a 48-bit Unix ms timestamp, then a
 * counter and random bits, so ids from one process are strictly increasing and index like a
 * sequence.
 */
export function uuidv7(): string {
  return v7();
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID_RE.test(value);
}
