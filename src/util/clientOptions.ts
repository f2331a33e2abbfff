import type { DataSource } from 'typeorm';
import { InvalidOptionError } from '../errors';
import { rejectUnknownKeys, requireObject, requireString } from './validate';

/** Validators shared by every component that talks to the proxy and the database. */

const ENDPOINTS_RE = /^[A-Za-z0-9.-]+(:\d{1,5})?(;[A-Za-z0-9.-]+(:\d{1,5})?)*$/;
/** RocketMQ topic and group names: letters, digits, %, -, _ ; at most 127 characters. */
export const RESOURCE_NAME_RE = /^[%A-Za-z0-9_-]{1,127}$/;
export const RESOURCE_NAME_RULE = 'a name of 1-127 letters, digits, "_", "-" or "%"';

export interface Credentials {
  accessKey: string;
  accessSecret: string;
}

export function requireEndpoints(value: unknown): string {
  return requireString('endpoints', value, {
    pattern: ENDPOINTS_RE,
    describe: '"host:port" or "host1:port;host2:port"',
  });
}

export function requireDataSource(value: unknown): DataSource {
  if (
    typeof value !== 'object' ||
    value === null ||
    typeof (value as DataSource).createQueryRunner !== 'function'
  ) {
    throw new InvalidOptionError('dataSource', value, 'a TypeORM DataSource');
  }
  return value as DataSource;
}

export function requireResourceName(option: string, value: unknown): string {
  return requireString(option, value, { pattern: RESOURCE_NAME_RE, describe: RESOURCE_NAME_RULE });
}

/** Never echoes the secret into an error message. */
export function optionalCredentials(value: unknown): Credentials | undefined {
  if (value === undefined) return undefined;
  const c = requireObject('credentials', value);
  rejectUnknownKeys('credentials', c, ['accessKey', 'accessSecret']);
  const accessKey = requireString('credentials.accessKey', c.accessKey);
  if (typeof c.accessSecret !== 'string' || c.accessSecret.length === 0) {
    throw new InvalidOptionError('credentials.accessSecret', '(hidden)', 'a non-empty string');
  }
  return { accessKey, accessSecret: c.accessSecret };
}
