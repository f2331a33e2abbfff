import {
  readBrokerConfig,
  readDlqDepth,
  readMasters,
  readProducerConnections,
  readRetryMaxTimes,
  type AdminTarget,
} from '../broker/adminReads';
import type { ResolvedDoctorOptions } from './options';
import { check, formatDuration, type DoctorCheck } from './report';

/** What the remoting admin reads found (docs/doctor.md, "broker admin"). */
export interface BrokerAdminFacts {
  masters: Array<{
    name: string;
    addr: string;
    txTimeoutMs: number;
    checkIntervalMs: number;
    checkMax: number;
  }>;
  groups: Array<{ group: string; retryMaxTimes: number | null; dlqDepth: number }>;
  producers: Array<{ topic: string; connections: number }>;
}

/** RocketMQ's defaults when a broker's config omits a key. */
const DEFAULTS = { transactionTimeOut: 6000, transactionCheckInterval: 30_000, transactionCheckMax: 15 };

/** The consumer groups doctor reads: those named and those of the consumers given. */
export function groupsToRead(o: ResolvedDoctorOptions): string[] {
  return [...new Set([...o.consumerGroups, ...o.consumers.map((c) => c.consumerGroup)])];
}

function withNamespace(ns: string, name: string): string {
  return ns === '' ? name : `${ns}%${name}`;
}

/**
 * Reads every master's transactional settings, then per consumer group its retryMaxTimes and
 * DLQ depth (summed over masters), per transactional topic the producers online. Each request
 * is bounded by broker.requestTimeoutMs; the first unreachable server ends the reads (thrown).
 */
export async function readBrokerAdmin(o: ResolvedDoctorOptions): Promise<BrokerAdminFacts> {
  const b = o.broker!;
  const target: AdminTarget = {
    nameServer: b.nameServer!,
    ...(b.credentials ? { credentials: b.credentials } : {}),
    timeoutMs: b.requestTimeoutMs,
  };
  const masters = await readMasters(target);
  const facts: BrokerAdminFacts = { masters: [], groups: [], producers: [] };
  for (const [name, addr] of masters) {
    const c = await readBrokerConfig(addr, target);
    const num = (k: keyof typeof DEFAULTS) => {
      const v = Number(c.get(k));
      return Number.isFinite(v) && c.has(k) ? v : DEFAULTS[k];
    };
    facts.masters.push({
      name,
      addr,
      txTimeoutMs: num('transactionTimeOut'),
      checkIntervalMs: num('transactionCheckInterval'),
      checkMax: num('transactionCheckMax'),
    });
  }
  for (const group of groupsToRead(o)) {
    const g = withNamespace(b.namespace, group);
    let retryMaxTimes: number | null = null;
    let dlqDepth = 0;
    for (const addr of masters.values()) {
      retryMaxTimes ??= await readRetryMaxTimes(addr, g, target);
      dlqDepth += await readDlqDepth(addr, g, target);
    }
    facts.groups.push({ group, retryMaxTimes, dlqDepth });
  }
  for (const topic of o.transactionTopics) {
    let connections = 0;
    for (const addr of masters.values()) {
      connections += await readProducerConnections(addr, withNamespace(b.namespace, topic), target);
    }
    facts.producers.push({ topic, connections });
  }
  return facts;
}

/** The broker's settings the other checks compare with: the first master's (the others must match). */
export function effectiveSettings(
  facts: BrokerAdminFacts,
): { brokerTxTimeoutMs: number; brokerCheckIntervalMs: number; brokerCheckMax: number } | undefined {
  const m = facts.masters[0];
  return m
    ? {
        brokerTxTimeoutMs: m.txTimeoutMs,
        brokerCheckIntervalMs: m.checkIntervalMs,
        brokerCheckMax: m.checkMax,
      }
    : undefined;
}

