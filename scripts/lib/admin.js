'use strict';
/**
 * Topic / consumer-group creation for the local broker.
 *
 * Fast path: a tiny Java helper (source below, compiled once with javac into <home>/admin) that waits
 * until the broker is registered in the NameServer, then creates and verifies every topic and FIFO
 * group in ONE JVM (~1-2 s in all). Fallback when javac is missing (a JRE only): the stock
 * `mqadmin` CLI (org.apache.rocketmq.tools.command.MQAdminStartup), one JVM per topic, run in small
 * parallel batches; its output is checked for "success" because it can exit 0 on failure.
 */
const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');
const { run, which, waitUntil } = require('./proc');
const security = require('./security');

const HELPER_CLASS = 'RmqTxAdmin';

// Kept small and dependency-free (only the RocketMQ jars). Input: spec file lines
//   topic <NAME> <NORMAL|FIFO|DELAY|TRANSACTION>
//   fifo-group <GROUP>
//   user <NAME> <SECRET>                  (ACL 2.0: create or update a Normal user)
//   acl <USER> <RESOURCE> <ACTION,...>    (ACL 2.0: allow USER those actions on RESOURCE)
// Credentials of a SUPER user in env RMQTX_ADMIN_ACCESS_KEY / RMQTX_ADMIN_SECRET_KEY sign every request.
// Output lines: READY <brokerAddrs> | OK topic|group ... | FAIL <what> <name>: <reason>; exit 0 only if all OK.
const HELPER_SOURCE = `
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.*;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.remoting.protocol.body.AclInfo;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.body.UserInfo;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

public class ${HELPER_CLASS} {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String cluster = args[1];
        long waitMs = Long.parseLong(args[2]);
        List<String> lines = args.length > 3 ? Files.readAllLines(Paths.get(args[3])) : new ArrayList<>();
        List<String> brokerAddrs = args.length > 4 ? Arrays.asList(args[4].split(",")) : new ArrayList<>();
        int expectedMasters = args.length > 5 ? Integer.parseInt(args[5]) : 1;
        String ak = System.getenv("RMQTX_ADMIN_ACCESS_KEY");
        String sk = System.getenv("RMQTX_ADMIN_SECRET_KEY");
        DefaultMQAdminExt admin = ak == null || ak.isEmpty()
            ? new DefaultMQAdminExt(5000L)
            : new DefaultMQAdminExt(new AclClientRPCHook(new SessionCredentials(ak, sk)), 5000L);
        admin.setNamesrvAddr(namesrv);
        admin.setInstanceName("rmqtx-admin-" + ProcessHandle.current().pid());
        admin.start();
        int failures = 0;
        try {
            long t0 = System.currentTimeMillis();
            Set<String> masters = waitForMasters(admin, cluster, waitMs, brokerAddrs, expectedMasters);
            System.out.println("READY " + String.join(",", masters) + " registered after " + (System.currentTimeMillis() - t0) + " ms");
            for (String line : lines) {
                String[] p = line.trim().split("\\\\s+");
                if (p.length < 2 || p[0].startsWith("#")) continue;
                try {
                    if (p[0].equals("topic")) {
                        for (String addr : masters) ensureTopic(admin, addr, p[1], p[2]);
                        System.out.println("OK topic " + p[1] + " " + p[2]);
                    } else if (p[0].equals("fifo-group")) {
                        for (String addr : masters) ensureFifoGroup(admin, addr, p[1]);
                        System.out.println("OK group " + p[1] + " consumeMessageOrderly=true");
                    } else if (p[0].equals("user")) {
                        for (String addr : masters) ensureUser(admin, addr, p[1], p[2]);
                        System.out.println("OK user " + p[1]);
                    } else if (p[0].equals("acl")) {
                        for (String addr : masters) ensureAcl(admin, addr, p[1], p[2], Arrays.asList(p[3].split(",")));
                        System.out.println("OK acl " + p[1] + " " + p[2] + " " + p[3]);
                    } else {
                        throw new IllegalArgumentException("unknown spec line: " + line);
                    }
                } catch (Exception e) {
                    failures++;
                    System.out.println("FAIL " + p[0] + " " + p[1] + ": " + e);
                }
            }
        } catch (Exception e) {
            System.out.println("FAIL cluster " + cluster + ": " + e.getMessage());
            failures++;
        } finally {
            admin.shutdown();
        }
        System.out.flush();
        System.exit(failures == 0 ? 0 : 1);
    }

    // A freshly started broker often skips its first NameServer registration (its NameServer
    // connection is not up yet) and retries only 10 s later. Re-setting brokerPermission to its
    // current value makes it register at once (AdminBrokerProcessor#updateBrokerConfig).
    static void nudgeRegistration(DefaultMQAdminExt admin, String brokerAddr) {
        try {
            Properties p = new Properties();
            p.setProperty("brokerPermission", "6");
            admin.updateBrokerConfig(brokerAddr, p);
        } catch (Exception ignored) {
            // broker not reachable yet: try again on the next round
        }
    }

    static Set<String> waitForMasters(DefaultMQAdminExt admin, String cluster, long waitMs, List<String> brokerAddrs, int expected) throws Exception {
        long deadline = System.currentTimeMillis() + waitMs;
        long nextNudge = System.currentTimeMillis() + 500;
        String last = "no broker registered yet";
        while (true) {
            try {
                ClusterInfo ci = admin.examineBrokerClusterInfo();
                Set<String> names = ci.getClusterAddrTable() == null ? null : ci.getClusterAddrTable().get(cluster);
                Set<String> masters = new TreeSet<>();
                if (names != null) {
                    for (String name : names) {
                        BrokerData bd = ci.getBrokerAddrTable().get(name);
                        String addr = bd == null ? null : bd.getBrokerAddrs().get(MixAll.MASTER_ID);
                        if (addr != null) masters.add(addr);
                    }
                }
                if (masters.size() >= expected) return masters;
                last = "cluster " + cluster + " has " + masters.size() + " of " + expected + " master brokers in the NameServer yet " + masters;
            } catch (Exception e) {
                last = e.toString();
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("broker not registered within " + waitMs + " ms (" + last + ")");
            }
            if (System.currentTimeMillis() >= nextNudge) {
                for (String brokerAddr : brokerAddrs) nudgeRegistration(admin, brokerAddr);
                nextNudge = System.currentTimeMillis() + 1000;
            }
            Thread.sleep(200);
        }
    }

    static TopicConfig examineTopic(DefaultMQAdminExt admin, String addr, String topic) {
        try {
            return admin.examineTopicConfig(addr, topic);
        } catch (Exception e) {
            return null; // TOPIC_NOT_EXIST and friends
        }
    }

    static void ensureTopic(DefaultMQAdminExt admin, String addr, String topic, String type) throws Exception {
        TopicConfig current = examineTopic(admin, addr, topic);
        if (current != null && current.getAttributes() != null && type.equals(current.getAttributes().get("message.type"))) {
            return;
        }
        TopicConfig tc = new TopicConfig(topic, 8, 8);
        Map<String, String> attributes = new HashMap<>();
        attributes.put("+message.type", type);
        tc.setAttributes(attributes);
        admin.createAndUpdateTopicConfig(addr, tc);
        TopicConfig after = examineTopic(admin, addr, topic);
        String got = after == null || after.getAttributes() == null ? null : after.getAttributes().get("message.type");
        if (!type.equals(got)) {
            throw new IllegalStateException("broker " + addr + " reports message.type=" + got + " after update (wanted " + type + ")");
        }
    }

    static void ensureUser(DefaultMQAdminExt admin, String addr, String name, String secret) throws Exception {
        UserInfo current = null;
        try {
            current = admin.getUser(addr, name);
        } catch (Exception ignored) {
            // not found
        }
        if (current == null) {
            admin.createUser(addr, name, secret, "Normal");
        } else {
            admin.updateUser(addr, name, secret, "Normal", "enable");
        }
        if (admin.getUser(addr, name) == null) {
            throw new IllegalStateException("broker " + addr + " does not list user " + name + " after creating it");
        }
    }

    static void ensureAcl(DefaultMQAdminExt admin, String addr, String user, String resource, List<String> actions) throws Exception {
        String subject = "User:" + user;
        AclInfo current = null;
        try {
            current = admin.getAcl(addr, subject);
        } catch (Exception ignored) {
            // no ACL for this subject yet
        }
        List<String> resources = Collections.singletonList(resource);
        if (current == null) {
            admin.createAcl(addr, subject, resources, actions, null, "Allow");
        } else {
            admin.updateAcl(addr, subject, resources, actions, null, "Allow");
        }
    }

    static void ensureFifoGroup(DefaultMQAdminExt admin, String addr, String group) throws Exception {
        SubscriptionGroupConfig current = null;
        try {
            current = admin.examineSubscriptionGroupConfig(addr, group);
        } catch (Exception ignored) {
            // not found
        }
        if (current != null && current.isConsumeMessageOrderly()) return;
        SubscriptionGroupConfig g = new SubscriptionGroupConfig();
        g.setGroupName(group);
        g.setConsumeBroadcastEnable(false);
        g.setConsumeFromMinEnable(false);
        g.setConsumeMessageOrderly(true);
        admin.createAndUpdateSubscriptionGroupConfig(addr, g);
        SubscriptionGroupConfig after = admin.examineSubscriptionGroupConfig(addr, group);
        if (after == null || !after.isConsumeMessageOrderly()) {
            throw new IllegalStateException("broker " + addr + " did not store consumeMessageOrderly=true");
        }
    }
}
`;

