/** Types for scripts/rocketmq.js, so TypeScript tests can stop and restart the local broker. */

/** 'broker-a', 'broker-b', ... exist in cluster mode (ROCKETMQ_TX_CLUSTER=2 to 4). */
export type Component = 'namesrv' | 'proxy' | `broker-${string}`;

export interface BrokerInfo {
  /** broker-a, broker-b, ... */
  name: string;
  /** Its remoting address, 127.0.0.1:<port>. */
  addr: string;
  /** Its process (in Local mode the proxy's, which embeds the broker). */
  pid: number | null;
}

export interface StartOptions {
  /** No progress lines on stdout. */
  quiet?: boolean;
  /** Overall readiness timeout (default ROCKETMQ_START_TIMEOUT_MS or 120 000). */
  timeoutMs?: number;
}

export interface StartResult {
  /** true when ROCKETMQ_ENDPOINTS points at an existing broker (nothing was started). */
  external: boolean;
  endpoints: string;
  namesrvAddr?: string;
  home?: string;
  namesrvPid?: number | null;
  proxyPid?: number | null;
  /** 'local': one proxy embedding the broker; 'cluster': brokers of their own behind a Cluster-mode proxy. */
  mode?: 'local' | 'cluster';
  brokers?: BrokerInfo[];
  alreadyRunning?: boolean;
  ms?: number;
  jarDownloadMs?: number;
  /** ROCKETMQ_TX_ACL: ACL 2.0 authentication and authorization enforced (users in ACL_USERS). */
  acl?: boolean;
  /** ROCKETMQ_TX_TLS: TLS enforced on the proxy. */
  tls?: boolean;
  /** With TLS: the generated CA clients must trust (<home>/tls/ca.crt). */
  caFile?: string;
}

export interface StopOptions {
  quiet?: boolean;
  /**
   * Default all; `['proxy']` stops only the proxy (in Local mode the broker with it; the NameServer
   * keeps running); in cluster mode `['broker-b']` stops one broker.
   */
  components?: Component[];
  /** 'SIGKILL' simulates a crash; default 'SIGTERM' (graceful, SIGKILL after ROCKETMQ_STOP_TIMEOUT_MS). */
  signal?: 'SIGTERM' | 'SIGKILL';
}

export interface StopResult {
  stopped: { name: Component; pid: number; how: string }[];
}

export interface ComponentState {
  pid: number | null;
  alive: boolean;
  ready: boolean;
  /** Probed ports: true = something accepts connections. */
  ports: Record<string, boolean>;
}

export interface StatusResult {
  home: string;
  endpoints: string;
  mode: 'local' | 'cluster';
  running: boolean;
  namesrv: ComponentState;
  proxy: ComponentState;
  /** Cluster mode: one entry per broker (broker-a, broker-b, ...). */
  [broker: `broker-${string}`]: ComponentState;
}

export interface QueueStatus {
  broker: string;
  queueId: number;
  minOffset: number;
  maxOffset: number;
}

export function start(options?: StartOptions): Promise<StartResult>;
/** The queues of a topic as its brokers report them (mqadmin topicStatus). */
export function topicStatus(topic: string): Promise<QueueStatus[]>;
export function stop(options?: StopOptions): Promise<StopResult>;
export function status(options?: { quiet?: boolean }): Promise<StatusResult>;

export const VERSION: string;
/** The local broker's ports: the defaults shifted by ROCKETMQ_TX_PORT_OFFSET. */
export function ports(): {
  namesrv: number;
  grpc: number;
  remoting: number;
  broker: number;
  brokerFast: number;
  brokerHa: number;
};
export class RocketMqError extends Error {}

export interface TestCredentials {
  readonly accessKey: string;
  readonly accessSecret: string;
}
/**
 * Users of an ACL broker (test secrets): admin (SUPER, inner clients), user (Pub/Sub on rmqtx_* and
 * orders_*, Sub on every group), reader (Sub only), denied (no ACL).
 */
export const ACL_USERS: {
  readonly admin: TestCredentials;
  readonly user: TestCredentials;
  readonly reader: TestCredentials;
  readonly denied: TestCredentials;
};
/** Generates a self-signed CA (ca.crt, ca.key) into dir with openssl. */
export function generateCa(
  dir: string,
  options?: { days?: number; name?: string },
): { caCert: string; caKey: string };
