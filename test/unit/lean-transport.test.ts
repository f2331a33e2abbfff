import * as http2 from 'node:http2';
import { createServer, type AddressInfo } from 'node:net';
import { create, toBinary } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { Producer } from 'rocketmq-client-nodejs';
import { SendMessageRequest as OfficialSendMessageRequest } from 'rocketmq-client-nodejs/proto/apache/rocketmq/v2/service_pb';
import { EndTransactionRequest as OfficialEndTransactionRequest } from 'rocketmq-client-nodejs/proto/apache/rocketmq/v2/service_pb';
import { sign as officialSign } from 'rocketmq-client-nodejs/dist/util';
import {
  AuthenticationError,
  AuthorizationError,
  BrokerUnavailableError,
  InvalidMessageError,
  InvalidOptionError,
  TlsError,
} from '../../src';
import { mapSendError } from '../../src/broker/errors';
import type { RouteQueue } from '../../src/broker/RocketMqGateway';
import { Channel } from '../../src/broker/lean/channel';
import {
  END_TRANSACTION,
  SEND_MESSAGE,
  decodeSendMessage,
  endTransactionRequest,
  firstReceipt,
  sendMessageRequest,
} from '../../src/broker/lean/codec';
import {
  Code,
  MessageType,
  TransactionResolution,
  TransactionSource,
} from '../../src/broker/lean/gen/apache/rocketmq/v2/definition_pb';
import { SendMessageResponseSchema } from '../../src/broker/lean/gen/apache/rocketmq/v2/service_pb';
import { RequestHeaders, authorization, requestDateTime, sign } from '../../src/broker/lean/headers';
import { QueueSelector } from '../../src/broker/lean/queues';
import { connectProxyFor } from '../../src/broker/lean/LeanGateway';
import { GrpcTransportError, RocketMqStatusError, statusError } from '../../src/broker/lean/status';
import { resolveProducerOptions } from '../../src/producer/options';
import { resolveRelayOptions } from '../../src/relay/options';
import { fakeDataSource, Journal } from './fakes/fakes';

const SECRET = 'lean-secret-never-logged';

describe('lean transport: headers and signature', () => {
  afterEach(() => jest.useRealTimers());

  it('formats x-mq-date-time as yyyyMMddTHHmmssZ in UTC', () => {
    expect(requestDateTime(new Date('2023-09-13T06:30:59.399Z'))).toBe('20230913T063059Z');
    expect(requestDateTime(new Date('2024-01-02T03:04:05.000Z'))).toBe('20240102T030405Z');
  });

  it('signs like the official client: upper-case hex HMAC-SHA1 of the date-time', () => {
    expect(sign(SECRET, '20230913T063059Z')).toBe(officialSign(SECRET, '20230913T063059Z'));
    // Known vector (RFC 2202 test case 2: key "Jefe").
    expect(sign('Jefe', 'what do ya want for nothing?')).toBe('EFFCDF6AE5EB2FA2D27416D5F184DF9C259A7C79');
    expect(authorization('ak', 'SIG')).toBe(
      'MQv2-HMAC-SHA1 Credential=ak, SignedHeaders=x-mq-date-time, Signature=SIG',
    );
  });

  it('sends the same headers as the official client for the same instant, but its own request id', () => {
    jest.useFakeTimers({
      now: new Date('2025-05-06T07:08:09.500Z'),
      doNotFake: ['nextTick', 'setImmediate'],
    });
    const official = new Producer({
      endpoints: '127.0.0.1:1',
      namespace: 'ns1',
      topics: [],
      sessionCredentials: { accessKey: 'ak1', accessSecret: SECRET },
    });
    const theirs = official.getRequestMetadata().getMap();
    const ours = new RequestHeaders({
      clientId: official.clientId,
      namespace: 'ns1',
      credentials: { accessKey: 'ak1', accessSecret: SECRET },
      clientVersion: String(theirs['x-mq-client-version']),
    }).next();
    const { ['x-mq-request-id']: theirId, ...theirRest } = theirs;
    const { ['x-mq-request-id']: ourId, ...ourRest } = ours;
    expect(ourRest).toEqual(theirRest);
    expect(ourId).toMatch(/^[0-9a-f-]{36}$/);
    expect(ourId).not.toBe(theirId);
    expect(ours.authorization).toContain('Credential=ak1,');
  });

  it('re-signs when the second changes, never puts the secret in a header, omits what is not configured', () => {
    let now = Date.parse('2025-01-01T00:00:00.100Z');
    const h = new RequestHeaders(
      {
        clientId: 'c',
        namespace: '',
        credentials: { accessKey: 'ak', accessSecret: SECRET },
        clientVersion: '1',
      },
      () => now,
    );
    const a = h.next();
    const b = h.next();
    expect(a['x-mq-request-id']).not.toBe(b['x-mq-request-id']);
    expect(a.authorization).toBe(b.authorization);
    now += 1000;
    const c = h.next();
    expect(c['x-mq-date-time']).toBe('20250101T000001Z');
    expect(c.authorization).toBe(authorization('ak', sign(SECRET, '20250101T000001Z')));
    expect(c.authorization).not.toBe(a.authorization);
    for (const headers of [a, b, c]) expect(JSON.stringify(headers)).not.toContain(SECRET);
    expect(a['x-mq-namespace']).toBeUndefined();

    const plain = new RequestHeaders({ clientId: 'c', namespace: 'ns', clientVersion: '1' }).next();
    expect(plain.authorization).toBeUndefined();
    expect(plain['x-mq-namespace']).toBe('ns');
  });
});