/** JVM flags for short-lived tool JVMs: fast start, small heap. */
function toolJvmFlags(ctx) {
  return [
    '-Xms64m',
    '-Xmx256m',
    '-XX:TieredStopAtLevel=1',
    '-XX:+UseSerialGC',
    `-Duser.home=${ctx.home}`,
    `-Drmq.logback.configurationFile=${path.join(ctx.confDir, 'rmq.tools.logback.xml')}`,
    ...security.toolJvmProps(ctx.security),
  ];
}

/** The tool JVM's environment: signs with the inner-client (SUPER) credential on an ACL broker. */
function toolEnv(ctx) {
  if (!ctx.security.acl) return ctx.javaEnv;
  return {
    ...ctx.javaEnv,
    RMQTX_ADMIN_ACCESS_KEY: security.ACL_USERS.admin.accessKey,
    RMQTX_ADMIN_SECRET_KEY: security.ACL_USERS.admin.accessSecret,
  };
}

/** Compiles the helper into <home>/admin when javac exists; returns its class dir or null. */
async function ensureHelper(ctx) {
  const javac = ctx.javac || which('javac');
  if (!javac) return null;
  const dir = path.join(ctx.home, 'admin');
  const hash = crypto
    .createHash('sha256')
    .update(HELPER_SOURCE)
    .update(ctx.version)
    .digest('hex')
    .slice(0, 16);
  const marker = path.join(dir, '.source-hash');
  if (fs.existsSync(path.join(dir, `${HELPER_CLASS}.class`)) && readText(marker) === hash) return dir;
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const src = path.join(dir, `${HELPER_CLASS}.java`);
  fs.writeFileSync(src, HELPER_SOURCE);
  const t0 = Date.now();
  const res = await run(javac, ['-nowarn', '-cp', path.join(ctx.libDir, '*'), '-d', dir, src], { cwd: dir });
  if (res.code !== 0) {
    ctx.log(
      `  (javac could not build the admin helper, using mqadmin instead)\n${(res.stdout + res.stderr).trim()}`,
    );
    return null;
  }
  fs.writeFileSync(marker, hash);
  ctx.log(
    `  compiled the admin helper (${path.join(dir, HELPER_CLASS)}.class) in ${((Date.now() - t0) / 1000).toFixed(1)} s`,
  );
  return dir;
}

