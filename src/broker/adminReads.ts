import { createHmac } from 'node:crypto';
import * as net from 'node:net';
import { BrokerUnavailableError } from '../errors';

/**
 * Read-only admin reads over RocketMQ's remoting protocol (the TCP protocol of the NameServer
 * and the broker, what `mqadmin` speaks), for `rocketmq-tx doctor`: the broker's transactional
 * settings, a consumer group's retry maximum, its DLQ depth and the producers online for a
 * transactional topic. The gRPC proxy API exposes none of these.
 *
 * Frame: int32 length (4 + header + body), int32 (serialize type << 24 | header length), the
 * JSON header, the body. With credentials each request is signed as AclClientRPCHook signs it
 * (HmacSHA1 over the sorted extFields' values and the body, base64).
 */

/** Request codes (org.apache.rocketmq.remoting.protocol.RequestCode, 5.x). */
const CODE = {
  GET_BROKER_CONFIG: 26,
  GET_MAX_OFFSET: 30,
  GET_MIN_OFFSET: 31,
  GET_BROKER_CLUSTER_INFO: 106,
  GET_PRODUCER_CONNECTION_LIST: 204,
  GET_SUBSCRIPTIONGROUP_CONFIG: 352,
} as const;

/** Response codes that mean "there is none" rather than an error. */
const SUBSCRIPTION_GROUP_NOT_EXIST = 26;
const NO_PERMISSION = 16;

export interface AdminTarget {
  /** NameServer address(es), "host:port" or "host1:port;host2:port". */
  nameServer: string;
  credentials?: { accessKey: string; accessSecret: string };
  /** Bound of each connect and each request. */
  timeoutMs: number;
}

export interface RemotingResponse {
  code: number;
  remark: string;
  extFields: Record<string, string>;
  body: Buffer;
}

/** The remoting error of a refused request (its code and remark), or an unreachable server. */
export class RemotingError extends BrokerUnavailableError {
  constructor(
    message: string,
    readonly responseCode: number | undefined,
    cause?: unknown,
  ) {
    super(message, cause);
  }
}

/** HmacSHA1(values of the sorted extFields + body), base64: AclClientRPCHook's signature. */
export function signRequest(extFields: Record<string, string>, body: Buffer, secret: string): string {
  const keys = Object.keys(extFields).sort();
  const text = keys.map((k) => extFields[k]).join('');
  return createHmac('sha1', secret)
    .update(Buffer.concat([Buffer.from(text, 'utf8'), body]))
    .digest('base64');
}

export function encodeFrame(header: object, body: Buffer = Buffer.alloc(0)): Buffer {
  const h = Buffer.from(JSON.stringify(header), 'utf8');
  const out = Buffer.alloc(8 + h.length + body.length);
  out.writeInt32BE(4 + h.length + body.length, 0);
  out.writeInt32BE(h.length & 0xffffff, 4); // serialize type 0 (JSON) in the high byte
  h.copy(out, 8);
  body.copy(out, 8 + h.length);
  return out;
}

/** fastjson writes maps with numeric keys unquoted ({0:"addr"}): quote them so JSON.parse reads it. */
export function parseFastJson(text: string): unknown {
  return JSON.parse(text.replace(/([{,])\s*(-?\d+)\s*:/g, '$1"$2":'));
}

let nextOpaque = 1;

/** One request on a fresh connection, bounded by timeoutMs from connect to the last byte. */
export function remotingRequest(
  addr: string,
  code: number,
  extFields: Record<string, string>,
  target: Pick<AdminTarget, 'credentials' | 'timeoutMs'>,
): Promise<RemotingResponse> {
  const [host, portText] = splitAddr(addr);
  const fields: Record<string, string> = { ...extFields };
  if (target.credentials) {
    fields.AccessKey = target.credentials.accessKey;
    fields.Signature = signRequest(fields, Buffer.alloc(0), target.credentials.accessSecret);
  }
  const opaque = nextOpaque++;
  const frame = encodeFrame({
    code,
    language: 'JAVA',
    version: 475,
    opaque,
    flag: 0,
    serializeTypeCurrentRPC: 'JSON',
    extFields: fields,
  });
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(portText), host);
    let buf = Buffer.alloc(0);
    const done = (err: Error | undefined, value?: RemotingResponse) => {
      clearTimeout(timer);
      socket.destroy();
      if (err) reject(err);
      else resolve(value!);
    };
    const timer = setTimeout(
      () =>
        done(
          new RemotingError(
            `no answer from ${addr} within ${target.timeoutMs} ms (request code ${code})`,
            undefined,
          ),
        ),
      target.timeoutMs,
    );
    socket.on('connect', () => socket.write(frame));
    socket.on('error', (err) =>
      done(new RemotingError(`cannot reach ${addr}: ${(err as Error).message}`, undefined, err)),
    );
    socket.on('close', () =>
      done(new RemotingError(`${addr} closed the connection without an answer`, undefined)),
    );
    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      while (buf.length >= 4) {
        const len = buf.readInt32BE(0);
        if (len < 4 || len > 64 * 1024 * 1024) {
          done(new RemotingError(`${addr} sent a malformed frame (length ${len})`, undefined));
          return;
        }
        if (buf.length < 4 + len) return;
        const frameBuf = buf.subarray(4, 4 + len);
        buf = buf.subarray(4 + len);
        const headerLen = frameBuf.readInt32BE(0) & 0xffffff;
        let header: {
          code?: number;
          opaque?: number;
          flag?: number;
          remark?: string;
          extFields?: Record<string, string>;
        };
        try {
          header = JSON.parse(frameBuf.subarray(4, 4 + headerLen).toString('utf8')) as typeof header;
        } catch (err) {
          done(new RemotingError(`${addr} sent a header that is not JSON`, undefined, err));
          return;
        }
        if (header.opaque !== opaque || ((header.flag ?? 0) & 1) !== 1) continue;
        done(undefined, {
          code: header.code ?? -1,
          remark: header.remark ?? '',
          extFields: header.extFields ?? {},
          body: Buffer.from(frameBuf.subarray(4 + headerLen)),
        });
        return;
      }
    });
  });
}