describe('lean transport: codec', () => {
  const message = {
    topic: 'orders_tx',
    tag: 'OrderPlaced',
    keys: ['e1', 'order-7'],
    properties: { TX_ID: 't1', EVENT_TYPE: 'OrderPlaced' },
    body: Buffer.from('{"a":1}'),
  };

  it('encodes a half message that the official client decodes field by field', () => {
    const init = sendMessageRequest(message, {
      namespace: 'ns1',
      queueId: 5,
      messageId: 'MSGID',
      messageType: MessageType.TRANSACTION,
      bornHost: 'host-a',
      bornTimestamp: timestampFromMs(1_700_000_000_123),
    });
    const bytes = init;
    const decoded = OfficialSendMessageRequest.deserializeBinary(bytes);
    expect(decoded.getMessagesList()).toHaveLength(1);
    const m = decoded.getMessagesList()[0]!;
    expect(m.getTopic()?.getName()).toBe('orders_tx');
    expect(m.getTopic()?.getResourceNamespace()).toBe('ns1');
    expect(Buffer.from(m.getBody_asU8()).toString()).toBe('{"a":1}');
    expect(Object.fromEntries(m.getUserPropertiesMap().entries())).toEqual(message.properties);
    const sp = m.getSystemProperties()!;
    expect(sp.getTag()).toBe('OrderPlaced');
    expect(sp.getKeysList()).toEqual(['e1', 'order-7']);
    expect(sp.getMessageId()).toBe('MSGID');
    expect(sp.getQueueId()).toBe(5);
    expect(sp.getMessageType()).toBe(MessageType.TRANSACTION);
    expect(sp.getBornHost()).toBe('host-a');
    expect(sp.getBornTimestamp()?.toDate().getTime()).toBe(1_700_000_000_123);
    expect(sp.hasMessageGroup()).toBe(false);
  });

  it('encodes EndTransaction with the resolution and SOURCE_CLIENT', () => {
    for (const commit of [true, false]) {
      const init = endTransactionRequest('ns1', 'orders_tx', 'MID', 'TID', commit);
      const bytes = init;
      const d = OfficialEndTransactionRequest.deserializeBinary(bytes);
      expect(d.getTopic()?.getName()).toBe('orders_tx');
      expect(d.getTopic()?.getResourceNamespace()).toBe('ns1');
      expect(d.getMessageId()).toBe('MID');
      expect(d.getTransactionId()).toBe('TID');
      expect(d.getResolution()).toBe(commit ? TransactionResolution.COMMIT : TransactionResolution.ROLLBACK);
      expect(d.getSource()).toBe(TransactionSource.SOURCE_CLIENT);
    }
  });

  it('takes the receipt of an OK answer and throws the entry status over the response status', () => {
    const ok = create(SendMessageResponseSchema, {
      status: { code: Code.OK, message: 'OK' },
      entries: [{ status: { code: Code.OK }, messageId: 'M', transactionId: 'T' }],
    });
    expect(firstReceipt(ok)).toMatchObject({ messageId: 'M', transactionId: 'T' });
    const bad = create(SendMessageResponseSchema, {
      status: { code: Code.OK },
      entries: [{ status: { code: Code.TOPIC_NOT_FOUND, message: 'no route' }, messageId: 'M' }],
    });
    expect(() => firstReceipt(bad)).toThrow(RocketMqStatusError);
    const empty = create(SendMessageResponseSchema, { status: { code: Code.OK } });
    expect(() => firstReceipt(empty)).toThrow(/without a result entry/);
  });
});

