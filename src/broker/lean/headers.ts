import { createHmac, randomUUID } from 'node:crypto';

/**
 * The RocketMQ v2 transport headers (rocketmq-clients docs/transport.md), as the official
 * clients send them on every call: protocol, client id, date-time, request id, language,
 * version, namespace and, for an ACL 2.0 user, `authorization` =
 * `MQv2-HMAC-SHA1 Credential=<accessKey>, SignedHeaders=x-mq-date-time, Signature=<HEX>` where
 * HEX is the upper-case hex HMAC-SHA1 of the x-mq-date-time value keyed with the secret.
 * The date-time has a one-second resolution, so the signed part is computed once per second.
 */
export interface HeaderSource {
  clientId: string;
  namespace: string;
  credentials?: { accessKey: string; accessSecret: string };
  /** x-mq-client-version; the official client's version, so the proxy sees one client. */
  clientVersion: string;
}

/** 2023-09-13T06:30:59.399Z -> 20230913T063059Z (yyyyMMdd'T'HHmmss'Z', UTC). */
export function requestDateTime(now: Date): string {
  const iso = now.toISOString();
  return `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}T${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}Z`;
}

/** Upper-case hex HMAC-SHA1 of the date-time, keyed with the access secret. */
export function sign(accessSecret: string, dateTime: string): string {
  return createHmac('sha1', accessSecret).update(dateTime).digest('hex').toUpperCase();
}

export function authorization(accessKey: string, signature: string): string {
  return `MQv2-HMAC-SHA1 Credential=${accessKey}, SignedHeaders=x-mq-date-time, Signature=${signature}`;
}

export class RequestHeaders {
  private second = -1;
  private fixed: Record<string, string> = {};

  constructor(
    private readonly source: HeaderSource,
    private readonly clock: () => number = Date.now,
  ) {}

  /** A fresh header set for one call: its own request id, the current second's signature. */
  next(): Record<string, string> {
    const now = this.clock();
    const second = Math.floor(now / 1000);
    if (second !== this.second) {
      this.second = second;
      this.fixed = this.build(requestDateTime(new Date(second * 1000)));
    }
    return { ...this.fixed, 'x-mq-request-id': randomUUID() };
  }

  private build(dateTime: string): Record<string, string> {
    const s = this.source;
    const h: Record<string, string> = {
      'x-mq-protocol': 'v2',
      'x-mq-client-id': s.clientId,
      'x-mq-date-time': dateTime,
      // What the Node client sends: the proxy has no language code for Node.
      'x-mq-language': 'HTTP',
      'x-mq-client-version': s.clientVersion,
    };
    if (s.namespace) h['x-mq-namespace'] = s.namespace;
    if (s.credentials) {
      h.authorization = authorization(s.credentials.accessKey, sign(s.credentials.accessSecret, dateTime));
    }
    return h;
  }
}