export function adminChecks(
  o: ResolvedDoctorOptions,
  result: { facts: BrokerAdminFacts } | { error: unknown } | undefined,
): DoctorCheck[] {
  if (!o.broker?.nameServer) {
    return [
      check('broker', 'broker.settings', 'skip', 'not read: no NameServer given', {
        advice:
          "give --namesrv (broker.nameServer) to read the broker's transactional settings, the consumer " +
          "groups' retry maximum and DLQ depth; the stated --broker-* values are used meanwhile",
      }),
    ];
  }
  if (result === undefined) return [];
  if ('error' in result) {
    const msg = result.error instanceof Error ? result.error.message : String(result.error);
    return [
      check('broker', 'broker.settings', 'fail', msg, {
        threshold: `the NameServer and each master broker answer within ${formatDuration(o.broker.requestTimeoutMs)}`,
        advice:
          '--namesrv must name the NameServer (port 9876 by default) and the broker remoting ports must be ' +
          "reachable from here; with ACL the user needs the broker's admin read permissions",
      }),
    ];
  }
  const f = result.facts;
  const out: DoctorCheck[] = [];
  if (f.masters.length === 0) {
    out.push(
      check('broker', 'broker.settings', 'fail', 'no master broker registered in the NameServer', {
        advice: 'start the broker (or point --namesrv at the NameServer it registers with)',
      }),
    );
    return out;
  }
  const text = (m: BrokerAdminFacts['masters'][number]) =>
    `${m.name}: transactionTimeOut ${m.txTimeoutMs} ms, transactionCheckInterval ${m.checkIntervalMs} ms, ` +
    `transactionCheckMax ${m.checkMax}`;
  const first = f.masters[0]!;
  const differ = f.masters.filter(
    (m) =>
      m.txTimeoutMs !== first.txTimeoutMs ||
      m.checkIntervalMs !== first.checkIntervalMs ||
      m.checkMax !== first.checkMax,
  );
  out.push(
    check('broker', 'broker.settings', differ.length > 0 ? 'warn' : 'pass', f.masters.map(text).join('; '), {
      threshold: 'read from every master; the same on all (the horizon and lock-wait checks use them)',
      advice:
        differ.length > 0
          ? `the masters differ (${differ.map((m) => m.name).join(', ')}): set the same transactional ` +
            'settings on every broker; the checks used the first one'
          : '',
    }),
  );
  for (const g of f.groups) {
    const value =
      `retryMaxTimes ${g.retryMaxTimes ?? 'unknown (group not found)'}; ` +
      `DLQ %DLQ%${g.group}: ${g.dlqDepth} message${g.dlqDepth === 1 ? '' : 's'}`;
    const threshold = `DLQ depth <= ${o.maxDlqDepth}; retryMaxTimes > 0`;
    let status: DoctorCheck['status'] = 'pass';
    let advice = '';
    if (g.dlqDepth > o.maxDlqDepth) {
      status = 'warn';
      advice =
        `messages the group gave up on after ${g.retryMaxTimes ?? '?'} retries: inspect %DLQ%${g.group} ` +
        '(mqadmin / dashboard), fix the handler, resend them (mqadmin consumeMessage or the dashboard)';
    } else if (g.retryMaxTimes === 0) {
      status = 'warn';
      advice =
        'every failed or held message goes straight to the DLQ (a version gap held by gapPolicy "hold" too): ' +
        'raise retryMaxTimes (mqadmin updateSubGroup -g <group> -r 16)';
    } else if (g.retryMaxTimes === null) {
      status = 'warn';
      advice =
        'the group does not exist on the broker: create it (mqadmin updateSubGroup) or start its consumers';
    }
    out.push(check('broker', `broker.group.${g.group}`, status, value, { threshold, advice }));
  }
  for (const p of f.producers) {
    out.push(
      check(
        'broker',
        `broker.producers.${p.topic}`,
        p.connections > 0 ? 'pass' : 'skip',
        `${p.connections} producer connection(s) registered for ${p.topic}`,
        {
          threshold: 'a running producer declares the topic (check-backs go to producers by topic)',
          advice:
            p.connections > 0
              ? ''
              : 'no producer runs now that declared this topic (fine before a deploy); a running producer must ' +
                'list it in `topics`, or the broker finds no one to ask about its half messages',
        },
      ),
    );
  }
  return out;
}