describe('lean transport: status codes to typed errors', () => {
  const map = (err: unknown) => mapSendError(err, 'orders_tx', 'message', '127.0.0.1:8081', 'ak');
  const status = (code: Code, message = 'x') => statusError({ code, message } as never)!;

  it('OK and MULTIPLE_RESULTS are no error', () => {
    expect(statusError({ code: Code.OK, message: '' } as never)).toBeUndefined();
    expect(statusError({ code: Code.MULTIPLE_RESULTS, message: '' } as never)).toBeUndefined();
    expect(statusError(undefined)).toBeUndefined();
  });

  it('maps RocketMQ codes as the official path does', () => {
    expect(map(status(Code.UNAUTHORIZED, 'bad signature'))).toBeInstanceOf(AuthenticationError);
    const denied = map(
      status(
        Code.UNAUTHORIZED,
        'User:u has no permission to access Topic:orders_tx from 1.2.3.4, no matched policies.',
      ),
    );
    expect(denied).toBeInstanceOf(AuthorizationError);
    expect(map(status(Code.FORBIDDEN))).toBeInstanceOf(AuthorizationError);
    for (const c of [Code.TOPIC_NOT_FOUND, Code.NOT_FOUND, Code.MESSAGE_BODY_TOO_LARGE, Code.BAD_REQUEST]) {
      const e = map(status(c));
      expect(e).toBeInstanceOf(InvalidMessageError);
      expect(e.retriable).toBe(false);
    }
    for (const c of [Code.TOO_MANY_REQUESTS, Code.INTERNAL_SERVER_ERROR, Code.PROXY_TIMEOUT, 99999 as Code]) {
      const e = map(status(c));
      expect(e).toBeInstanceOf(BrokerUnavailableError);
      expect(e.retriable).toBe(true);
    }
    expect(status(Code.TOO_MANY_REQUESTS).transient).toBe(true);
    expect(status(Code.BAD_REQUEST).transient).toBe(false);
    expect(status(Code.MESSAGE_BODY_TOO_LARGE).name).toBe('PayloadTooLargeException');
  });

  it('maps gRPC transport failures: refused and deadline are retriable, a certificate failure is TlsError', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
    const e1 = map(
      new GrpcTransportError(14, 'connection failed: ECONNREFUSED: connect ECONNREFUSED', { cause: refused }),
    );
    expect(e1).toBeInstanceOf(BrokerUnavailableError);
    expect(e1.message).toContain('ECONNREFUSED');

    const e2 = map(new GrpcTransportError(4, 'deadline of 3000 ms exceeded'));
    expect(e2).toBeInstanceOf(BrokerUnavailableError);
    expect(e2.retriable).toBe(true);

    const e3 = map(
      new GrpcTransportError(
        14,
        'connection failed: ERR_HTTP2_STREAM_CANCEL: The pending stream has been canceled (caused by: unable to verify the first certificate)',
      ),
    );
    expect(e3).toBeInstanceOf(TlsError);
    expect(e3.retriable).toBe(false);
  });
});

describe('lean transport: queue spreading', () => {
  const q = (queueId: number, writable = true, types = [MessageType.TRANSACTION]): RouteQueue => ({
    queueId,
    facade: '127.0.0.1:8081',
    host: '127.0.0.1',
    port: 8081,
    writable,
    acceptMessageTypes: types,
  });

  it('rotates over every writable queue that accepts the type, and a retry moves to another queue', () => {
    const route = [q(0), q(1), q(2, false), q(3), q(4, true, [MessageType.NORMAL])];
    const s = new QueueSelector();
    const picked = Array.from({ length: 9 }, () => s.select('t', route, MessageType.TRANSACTION).queueId);
    expect(picked).toEqual([0, 1, 3, 0, 1, 3, 0, 1, 3]);
    expect(s.select('t', route, MessageType.NORMAL).queueId).toBe(4);
    const first = new QueueSelector().select('u', route, MessageType.TRANSACTION, 0).queueId;
    const retry = new QueueSelector().select('u', route, MessageType.TRANSACTION, 1).queueId;
    expect(retry).not.toBe(first);
  });

  it('refuses a topic with no queue for the type, as the official client does', () => {
    const e = mapSendError(
      (() => {
        try {
          new QueueSelector().select('t', [q(0, true, [MessageType.NORMAL])], MessageType.TRANSACTION);
        } catch (err) {
          return err;
        }
        throw new Error('no error');
      })(),
      't',
      'message',
    );
    expect(e).toBeInstanceOf(InvalidMessageError);
  });
});

