import { readFileSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import type { DataSource } from 'typeorm';
import type { BrokerTransport } from '../broker/gateway';
import { InvalidOptionError, StoreError } from '../errors';
import { noopLogger, type Logger } from './logger';
import {
  optionalBoolean,
  optionalFunctionsOf,
  optionalInt,
  optionalOneOf,
  optionalString,
  rejectUnknownKeys,
  requireEndpoints,
  requireObject,
  requireString,
} from './validate';

/** Validators shared by every component that talks to the proxy and the database. */

/** RocketMQ topic and group names: letters, digits, %, -, _ ; at most 127 characters. */
export const RESOURCE_NAME_RE = /^[%A-Za-z0-9_-]{1,127}$/;
export const RESOURCE_NAME_RULE = 'a name of 1-127 letters, digits, "_", "-" or "%"';

/** ACL 2.0 credentials of a broker user (RocketMQ's AccessKey / SecretKey). */
export interface Credentials {
  accessKey: string;
  accessSecret: string;
}

/** Which certificate authorities to trust for the proxy's TLS certificate. */
export interface TlsOptions {
  /** Path of a PEM file with the CA certificate(s); read once, at construction. */
  caFile?: string;
  /** The PEM text of the CA certificate(s). Give `ca` or `caFile`, not both. */
  ca?: Buffer | string;
}

/**
 * `true`: TLS, trusting the system CAs. An object: TLS, trusting only the CA(s) given.
 * `false` (default): plaintext.
 */
export type TlsOption = boolean | TlsOptions;

/** The resolved connection security: `tlsCa` is set only for a custom CA. */
export interface ResolvedTls {
  sslEnabled: boolean;
  tlsCa?: Buffer;
}

const PEM_CERT = '-----BEGIN CERTIFICATE-----';

/**
 * Resolves `tls` and its older spelling `sslEnabled` (same as `tls: true`). Both may be given
 * only if they agree. Every CA is parsed now, so a bad file fails at construction.
 */
export function resolveTls(tls: unknown, sslEnabled: unknown): ResolvedTls {
  const legacy = sslEnabled === undefined ? undefined : optionalBoolean('sslEnabled', sslEnabled, false);
  if (tls === undefined) return { sslEnabled: legacy ?? false };
  let resolved: ResolvedTls;
  if (typeof tls === 'boolean') {
    resolved = { sslEnabled: tls };
  } else {
    const t = requireObject('tls', tls);
    rejectUnknownKeys('tls', t, ['caFile', 'ca']);
    if (t.caFile !== undefined && t.ca !== undefined) {
      throw new InvalidOptionError('tls', tls, 'either tls.caFile or tls.ca, not both');
    }
    if (t.caFile !== undefined) {
      const file = requireString('tls.caFile', t.caFile);
      let pem: Buffer;
      try {
        pem = readFileSync(file);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code ?? 'unreadable';
        throw new InvalidOptionError('tls.caFile', file, `a readable PEM certificate file (${code})`);
      }
      resolved = { sslEnabled: true, tlsCa: requirePemCertificates('tls.caFile', file, pem) };
    } else if (t.ca !== undefined) {
      if (!Buffer.isBuffer(t.ca) && typeof t.ca !== 'string') {
        throw new InvalidOptionError('tls.ca', t.ca, 'a Buffer or string of PEM certificate(s)');
      }
      const pem = Buffer.isBuffer(t.ca) ? Buffer.from(t.ca) : Buffer.from(t.ca, 'utf8');
      resolved = { sslEnabled: true, tlsCa: requirePemCertificates('tls.ca', t.ca, pem) };
    } else {
      resolved = { sslEnabled: true };
    }
  }
  if (legacy !== undefined && legacy !== resolved.sslEnabled) {
    throw new InvalidOptionError(
      'sslEnabled',
      sslEnabled,
      `${resolved.sslEnabled} (as tls says) or left out`,
    );
  }
  return resolved;
}

/** Each PEM certificate block must parse as X.509; nothing else may be in the text. */
function requirePemCertificates(option: string, shown: unknown, pem: Buffer): Buffer {
  const text = pem.toString('utf8');
  const blocks = text.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0 || !text.includes(PEM_CERT)) {
    throw new InvalidOptionError(
      option,
      shown,
      'PEM text with at least one "-----BEGIN CERTIFICATE-----" block',
    );
  }
  if (text.includes('PRIVATE KEY-----')) {
    throw new InvalidOptionError(option, shown, 'CA certificates only (it contains a private key)');
  }
  blocks.forEach((block, i) => {
    try {
      new X509Certificate(block);
    } catch {
      throw new InvalidOptionError(option, shown, `PEM certificates that parse (block ${i + 1} does not)`);
    }
  });
  return pem;
}

export { requireEndpoints };

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