function readText(file) {
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch {
    return '';
  }
}

/**
 * Waits until the broker is registered in the NameServer, then makes sure every topic (with its
 * message.type) and FIFO group exists. Throws an Error naming what failed.
 */
async function ensureTopics(ctx, spec, { waitMs }) {
  const helperDir = process.env.ROCKETMQ_TX_ADMIN === 'cli' ? null : await ensureHelper(ctx);
  if (helperDir) return ensureWithHelper(ctx, helperDir, spec, waitMs);
  if (ctx.security.acl || ctx.security.tls) {
    throw new Error(
      'ROCKETMQ_TX_ACL / ROCKETMQ_TX_TLS need the compiled admin helper (a JDK with javac, and ROCKETMQ_TX_ADMIN unset): ' +
        'the mqadmin fallback does not sign its requests or speak TLS here.',
    );
  }
  return ensureWithCli(ctx, spec, waitMs);
}

async function ensureWithHelper(ctx, helperDir, spec, waitMs) {
  const specFile = path.join(ctx.confDir, 'topics.spec');
  const lines = [
    ...spec.topics.map((t) => `topic ${t.name} ${t.type}`),
    ...spec.fifoGroups.map((g) => `fifo-group ${g}`),
    ...security.aclSpecLines(ctx.security),
  ];
  fs.writeFileSync(specFile, lines.join('\n') + '\n');
  const args = [
    ...toolJvmFlags(ctx),
    '-cp',
    [helperDir, path.join(ctx.libDir, '*')].join(path.delimiter),
    HELPER_CLASS,
    ctx.namesrvAddr,
    ctx.cluster,
    String(waitMs),
    specFile,
    ctx.brokers.map((b) => `127.0.0.1:${b.port}`).join(','),
    String(ctx.brokers.length),
  ];
  const res = await run(ctx.java, args, { cwd: ctx.home, env: toolEnv(ctx) });
  const out = res.stdout.split('\n').filter(Boolean);
  const ok = out.filter((l) => l.startsWith('OK ')).length;
  const failed = out.filter((l) => l.startsWith('FAIL '));
  const expected = lines.length;
  if (res.code !== 0 || failed.length > 0 || ok !== expected) {
    const detail = failed.length
      ? failed.join('\n')
      : (res.stdout + res.stderr).trim().split('\n').slice(-40).join('\n');
    throw new Error(`topic/group creation failed (${ok}/${expected} ok):\n${detail}`);
  }
  const ready = out.find((l) => l.startsWith('READY '));
  return { ok, mode: 'helper', detail: ready ? ready.replace(/^READY \S+ /, 'broker ') : '' };
}

