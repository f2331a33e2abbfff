import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  AuthenticationError,
  AuthorizationError,
  BrokerUnavailableError,
  RocketMqTxError,
  TlsError,
} from '../../src';
import { classifySecurityError, mapSendError } from '../../src/broker/errors';
import { CustomCa, useCustomCa } from '../../src/broker/tls';
import { resolveTls } from '../../src/util/clientOptions';
import { optionError } from '../helpers/optionError';

/** A self-signed EC certificate (openssl req -x509, valid until 2126): a CA to trust, nothing secret. */
const CA_PEM = `-----BEGIN CERTIFICATE-----
MIIBnDCCAUOgAwIBAgIUW4QvUmAoeyZ6xosRPe/CCVNXupwwCgYIKoZIzj0EAwIw
IzEhMB8GA1UEAwwYcm9ja2V0bXEtdHggdW5pdCBmaXh0dXJlMCAXDTI2MTIwMzA4
NDIxN1oYDzIxMjYxMTA5MDg0MjE3WjAjMSEwHwYDVQQDDBhyb2NrZXRtcS10eCB1
bml0IGZpeHR1cmUwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAT5rZFR5QHenSfc
rqohTXupHSsl3m9/Ph3TxEmH+x0ronX3rWMIyqpU+pCqDA8PoI+G/UBzXHUw+uPs
82umnTSSo1MwUTAdBgNVHQ4EFgQUaw/W94butHSQMK4lJdQ61Xh4774wHwYDVR0j
BBgwFoAUaw/W94butHSQMK4lJdQ61Xh4774wDwYDVR0TAQH/BAUwAwEB/zAKBggq
hkjOPQQDAgNHADBEAiAgOni9I2R6ptlBnVuHg5gFQ06ZIkWd0AlBTqhP1F4zgwIg
LwvoE22PH4F4cx3lW1t+6m0kIFS2G0N1Xr2vXSH2kQI=
-----END CERTIFICATE-----
`;

describe('tls option', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'rmqtx-tls-'));
  const caFile = path.join(dir, 'ca.crt');
  writeFileSync(caFile, CA_PEM);

  it('plaintext by default; true and {} mean TLS with the system CAs; sslEnabled is the older spelling', () => {
    expect(resolveTls(undefined, undefined)).toEqual({ sslEnabled: false });
    expect(resolveTls(false, undefined)).toEqual({ sslEnabled: false });
    expect(resolveTls(true, undefined)).toEqual({ sslEnabled: true });
    expect(resolveTls({}, undefined)).toEqual({ sslEnabled: true });
    expect(resolveTls(undefined, true)).toEqual({ sslEnabled: true });
    expect(resolveTls(true, true)).toEqual({ sslEnabled: true });
  });

  it('reads and parses a custom CA from caFile, or takes it as a string or Buffer', () => {
    expect(resolveTls({ caFile }, undefined).tlsCa?.toString()).toBe(CA_PEM);
    expect(resolveTls({ ca: CA_PEM }, undefined)).toEqual({ sslEnabled: true, tlsCa: Buffer.from(CA_PEM) });
    expect(resolveTls({ ca: Buffer.from(CA_PEM + CA_PEM) }, undefined).tlsCa?.length).toBe(2 * CA_PEM.length);
  });

  it.each([
    [{ caFile: path.join(dir, 'missing.crt') }, 'tls.caFile', 'ENOENT'],
    [{ caFile: dir }, 'tls.caFile', 'EISDIR'],
    [{ caFile: '' }, 'tls.caFile', '""'],
    [{ caFile: 42 }, 'tls.caFile', '42'],
    [{ ca: 'not a certificate' }, 'tls.ca', 'BEGIN CERTIFICATE'],
    [{ ca: CA_PEM.replace('MIIBnDCC', 'MIIBnXXX') }, 'tls.ca', 'parse'],
    [{ ca: 7 }, 'tls.ca', 'Buffer or string'],
    [{ ca: CA_PEM, caFile }, 'tls', 'not both'],
    [{ cafile: caFile }, 'tls.cafile', 'cafile'],
    ['yes', 'tls', '"yes"'],
    [null, 'tls', 'null'],
  ])('rejects tls %j naming %s', (tls, option, shown) => {
    const err = optionError(() => resolveTls(tls, undefined));
    expect(err.option).toBe(option);
    expect(err.retriable).toBe(false);
    expect(err.message).toContain(shown);
  });

  it('refuses a CA text that carries a private key, without echoing it', () => {
    const key =
      '-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgSECRET\n-----END PRIVATE KEY-----\n';
    const err = optionError(() => resolveTls({ ca: CA_PEM + key }, undefined));
    expect(err.option).toBe('tls.ca');
    expect(err.message).toContain('private key');
    expect(err.message).not.toContain('SECRET');
  });

  it('refuses sslEnabled that contradicts tls', () => {
    expect(optionError(() => resolveTls({ caFile }, false)).option).toBe('sslEnabled');
    expect(optionError(() => resolveTls(false, true)).option).toBe('sslEnabled');
    expect(optionError(() => resolveTls(undefined, 'yes')).option).toBe('sslEnabled');
  });
});