/** A local HTTP/2 server answering gRPC unary calls as `answer` says. */
async function grpcServer(
  answer: (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, body: Buffer) => void,
) {
  const server = http2.createServer();
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (s) => {
    sessions.add(s);
    s.on('close', () => sessions.delete(s));
  });
  server.on('stream', (stream, headers) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => answer(stream, headers, Buffer.concat(chunks)));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    sessions,
    close: async () => {
      for (const s of sessions) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

async function waitUntil(cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > timeoutMs) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 10));
  }
}

function frame(bytes: Uint8Array): Buffer {
  const out = Buffer.alloc(5 + bytes.length);
  out.writeUInt32BE(bytes.length, 1);
  out.set(bytes, 5);
  return out;
}

function channelTo(port: number, extra: Partial<ConstructorParameters<typeof Channel>[0]> = {}) {
  return new Channel({
    host: '127.0.0.1',
    port,
    sslEnabled: false,
    keepaliveMs: 30_000,
    keepaliveTimeoutMs: 10_000,
    connectTimeoutMs: 2000,
    backoff: { baseMs: 100, maxMs: 1000 },
    ...extra,
  });
}

describe('lean transport: the HTTP/2 gRPC channel', () => {
  const okResponse = toBinary(
    SendMessageResponseSchema,
    create(SendMessageResponseSchema, {
      status: { code: Code.OK },
      entries: [{ status: { code: Code.OK }, messageId: 'M1', transactionId: 'T1' }],
    }),
  );

  it('sends a framed request with the gRPC headers and reads the framed answer and the trailer status', async () => {
    let seen: { headers: http2.IncomingHttpHeaders; body: Buffer } | undefined;
    const server = await grpcServer((stream, headers, body) => {
      seen = { headers, body };
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.end(frame(okResponse));
    });
    const channel = channelTo(server.port);
    try {
      const request = new Uint8Array([1, 2, 3]);
      const answer = await channel.unary(SEND_MESSAGE, request, { 'x-mq-client-id': 'c1' }, 3000);
      expect(firstReceipt(decodeSendMessage(answer))).toMatchObject({ messageId: 'M1', transactionId: 'T1' });
      expect(seen!.headers).toMatchObject({
        ':method': 'POST',
        ':path': '/apache.rocketmq.v2.MessagingService/SendMessage',
        'content-type': 'application/grpc',
        te: 'trailers',
        'grpc-timeout': '3000m',
        'x-mq-client-id': 'c1',
      });
      expect([...seen!.body]).toEqual([0, 0, 0, 0, 3, 1, 2, 3]);
      expect(END_TRANSACTION).toBe('/apache.rocketmq.v2.MessagingService/EndTransaction');
    } finally {
      channel.close();
      await server.close();
    }
  });

  it('turns a trailers-only error status into GrpcTransportError with its code and message', async () => {
    const server = await grpcServer((stream) => {
      stream.respond(
        {
          ':status': 200,
          'content-type': 'application/grpc',
          'grpc-status': '16',
          'grpc-message': 'bad%20key',
        },
        { endStream: true },
      );
    });
    const channel = channelTo(server.port);
    try {
      const err = await channel.unary(SEND_MESSAGE, new Uint8Array(), {}, 3000).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(GrpcTransportError);
      expect(err).toMatchObject({ code: 16, details: 'bad key' });
      expect(channel.backoffUntil()).toBe(0);
    } finally {
      channel.close();
      await server.close();
    }
  });

  it('fails a call past its deadline with DEADLINE_EXCEEDED, which is no connection failure', async () => {
    const server = await grpcServer(() => undefined); // never answers
    const channel = channelTo(server.port);
    try {
      await expect(channel.unary(SEND_MESSAGE, new Uint8Array(), {}, 200)).rejects.toMatchObject({ code: 4 });
      expect(channel.backoffUntil()).toBe(0);
    } finally {
      channel.close();
      await server.close();
    }
  });

  it('opens a new connection after the server sends GOAWAY and closes the old one', async () => {
    let serverSessions = 0;
    const server = await grpcServer((stream) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.end(frame(okResponse));
    });
    const clientSessions: http2.ClientHttp2Session[] = [];
    const channel = channelTo(server.port, {
      connect: (authority, options) => {
        const s = http2.connect(authority, options);
        clientSessions.push(s);
        return s;
      },
    });
    try {
      await channel.unary(SEND_MESSAGE, new Uint8Array(), {}, 3000);
      serverSessions = server.sessions.size;
      expect(serverSessions).toBe(1);
      const [first] = [...server.sessions];
      first!.goaway();
      await waitUntil(() => clientSessions[0]!.destroyed);
      await channel.unary(SEND_MESSAGE, new Uint8Array(), {}, 3000);
      expect(clientSessions).toHaveLength(2);
      expect(clientSessions[1]!.destroyed).toBe(false);
    } finally {
      channel.close();
      await server.close();
    }
  });

  it('fails fast during the backoff after a refused connection and grows it up to the cap', async () => {
    // A port nothing listens on: connections are refused at once.
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const deadPort = (probe.address() as AddressInfo).port;
    await new Promise((r) => probe.close(r));

    let now = 1_000_000;
    const channel = channelTo(deadPort, { clock: () => now, random: () => 1 });
    try {
      await expect(channel.unary(SEND_MESSAGE, new Uint8Array(), {}, 3000)).rejects.toMatchObject({
        code: 14,
      });
      expect(channel.backoffUntil()).toBe(now + 100);
      await expect(channel.unary(SEND_MESSAGE, new Uint8Array(), {}, 3000)).rejects.toThrow(
        /reconnecting to 127\.0\.0\.1:\d+ in 100 ms/,
      );
      now += 100;
      await expect(channel.unary(SEND_MESSAGE, new Uint8Array(), {}, 3000)).rejects.toThrow(/ECONNREFUSED/);
      expect(channel.backoffUntil()).toBe(now + 200);
      for (let i = 0; i < 5; i++) {
        now = channel.backoffUntil();
        await expect(channel.unary(SEND_MESSAGE, new Uint8Array(), {}, 3000)).rejects.toMatchObject({
          code: 14,
        });
      }
      expect(channel.backoffUntil() - now).toBe(1000);
    } finally {
      channel.close();
    }
  });
});