function mqadmin(ctx, args) {
  return run(
    ctx.java,
    [
      ...toolJvmFlags(ctx),
      '-cp',
      path.join(ctx.libDir, '*'),
      'org.apache.rocketmq.tools.command.MQAdminStartup',
      ...args,
    ],
    { cwd: ctx.home, env: ctx.javaEnv },
  );
}

async function ensureWithCli(ctx, spec, waitMs) {
  const ns = ctx.namesrvAddr;
  await waitUntil(
    async () => {
      const res = await mqadmin(ctx, ['clusterList', '-n', ns]);
      const masters = res.stdout
        .split('\n')
        .filter((l) => l.startsWith(ctx.cluster) && /\d+\.\d+\.\d+\.\d+:\d+/.test(l));
      return res.code === 0 && masters.length >= ctx.brokers.length;
    },
    {
      timeoutMs: waitMs,
      intervalMs: 500,
      description: `mqadmin clusterList to show ${ctx.brokers.length} broker(s) in ${ctx.cluster}`,
    },
  );
  const jobs = [
    ...spec.topics.map((t) => ({
      what: `topic ${t.name} (${t.type})`,
      args: ['updateTopic', '-n', ns, '-c', ctx.cluster, '-t', t.name, '-a', `+message.type=${t.type}`],
    })),
    ...spec.fifoGroups.map((g) => ({
      what: `FIFO group ${g}`,
      args: ['updateSubGroup', '-n', ns, '-c', ctx.cluster, '-g', g, '-o', 'true'],
    })),
  ];
  const failures = [];
  const parallel = Number(process.env.ROCKETMQ_TX_ADMIN_PARALLEL || 4);
  for (let i = 0; i < jobs.length; i += parallel) {
    const batch = jobs.slice(i, i + parallel);
    const results = await Promise.all(batch.map((j) => mqadmin(ctx, j.args)));
    results.forEach((res, k) => {
      if (res.code !== 0 || !/success/i.test(res.stdout)) {
        failures.push(
          `FAIL ${batch[k].what}: ${(res.stdout + res.stderr).trim().split('\n').slice(-5).join(' | ')}`,
        );
      }
    });
  }
  if (failures.length) throw new Error(`topic/group creation failed:\n${failures.join('\n')}`);
  return { ok: jobs.length, mode: 'mqadmin' };
}

module.exports = { ensureTopics, mqadmin, toolJvmFlags };