function splitAddr(addr: string): [string, string] {
  const i = addr.lastIndexOf(':');
  return [addr.slice(0, i).replace(/^\[|\]$/g, ''), addr.slice(i + 1)];
}

function refused(addr: string, what: string, r: RemotingResponse): RemotingError {
  const kind = r.code === NO_PERMISSION ? 'no permission' : `code ${r.code}`;
  return new RemotingError(`${addr} refused ${what} (${kind}): ${r.remark}`, r.code);
}

async function ok(addr: string, what: string, r: Promise<RemotingResponse>): Promise<RemotingResponse> {
  const res = await r;
  if (res.code !== 0) throw refused(addr, what, res);
  return res;
}

/** The master broker addresses (brokerId 0) registered in the NameServer, by broker name. */
export async function readMasters(target: AdminTarget): Promise<Map<string, string>> {
  let lastError: unknown;
  for (const ns of target.nameServer
    .split(';')
    .map((s) => s.trim())
    .filter(Boolean)) {
    try {
      const r = await ok(
        ns,
        'the cluster info',
        remotingRequest(ns, CODE.GET_BROKER_CLUSTER_INFO, {}, target),
      );
      const info = parseFastJson(r.body.toString('utf8')) as {
        brokerAddrTable?: Record<string, { brokerAddrs?: Record<string, string> }>;
      };
      const out = new Map<string, string>();
      for (const [name, data] of Object.entries(info.brokerAddrTable ?? {})) {
        const master = data.brokerAddrs?.['0'];
        if (master) out.set(name, master);
      }
      return out;
    } catch (err) {
      lastError = err;
    }
  }
  throw lastError;
}

/** A broker's configuration (properties text) as a map. */
export async function readBrokerConfig(addr: string, target: AdminTarget): Promise<Map<string, string>> {
  const r = await ok(addr, 'its config', remotingRequest(addr, CODE.GET_BROKER_CONFIG, {}, target));
  const out = new Map<string, string>();
  for (const line of r.body.toString('utf8').split(/\r?\n/)) {
    const i = line.indexOf('=');
    if (i > 0) out.set(line.slice(0, i).trim(), line.slice(i + 1).trim());
  }
  return out;
}

/** A subscription group's retryMaxTimes, or null when the group does not exist on that broker. */
export async function readRetryMaxTimes(
  addr: string,
  group: string,
  target: AdminTarget,
): Promise<number | null> {
  const r = await remotingRequest(addr, CODE.GET_SUBSCRIPTIONGROUP_CONFIG, { group }, target);
  if (r.code === SUBSCRIPTION_GROUP_NOT_EXIST) return null;
  if (r.code !== 0) throw refused(addr, `group ${group}`, r);
  if (r.body.length === 0) return null;
  const config = parseFastJson(r.body.toString('utf8')) as { retryMaxTimes?: number };
  return typeof config.retryMaxTimes === 'number' ? config.retryMaxTimes : null;
}

async function offset(addr: string, code: number, topic: string, target: AdminTarget): Promise<number> {
  const r = await ok(
    addr,
    `the offsets of ${topic}`,
    remotingRequest(addr, code, { topic, queueId: '0', committed: 'true' }, target),
  );
  return Number(r.extFields.offset ?? 0);
}

/** Messages in the group's dead-letter queue on that broker (%DLQ%group has one queue). */
export async function readDlqDepth(addr: string, group: string, target: AdminTarget): Promise<number> {
  const topic = `%DLQ%${group}`;
  const max = await offset(addr, CODE.GET_MAX_OFFSET, topic, target);
  if (max === 0) return 0;
  const min = await offset(addr, CODE.GET_MIN_OFFSET, topic, target);
  return Math.max(0, max - min);
}

/** Producer connections registered on that broker under a group (gRPC producers: the topic). */
export async function readProducerConnections(
  addr: string,
  producerGroup: string,
  target: AdminTarget,
): Promise<number> {
  const r = await remotingRequest(addr, CODE.GET_PRODUCER_CONNECTION_LIST, { producerGroup }, target);
  if (r.code !== 0) return 0; // "the producer group not exist"
  const body = parseFastJson(r.body.toString('utf8')) as { connectionSet?: unknown[] };
  return body.connectionSet?.length ?? 0;
}