describe('producer option transport', () => {
  const base = () => ({
    endpoints: '127.0.0.1:8081',
    dataSource: fakeDataSource(new Journal()),
    producerGroup: 'orders',
    topics: ['orders_tx'],
  });

  it("defaults to 'lean', accepts 'official', rejects anything else naming the option", () => {
    expect(resolveProducerOptions(base()).transport).toBe('lean');
    expect(resolveProducerOptions({ ...base(), transport: 'lean' }).transport).toBe('lean');
    expect(resolveProducerOptions({ ...base(), transport: 'official' }).transport).toBe('official');
    for (const bad of ['fast', '', 1, true, null]) {
      try {
        resolveProducerOptions({ ...base(), transport: bad });
        throw new Error(`accepted ${String(bad)}`);
      } catch (err) {
        expect(err).toBeInstanceOf(InvalidOptionError);
        expect((err as InvalidOptionError).option).toBe('transport');
        expect((err as InvalidOptionError).expected).toBe('"official" or "lean"');
      }
    }
  });
});

describe('relay option transport', () => {
  const base = () => ({
    endpoints: '127.0.0.1:8081',
    dataSource: fakeDataSource(new Journal()),
    topics: ['orders_events'],
  });

  it("defaults to 'lean', accepts 'official', rejects anything else naming the option", () => {
    expect(resolveRelayOptions(base()).transport).toBe('lean');
    expect(resolveRelayOptions({ ...base(), transport: 'official' }).transport).toBe('official');
    for (const bad of ['LEAN', 0, {}, null]) {
      expect(() => resolveRelayOptions({ ...base(), transport: bad })).toThrow(
        expect.objectContaining({
          code: 'INVALID_OPTION',
          option: 'transport',
          expected: '"official" or "lean"',
        }),
      );
    }
  });
});

describe('lean transport: HTTP CONNECT proxies', () => {
  it('names the grpc-js proxy variable that applies, unless no_grpc_proxy / no_proxy lists the host', () => {
    expect(connectProxyFor('127.0.0.1:8081', {})).toBeUndefined();
    expect(connectProxyFor('127.0.0.1:8081', { grpc_proxy: 'http://p:3128' })).toBe('grpc_proxy');
    expect(connectProxyFor('mq.example.com:8081', { https_proxy: 'http://p:3128' })).toBe('https_proxy');
    expect(
      connectProxyFor('mq.example.com:8081', { http_proxy: 'http://p:3128', no_proxy: 'example.com' }),
    ).toBeUndefined();
    expect(
      connectProxyFor('127.0.0.1:8081', { grpc_proxy: 'http://p:3128', no_grpc_proxy: '127.0.0.1' }),
    ).toBeUndefined();
  });
});