describe('custom CA on the client channel (src/broker/tls.ts)', () => {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const rpcModule = require('rocketmq-client-nodejs/dist/client/RpcClient') as {
    RpcClient: new (endpoints: unknown, ssl: unknown) => { close(): void };
  };
  const { createRequire } = require('node:module') as typeof import('node:module');
  /* eslint-enable @typescript-eslint/no-require-imports */
  const grpc = createRequire(require.resolve('rocketmq-client-nodejs/dist/client/RpcClient'))(
    '@grpc/grpc-js',
  ) as { ChannelCredentials: { createSsl: (...args: unknown[]) => unknown } };
  const endpoints = { getGrpcTarget: () => '127.0.0.1:1' };

  it('builds that client channel with the CA, leaves other clients and createSsl itself as they were', () => {
    const client = { sslEnabled: true } as never;
    useCustomCa(client, Buffer.from(CA_PEM));
    expect((client as { sslEnabled: unknown }).sslEnabled).toBeInstanceOf(CustomCa);
    const spy = jest.spyOn(grpc.ChannelCredentials, 'createSsl');
    try {
      const withCa = new rpcModule.RpcClient(endpoints, (client as { sslEnabled: unknown }).sslEnabled);
      expect(spy).toHaveBeenLastCalledWith(Buffer.from(CA_PEM));
      const systemCas = new rpcModule.RpcClient(endpoints, true);
      expect(spy).toHaveBeenLastCalledWith();
      expect(spy).toHaveBeenCalledTimes(2);
      const plain = new rpcModule.RpcClient(endpoints, false);
      expect(spy).toHaveBeenCalledTimes(2);
      expect(grpc.ChannelCredentials.createSsl).toBe(spy);
      for (const c of [withCa, systemCas, plain]) c.close();
    } finally {
      spy.mockRestore();
    }
  });
});

describe('security failures of the broker become typed, non-retriable errors', () => {
  const clientError = (name: string, code: number, message: string) => {
    const e = new Error(`[request-id=undefined, response-code=${code}] ${message}`);
    e.name = name;
    return Object.assign(e, { code });
  };
  // The client wraps route failures twice during startup.
  const wrapped = (inner: Error) =>
    new Error('Startup the rocketmq client failed', {
      cause: new Error('Failed to fetch topic routes after 3 attempts', { cause: inner }),
    });
  const classify = (err: unknown, key?: string) =>
    classifySecurityError(err, '127.0.0.1:8081', 'topics t', key);

  it('401 from the proxy: AuthenticationError naming the access key', () => {
    const err = classify(
      wrapped(clientError('UnauthorizedException', 40100, 'check signature failed.')),
      'ak1',
    );
    expect(err).toBeInstanceOf(AuthenticationError);
    expect(err).toMatchObject({ code: 'AUTHENTICATION_FAILED', retriable: false });
    expect(err?.message).toContain('"ak1"');
    expect(
      classify(clientError('UnauthorizedException', 40100, 'username cannot be null.'))?.message,
    ).toContain('no credentials');
  });

  it("401 with the ACL handler's denial (RocketMQ 5.3 answers a denied action with 401): AuthorizationError", () => {
    const denied = clientError(
      'UnauthorizedException',
      40100,
      'User:rmqtx-denied has no permission to access Topic:orders from 127.0.0.1, no matched policies.',
    );
    const err = classify(wrapped(denied), 'rmqtx-denied') as AuthorizationError;
    expect(err).toBeInstanceOf(AuthorizationError);
    expect(err).toMatchObject({ code: 'AUTHORIZATION_DENIED', retriable: false, resource: 'Topic:orders' });
  });

  it('403 from the proxy: AuthorizationError on the resource in use', () => {
    const err = classify(clientError('ForbiddenException', 40300, 'forbidden')) as AuthorizationError;
    expect(err).toBeInstanceOf(AuthorizationError);
    expect(err.resource).toBe('topics t');
  });

  it('a TLS verification failure (gRPC UNAVAILABLE naming the certificate): TlsError', () => {
    const grpcError = Object.assign(
      new Error(
        '14 UNAVAILABLE: No connection established. Last error: Error: unable to verify the first certificate.',
      ),
      { code: 14 },
    );
    const err = classify(wrapped(grpcError));
    expect(err).toBeInstanceOf(TlsError);
    expect(err).toMatchObject({ code: 'TLS_FAILED', retriable: false });
  });

  it('anything else is not a security failure (a refused connection stays retriable)', () => {
    const refused = Object.assign(
      new Error('14 UNAVAILABLE: No connection established. Last error: connect ECONNREFUSED'),
      {
        code: 14,
      },
    );
    expect(classify(refused)).toBeUndefined();
    expect(classify(new Error('boom'))).toBeUndefined();
    const send = mapSendError(refused, 'orders', 'message');
    expect(send).toBeInstanceOf(BrokerUnavailableError);
    expect(send.retriable).toBe(true);
  });

  it('a send denied Pub maps to AuthorizationError, not BrokerUnavailableError (no outbox fallback for it)', () => {
    const denied = clientError(
      'UnauthorizedException',
      40100,
      'User:r has no permission to access Topic:orders from 127.0.0.1, no matched policies.',
    );
    const err = mapSendError(denied, 'orders', 'message', '127.0.0.1:8081', 'r');
    expect(err).toBeInstanceOf(AuthorizationError);
    expect(err).toBeInstanceOf(RocketMqTxError);
    expect(err).not.toBeInstanceOf(BrokerUnavailableError);
  });
});