/** The error every component gives for a DataSource that was not initialized (not retriable). */
export function notInitialized(option = 'options.dataSource'): StoreError {
  return new StoreError(`${option} is not initialized: call dataSource.initialize() first`, undefined, false);
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

/**
 * The connection options of every component (TransactionalProducer, IdempotentConsumer,
 * OutboxRelay): one declaration, one resolver, one list of names.
 */
export interface ConnectionOptions {
  /** RocketMQ 5 proxy gRPC endpoints: "host:port" or "host1:port;host2:port". */
  endpoints: string;
  /** A TypeORM DataSource you own and have initialized (MySQL or MariaDB). */
  dataSource: DataSource;
  /** RocketMQ namespace. Default none. */
  namespace?: string;
  /** ACL 2.0 user of the broker; the secret signs each request and is never logged. */
  credentials?: Credentials;
  /**
   * TLS to the proxy: `true` trusts the system CAs, `{ caFile }` / `{ ca }` trusts only that CA.
   * Default plaintext.
   */
  tls?: TlsOption;
  /** Older spelling of `tls: true`. */
  sslEnabled?: boolean;
  /** Per-RPC timeout towards the proxy. Default 3000 ms. */
  requestTimeoutMs?: number;
  /** Upper bound for start(). Default 15000 ms. */
  startTimeoutMs?: number;
  /**
   * Upper bound of the whole shutdown(): draining, flushing and closing the client share this
   * one budget. Default 10000 ms (IdempotentConsumer: 30000 ms).
   */
  shutdownTimeoutMs?: number;
  /** pino-shaped logger. Default: no output. */
  logger?: Logger;
}

/** The broker half of ConnectionOptions (no dataSource, no lifecycle bounds): what a read-only client needs. */
export type BrokerConnectionOptions = Pick<
  ConnectionOptions,
  'endpoints' | 'namespace' | 'credentials' | 'tls' | 'sslEnabled' | 'requestTimeoutMs'
>;

/** BrokerConnectionOptions with every default applied and TLS resolved. */
export interface ResolvedBrokerConnection {
  endpoints: string;
  namespace: string;
  credentials?: Credentials;
  sslEnabled: boolean;
  /** Custom CA (PEM) to trust instead of the system CAs. */
  tlsCa?: Buffer;
  requestTimeoutMs: number;
}

/** ConnectionOptions with every default applied and TLS resolved. */
export interface ResolvedConnection extends ResolvedBrokerConnection {
  dataSource: DataSource;
  startTimeoutMs: number;
  shutdownTimeoutMs: number;
  logger: Logger;
}

/** The option names of ConnectionOptions (for each component's list of known options). */
export const CONNECTION_OPTION_KEYS = [
  'endpoints',
  'dataSource',
  'namespace',
  'credentials',
  'tls',
  'sslEnabled',
  'requestTimeoutMs',
  'startTimeoutMs',
  'shutdownTimeoutMs',
  'logger',
] as const satisfies ReadonlyArray<keyof ConnectionOptions>;

/**
 * Validates and resolves the broker half of the connection options (other keys are ignored).
 * `prefix` names the options in errors when they sit in a nested object (e.g. 'broker.').
 */
export function resolveBrokerConnection(o: Record<string, unknown>, prefix = ''): ResolvedBrokerConnection {
  const endpoints = requireEndpoints(o.endpoints, `${prefix}endpoints`);
  const credentials = optionalCredentials(o.credentials);
  return {
    endpoints,
    namespace: optionalString(`${prefix}namespace`, o.namespace, '', { pattern: RESOURCE_NAME_RE }),
    ...(credentials ? { credentials } : {}),
    ...resolveTls(o.tls, o.sslEnabled),
    requestTimeoutMs: optionalInt(`${prefix}requestTimeoutMs`, o.requestTimeoutMs, 3000, 100, 120_000),
  };
}

/** Validates and resolves the connection options of an options object (other keys are ignored). */
export function resolveConnection(
  o: Record<string, unknown>,
  defaults: { shutdownTimeoutMs: number },
): ResolvedConnection {
  const broker = resolveBrokerConnection(o);
  const dataSource = requireDataSource(o.dataSource);
  return {
    ...broker,
    dataSource,
    startTimeoutMs: optionalInt('startTimeoutMs', o.startTimeoutMs, 15_000, 100, 600_000),
    shutdownTimeoutMs: optionalInt(
      'shutdownTimeoutMs',
      o.shutdownTimeoutMs,
      defaults.shutdownTimeoutMs,
      0,
      600_000,
    ),
    logger: optionalFunctionsOf<Logger>('logger', o.logger, ['debug', 'info', 'warn', 'error']) ?? noopLogger,
  };
}

/** The option names of BrokerConnectionOptions. */
export const BROKER_CONNECTION_OPTION_KEYS = [
  'endpoints',
  'namespace',
  'credentials',
  'tls',
  'sslEnabled',
  'requestTimeoutMs',
] as const satisfies ReadonlyArray<keyof BrokerConnectionOptions>;

/** The `transport` option of the producer and the relay: 'lean' (default) or 'official'. */
export function resolveTransport(value: unknown): BrokerTransport {
  return optionalOneOf<BrokerTransport>('transport', value, ['official', 'lean'], 'lean');
}
