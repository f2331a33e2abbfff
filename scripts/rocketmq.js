#!/usr/bin/env node
'use strict';
/**
 * Local Apache RocketMQ 5 for tests and samples, without Docker:
 * NameServer + Proxy in Local mode (the proxy embeds the broker), assembled from Maven Central jars.
 * With ROCKETMQ_TX_CLUSTER=2 (2 to 4): a cluster instead, NameServer + that many brokers (broker-a,
 * broker-b, ...; each a master with its own ports and store) + a proxy in Cluster mode, in
 * <repo>/.rocketmq-cluster by default.
 *
 *   node scripts/rocketmq.js start | stop | status
 *
 * Also a module: `const { start, stop, status } = require('./scripts/rocketmq')` (tests use it to stop
 * and restart the broker). See docs/local-broker.md.
 */
const fs = require('node:fs');
const path = require('node:path');
const childProcess = require('node:child_process');
const proc = require('./lib/proc');
const config = require('./lib/config');
const admin = require('./lib/admin');
const security = require('./lib/security');

const VERSION = '5.3.3';
const REPO_ROOT = path.resolve(__dirname, '..');
const TOPICS_FILE = path.join(__dirname, 'topics.json');

const BASE_PORTS = {
  namesrv: 9876,
  grpc: 8081,
  remoting: 8080,
  broker: 10911,
  brokerFast: 10909,
  brokerHa: 10912,
};
/** Cluster mode: broker i (0-based) listens on 10911 + 10 i, its fast port 2 below, its HA port 1 above. */
const BROKER_PORT_STEP = 10;
const MAX_CLUSTER_BROKERS = 4;

/**
 * ROCKETMQ_TX_CLUSTER: unset, empty, 0 or 1 = the single proxy in Local mode; 2 to 4 = that many
 * brokers behind a proxy in Cluster mode.
 */
function clusterBrokers() {
  const raw = process.env.ROCKETMQ_TX_CLUSTER;
  if (raw === undefined || raw === '' || raw === '0' || raw === '1') return 0;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 2 || n > MAX_CLUSTER_BROKERS) {
    throw new RocketMqError(
      `ROCKETMQ_TX_CLUSTER must be 0 or 1 (one proxy in Local mode) or a broker count from 2 to ${MAX_CLUSTER_BROKERS} (got ${JSON.stringify(raw)})`,
    );
  }
  return n;
}

/**
 * ROCKETMQ_TX_PORT_OFFSET (default 0) shifts every port, so a second local broker (another
 * checkout, the ACL/TLS test broker) can run beside the default one; give it its own
 * ROCKETMQ_TX_HOME too. Offsets must keep the ports apart: use multiples of 100.
 */
function portOffset() {
  const raw = process.env.ROCKETMQ_TX_PORT_OFFSET;
  if (raw === undefined || raw === '') return 0;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0 || n % 100 !== 0 || n > 50000) {
    throw new RocketMqError(
      `ROCKETMQ_TX_PORT_OFFSET must be a multiple of 100 between 0 and 50000 (got ${JSON.stringify(raw)})`,
    );
  }
  return n;
}

function ports() {
  const off = portOffset();
  return Object.fromEntries(Object.entries(BASE_PORTS).map(([k, v]) => [k, v + off]));
}

/** Everything about the run folder; computed per call so env changes (tests) are honoured. */
function context() {
  const brokerCount = clusterBrokers();
  const defaultHome = path.join(REPO_ROOT, brokerCount ? '.rocketmq-cluster' : '.rocketmq');
  const home = path.resolve(process.env.ROCKETMQ_TX_HOME || defaultHome);
  const PORTS = ports();
  const sec = security.securityFromEnv();
  if (brokerCount && sec.acl) {
    throw new RocketMqError(
      'ROCKETMQ_TX_ACL=1 is not supported with ROCKETMQ_TX_CLUSTER (the proxy in Cluster mode needs inner ' +
        'credentials for the brokers, which these scripts do not set up): use ACL with the Local-mode broker.',
    );
  }
  const storeDir = path.join(home, 'store');
  const brokers = brokerCount
    ? Array.from({ length: brokerCount }, (_, i) => {
        const name = `broker-${String.fromCharCode(97 + i)}`;
        return { name, port: PORTS.broker + BROKER_PORT_STEP * i, storeDir: path.join(storeDir, name) };
      })
    : [{ name: 'broker-a', port: PORTS.broker, storeDir }];
  const ctx = {
    brokers,
    /** True in cluster mode: the brokers are processes of their own, the proxy runs in Cluster mode. */
    brokerProcesses: brokerCount > 0,
    version: VERSION,
    home,
    libDir: path.join(home, 'lib'),
    confDir: path.join(home, 'conf'),
    storeDir,
    logsDir: path.join(home, 'logs'),
    runDir: path.join(home, 'run'),
    cluster: 'DefaultCluster',
    namesrvAddr: `127.0.0.1:${PORTS.namesrv}`,
    endpoints: `127.0.0.1:${PORTS.grpc}`,
    ports: PORTS,
    security: sec,
    tlsFiles: security.tlsFiles(home),
    securityMarker: path.join(home, 'run', 'security.json'),
    log: () => {},
  };
  ctx.javaEnv = { ...process.env, ROCKETMQ_HOME: home, RMQ_PROXY_HOME: home };
  // Our own flags must win over anything inherited.
  delete ctx.javaEnv.JAVA_TOOL_OPTIONS;
  delete ctx.javaEnv._JAVA_OPTIONS;
  ctx.components = {
    namesrv: {
      name: 'namesrv',
      title: 'NameServer',
      mainClass: 'org.apache.rocketmq.namesrv.NamesrvStartup',
      args: ['-c', path.join(ctx.confDir, 'namesrv.conf')],
      heap: ['-Xms256m', '-Xmx256m'],
      jvmProps: [],
      readyLine: 'The Name Server boot success',
      // ports that must be free before start / that answer when it runs
      ports: [PORTS.namesrv],
      readyPorts: [PORTS.namesrv],
      logback: path.join(ctx.confDir, 'rmq.namesrv.logback.xml'),
      out: path.join(ctx.logsDir, 'namesrv.out'),
      logs: [path.join(ctx.logsDir, 'namesrv.out'), path.join(ctx.logsDir, 'namesrv.log')],
      pidFile: path.join(ctx.runDir, 'namesrv.pid'),
    },
    ...Object.fromEntries(
      (ctx.brokerProcesses ? brokers : []).map((b) => [
        b.name,
        {
          name: b.name,
          title: `Broker ${b.name}`,
          mainClass: 'org.apache.rocketmq.broker.BrokerStartup',
          args: ['-c', path.join(ctx.confDir, `${b.name}.conf`), '-n', ctx.namesrvAddr],
          heap: ['-Xms512m', '-Xmx1g', '-XX:MaxDirectMemorySize=512m'],
          jvmProps: [],
          readyLine: 'boot success',
          ports: [b.port, b.port - 2, b.port + 1],
          readyPorts: [b.port],
          logback: path.join(ctx.confDir, `rmq.${b.name}.logback.xml`),
          out: path.join(ctx.logsDir, `${b.name}.out`),
          logs: [
            path.join(ctx.logsDir, `${b.name}.out`),
            path.join(ctx.logsDir, `${b.name}.log`),
            path.join(ctx.logsDir, `${b.name}-transaction.log`),
          ],
          pidFile: path.join(ctx.runDir, `${b.name}.pid`),
        },
      ]),
    ),
    proxy: {
      name: 'proxy',
      title: ctx.brokerProcesses
        ? `Proxy (Cluster mode, ${brokers.length} brokers)`
        : 'Proxy (Local mode, embedded broker)',
      mainClass: 'org.apache.rocketmq.proxy.ProxyStartup',
      args: ctx.brokerProcesses
        ? ['-pm', 'Cluster', '-pc', path.join(ctx.confDir, 'rmq-proxy.json'), '-n', ctx.namesrvAddr]
        : [
            '-pm',
            'Local',
            '-bc',
            path.join(ctx.confDir, 'broker.conf'),
            '-pc',
            path.join(ctx.confDir, 'rmq-proxy.json'),
            '-n',
            ctx.namesrvAddr,
          ],
      heap: ctx.brokerProcesses
        ? ['-Xms512m', '-Xmx1g', '-XX:MaxDirectMemorySize=256m']
        : ['-Xms1g', '-Xmx2g', '-XX:MaxDirectMemorySize=512m'],
      jvmProps: security.proxyJvmProps(sec),
      readyLine: 'rocketmq-proxy startup successfully',
      ports: ctx.brokerProcesses
        ? [PORTS.grpc, PORTS.remoting]
        : [PORTS.grpc, PORTS.remoting, PORTS.broker, PORTS.brokerFast, PORTS.brokerHa],
      readyPorts: ctx.brokerProcesses ? [PORTS.grpc] : [PORTS.grpc, PORTS.broker],
      logback: path.join(ctx.confDir, 'rmq.proxy.logback.xml'),
      out: path.join(ctx.logsDir, 'proxy.out'),
      logs: [
        path.join(ctx.logsDir, 'proxy.out'),
        path.join(ctx.logsDir, 'proxy.log'),
        path.join(ctx.logsDir, 'broker.log'),
        path.join(ctx.logsDir, 'transaction.log'),
      ],
      pidFile: path.join(ctx.runDir, 'proxy.pid'),
    },
  };
  return ctx;
}

function makeLogger(quiet) {
  return quiet ? () => {} : (msg) => console.log(`[rocketmq] ${msg}`);
}

function seconds(ms) {
  return `${(ms / 1000).toFixed(1)} s`;
}

class RocketMqError extends Error {}

// ---------------------------------------------------------------------------------------------
// Tool checks
// ---------------------------------------------------------------------------------------------

function findJava() {
  const fromHome = process.env.JAVA_HOME && path.join(process.env.JAVA_HOME, 'bin', 'java');
  if (fromHome && fs.existsSync(fromHome)) return fromHome;
  return proc.which('java');
}

function checkJava(ctx) {
  const java = findJava();
  if (!java) {
    throw new RocketMqError(
      'java not found (needed to run RocketMQ). Install a JDK 11+ (17 recommended), e.g. ' +
        '`sudo apt-get install openjdk-17-jdk-headless`, `brew install openjdk@17` or https://adoptium.net, ' +
        'then put it on PATH or set JAVA_HOME. Or point the tests at an existing broker with ROCKETMQ_ENDPOINTS=host:8081.',
    );
  }
  const res = childProcess.spawnSync(java, ['-version'], { encoding: 'utf8' });
  const text = `${res.stderr || ''}${res.stdout || ''}`;
  const m = /version "(\d+)(?:\.(\d+))?/.exec(text);
  let major = m ? Number(m[1]) : NaN;
  if (major === 1 && m[2]) major = Number(m[2]);
  if (!(major >= 11)) {
    throw new RocketMqError(
      `${java} reports ${JSON.stringify(text.split('\n')[0])}: RocketMQ ${VERSION} here needs Java 11+ (17 recommended).`,
    );
  }
  ctx.java = java;
  ctx.javaMajor = major;
  const javac = path.join(path.dirname(java), 'javac');
  ctx.javac = fs.existsSync(javac) ? javac : proc.which('javac');
}

function checkMaven() {
  const mvn = proc.which(process.platform === 'win32' ? 'mvn.cmd' : 'mvn');
  if (!mvn) {
    throw new RocketMqError(
      `mvn not found: Maven is needed once, to download the RocketMQ ${VERSION} jars from Maven Central. ` +
        'Install Apache Maven 3.6+ (`sudo apt-get install maven`, `brew install maven`, or https://maven.apache.org/install.html).',
    );
  }
  return mvn;
}

// ---------------------------------------------------------------------------------------------
// Jars, configuration
// ---------------------------------------------------------------------------------------------

function jarsMarker(ctx) {
  return path.join(ctx.libDir, '.rocketmq-tx-version');
}

function jarsPresent(ctx) {
  try {
    return fs.readFileSync(jarsMarker(ctx), 'utf8').trim() === VERSION;
  } catch {
    return false;
  }
}

async function ensureJars(ctx, log) {
  if (jarsPresent(ctx)) return { downloaded: false, ms: 0 };
  const mvn = checkMaven();
  const t0 = Date.now();
  const mavenDir = path.join(ctx.home, 'maven');
  const tmpLib = path.join(ctx.home, 'lib.partial');
  fs.mkdirSync(mavenDir, { recursive: true });
  fs.rmSync(tmpLib, { recursive: true, force: true });
  fs.writeFileSync(path.join(mavenDir, 'pom.xml'), config.pomXml(VERSION));
  const extra = (process.env.ROCKETMQ_TX_MAVEN_ARGS || '').split(/\s+/).filter(Boolean);
  const args = [
    '-B',
    '-q',
    '-Dstyle.color=never',
    ...extra,
    'dependency:copy-dependencies',
    `-DoutputDirectory=${tmpLib}`,
    '-DincludeScope=runtime',
  ];
  log(`downloading RocketMQ ${VERSION} jars with Maven into ${ctx.libDir} (first run only) ...`);
  log(`  $ mvn ${args.join(' ')}`);
  const res = await proc.run(mvn, args, { cwd: mavenDir });
  const mavenLog = path.join(ctx.logsDir, 'maven.log');
  fs.writeFileSync(mavenLog, `${res.stdout}\n${res.stderr}`);
  const jars = fs.existsSync(tmpLib) ? fs.readdirSync(tmpLib).filter((f) => f.endsWith('.jar')) : [];
  if (res.code !== 0 || !jars.some((j) => j.startsWith(`rocketmq-proxy-${VERSION}`))) {
    throw new RocketMqError(
      `Maven could not fetch the RocketMQ ${VERSION} jars (exit ${res.code}; ${jars.length} jars). ` +
        `Check network access to Maven Central (or your ~/.m2/settings.xml mirror). Full output: ${mavenLog}\n` +
        `--- last lines of ${mavenLog} ---\n${proc.tail(mavenLog, 40)}`,
    );
  }
  fs.rmSync(ctx.libDir, { recursive: true, force: true });
  fs.renameSync(tmpLib, ctx.libDir);
  fs.writeFileSync(jarsMarker(ctx), `${VERSION}\n`);
  const ms = Date.now() - t0;
  log(`  ${jars.length} jars ready in ${seconds(ms)}`);
  return { downloaded: true, ms };
}

function writeConfigs(ctx) {
  const brokerFiles = ctx.brokerProcesses
    ? Object.fromEntries(
        ctx.brokers.flatMap((b) => [
          [`${b.name}.conf`, config.brokerConf(ctx, b)],
          [`rmq.${b.name}.logback.xml`, config.brokerLogback(ctx, b)],
        ]),
      )
    : { 'broker.conf': config.brokerConf(ctx) };
  const files = {
    ...brokerFiles,
    'namesrv.conf': config.namesrvConf(ctx),
    'rmq-proxy.json': config.proxyJson(ctx),
    'rmq.namesrv.logback.xml': config.namesrvLogback(ctx),
    'rmq.proxy.logback.xml': config.proxyLogback(ctx),
    'rmq.tools.logback.xml': config.toolsLogback(ctx),
  };
  for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(ctx.confDir, name), text);
}

function loadTopics() {
  const spec = JSON.parse(fs.readFileSync(TOPICS_FILE, 'utf8'));
  const types = new Set(['NORMAL', 'FIFO', 'DELAY', 'TRANSACTION']);
  for (const t of spec.topics) {
    if (!/^[A-Za-z0-9_%|-]{1,127}$/.test(t.name) || !types.has(t.type)) {
      throw new RocketMqError(`${TOPICS_FILE}: bad topic entry ${JSON.stringify(t)}`);
    }
  }
  return { topics: spec.topics, fifoGroups: spec.fifoGroups || [] };
}

function ensureDirs(ctx) {
  for (const d of [ctx.home, ctx.confDir, ctx.storeDir, ctx.logsDir, ctx.runDir])
    fs.mkdirSync(d, { recursive: true });
}

// ---------------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------------

/** True when the pid runs our main class out of our home folder (guards against pid reuse). */
function isOurProcess(ctx, comp, pid) {
  if (!proc.isAlive(pid)) return false;
  const cmd = proc.cmdlineOf(pid);
  if (!cmd) return true; // cannot tell (no /proc, no ps): trust the pid file
  return cmd.includes(` ${comp.mainClass}`) && cmd.includes(`-Duser.home=${ctx.home} `);
}

async function inspect(ctx, options = {}) {
  const state = {};
  for (const comp of Object.values(ctx.components)) {
    const pid = proc.readPidFile(comp.pidFile);
    const alive = pid !== null && isOurProcess(ctx, comp, pid);
    if (pid !== null && !alive) fs.rmSync(comp.pidFile, { force: true }); // stale
    // While it runs, probe only the ports clients use (a probe of the broker's HA port logs noise).
    const ports = {};
    for (const p of alive && !options.allPorts ? comp.readyPorts : comp.ports) {
      ports[p] = await proc.portOpen(p, '127.0.0.1', 500);
    }
    const ready = alive && comp.readyPorts.every((p) => ports[p]);
    state[comp.name] = { pid: alive ? pid : null, alive, ports, ready };
  }
  return state;
}

function javaArgs(ctx, comp) {
  return [
    '-server',
    ...comp.heap,
    '-XX:+UseG1GC',
    '-XX:-OmitStackTraceInFastThrow',
    // Java 9+: the store casts mapped buffers to sun.nio.ch.DirectBuffer on some optional paths
    // (mlock/warm-up, page-cache checks, transient store pool). Nothing else needs opening on 17.
    '--add-exports=java.base/sun.nio.ch=ALL-UNNAMED',
    `-Duser.home=${ctx.home}`,
    `-Drocketmq.home.dir=${ctx.home}`,
    `-Drmq.logback.configurationFile=${comp.logback}`,
    ...comp.jvmProps,
    '-cp',
    path.join(ctx.libDir, '*'),
    comp.mainClass,
    ...comp.args,
  ];
}

function spawnComponent(ctx, comp) {
  if (fs.existsSync(comp.out)) fs.renameSync(comp.out, `${comp.out}.prev`);
  const fd = fs.openSync(comp.out, 'w');
  try {
    const child = childProcess.spawn(ctx.java, javaArgs(ctx, comp), {
      cwd: ctx.home,
      env: ctx.javaEnv,
      detached: true,
      stdio: ['ignore', fd, fd],
    });
    child.unref();
    if (!child.pid) throw new RocketMqError(`could not spawn ${ctx.java} for the ${comp.title}`);
    fs.writeFileSync(comp.pidFile, `${child.pid}\n`);
    return child.pid;
  } finally {
    fs.closeSync(fd);
  }
}

/** Tails of a component's logs for an error message: its stdout/stderr (40 lines), then 15 of each log. */
function failureDetail(comp) {
  return comp.logs
    .map((f, i) => ({ f, text: proc.tail(f, i === 0 ? 40 : 15) }))
    .filter(({ f, text }) => text || f === comp.out)
    .map(({ f, text }) => `--- last lines of ${f} ---\n${text || '(empty)'}`)
    .join('\n');
}

async function waitReady(ctx, comp, pid, deadline) {
  const t0 = Date.now();
  try {
    await proc.waitUntil(
      async () => {
        if (!proc.isAlive(pid)) {
          throw new RocketMqError(`the ${comp.title} (pid ${pid}) exited during startup`);
        }
        if (!proc.fileContains(comp.out, comp.readyLine)) return false;
        for (const p of comp.readyPorts) if (!(await proc.portOpen(p, '127.0.0.1', 500))) return false;
        return true;
      },
      {
        timeoutMs: Math.max(0, deadline - Date.now()),
        intervalMs: 200,
        description: `the ${comp.title} to be ready`,
      },
    );
  } catch (err) {
    err.message = `${err.message}\n${failureDetail(comp)}`;
    throw err;
  }
  return Date.now() - t0;
}

async function killPid(pid, { graceMs = 20000, signal = 'SIGTERM' } = {}) {
  if (!proc.isAlive(pid)) return 'not running';
  try {
    process.kill(pid, signal);
  } catch {
    return 'not running';
  }
  if (signal === 'SIGKILL') {
    await proc.waitUntil(() => !proc.isAlive(pid), {
      timeoutMs: 5000,
      intervalMs: 50,
      description: `pid ${pid} to die`,
    });
    return 'killed (SIGKILL)';
  }
  try {
    await proc.waitUntil(() => !proc.isAlive(pid), {
      timeoutMs: graceMs,
      intervalMs: 100,
      description: `pid ${pid} to exit`,
    });
    return 'stopped';
  } catch {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
    await proc.waitUntil(() => !proc.isAlive(pid), {
      timeoutMs: 5000,
      intervalMs: 100,
      description: `pid ${pid} to die`,
    });
    return 'killed (SIGKILL after SIGTERM timeout)';
  }
}

// A start lock so two concurrent `start` calls (e.g. two terminals) do not race.
async function withStartLock(ctx, log, fn, timeoutMs) {
  const lock = path.join(ctx.runDir, 'start.lock');
  const deadline = Date.now() + timeoutMs;
  let announced = false;
  for (;;) {
    try {
      fs.writeFileSync(lock, `${process.pid}\n`, { flag: 'wx' });
      break;
    } catch (err) {
      if (err.code !== 'EEXIST') throw err;
      const holder = proc.readPidFile(lock);
      if (!holder || !proc.isAlive(holder)) {
        fs.rmSync(lock, { force: true });
        continue;
      }
      if (!announced) log(`another start (pid ${holder}) is in progress; waiting for it ...`);
      announced = true;
      if (Date.now() > deadline)
        throw new RocketMqError(`timed out waiting for the start lock held by pid ${holder} (${lock})`);
      await proc.sleep(250);
    }
  }
  try {
    return await fn();
  } finally {
    fs.rmSync(lock, { force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------

function parseEndpoint(endpoints) {
  const first = endpoints.split(/[;,]/)[0].trim();
  const m = /^(?:[a-z]+:\/\/)?\[?([^\]]+?)\]?(?::(\d+))?$/.exec(first);
  if (!m) throw new RocketMqError(`ROCKETMQ_ENDPOINTS=${JSON.stringify(endpoints)} is not host:port`);
  return { host: m[1], port: Number(m[2] || 8081) };
}

/**
 * Starts whatever is not running (NameServer, then Proxy + broker), waits until it is ready, and
 * (re)creates the topics in scripts/topics.json. Resolves with { endpoints, namesrvPid, proxyPid, ... }.
 * options: { quiet, timeoutMs }
 */
async function start(options = {}) {
  const log = makeLogger(options.quiet);
  const t0 = Date.now();
  const timeoutMs = options.timeoutMs ?? Number(process.env.ROCKETMQ_START_TIMEOUT_MS || 120000);

  if (process.env.ROCKETMQ_ENDPOINTS) {
    const endpoints = process.env.ROCKETMQ_ENDPOINTS;
    const { host, port } = parseEndpoint(endpoints);
    if (!(await proc.portOpen(port, host, 3000))) {
      throw new RocketMqError(
        `ROCKETMQ_ENDPOINTS=${endpoints} is set, but nothing answers on ${host}:${port}.`,
      );
    }
    log(
      `ROCKETMQ_ENDPOINTS=${endpoints} is set: using that existing broker (${host}:${port} answers); not starting a local one.`,
    );
    log('  (its topics must already exist: see scripts/topics.json)');
    return { external: true, endpoints };
  }

  const ctx = context();
  ctx.log = log;
  ensureDirs(ctx);
  checkJava(ctx);

  return withStartLock(
    ctx,
    log,
    async () => {
      const deadline = Date.now() + timeoutMs;
      const spec = loadTopics();
      let state = await inspect(ctx);

      if (state.proxy.alive) checkRunningSecurity(ctx);
      if (Object.values(state).every((c) => c.ready)) {
        const pids = Object.entries(state).map(([name, c]) => `${name} pid ${c.pid}`);
        log(`RocketMQ already running (${pids.join(', ')}, endpoints ${ctx.endpoints})`);
        const tt = Date.now();
        const r = await admin.ensureTopics(ctx, spec, { waitMs: Math.max(5000, deadline - Date.now()) });
        log(
          `topics ensured: ${r.ok} topics/groups via ${r.mode} in ${seconds(Date.now() - tt)}${r.detail ? ` (${r.detail})` : ''}`,
        );
        return result(ctx, state, { alreadyRunning: true, ms: Date.now() - t0 });
      }

      // Fail early (before any download) when a port we need is held by someone else.
      for (const comp of Object.values(ctx.components)) {
        const s = state[comp.name];
        if (s.alive) continue;
        const busy = comp.ports.filter((p) => s.ports[p]);
        if (busy.length) {
          const owners = busy.map((p) => {
            const owner = proc.portOwner(p);
            return `${p}${owner ? ` (held by ${owner})` : ''}`;
          });
          throw new RocketMqError(
            `cannot start the ${comp.title}: port ${owners.join(', ')} already in use by a process that is not ours ` +
              `(no live pid in ${comp.pidFile}). Stop it, or, if it is a RocketMQ 5 proxy, ` +
              `use it with ROCKETMQ_ENDPOINTS=${ctx.endpoints}, or move ours with ROCKETMQ_TX_PORT_OFFSET.`,
          );
        }
      }

      const started = [];
      try {
        const jars = await ensureJars(ctx, log);
        if (ctx.security.tls) {
          const tls = security.ensureTlsFiles(ctx.home);
          log(
            `TLS: ${tls.generated ? 'generated' : 'reusing'} CA ${tls.caCert} and server certificate for 127.0.0.1/localhost`,
          );
        }
        writeConfigs(ctx);
        // NameServer, then the brokers of a cluster (side by side), then the proxy.
        const bringUp = async (comp) => {
          const s = state[comp.name];
          if (s.ready) {
            log(`${comp.title} already running (pid ${s.pid})`);
            return;
          }
          if (s.alive) {
            // Ours and alive but not answering yet (e.g. still booting): wait for it.
            log(`${comp.title} pid ${s.pid} is running but not ready yet; waiting ...`);
            const ms = await waitReady(ctx, comp, s.pid, deadline);
            log(`  ${comp.name} ready after ${seconds(ms)}`);
            return;
          }
          log(`starting ${comp.title} ...`);
          const pid = spawnComponent(ctx, comp);
          started.push({ comp, pid });
          if (comp.name === 'proxy')
            fs.writeFileSync(ctx.securityMarker, JSON.stringify(ctx.security) + '\n');
          const ms = await waitReady(ctx, comp, pid, deadline);
          log(`  ${comp.name} ready (pid ${pid}) in ${seconds(ms)}; log: ${comp.out}`);
        };
        const brokers = ctx.brokerProcesses ? ctx.brokers.map((b) => ctx.components[b.name]) : [];
        await bringUp(ctx.components.namesrv);
        const results = await Promise.allSettled(brokers.map(bringUp));
        const failure = results.find((r) => r.status === 'rejected');
        if (failure) throw failure.reason;
        const ensureTopics = async () => {
          const tt = Date.now();
          let r;
          try {
            r = await admin.ensureTopics(ctx, spec, { waitMs: Math.max(5000, deadline - Date.now()) });
          } catch (err) {
            const brokerLog = path.join(ctx.logsDir, 'broker.log');
            err.message += `\n--- last lines of ${brokerLog} ---\n${proc.tail(brokerLog, 40)}`;
            throw err;
          }
          log(
            `topics ensured: ${r.ok} topics/groups via ${r.mode} in ${seconds(Date.now() - tt)}${r.detail ? ` (${r.detail})` : ''}`,
          );
        };
        // Separate broker processes (a cluster): every broker registered in the NameServer, and
        // the topics on them, before the proxy starts. A Cluster-mode proxy creates its system
        // topics on the cluster at start-up and exits when no broker is registered yet (a fresh
        // broker often misses its first registration; seen in CI). A Local-mode proxy embeds the
        // broker: topics after it.
        if (brokers.length > 0) await ensureTopics();
        await bringUp(ctx.components.proxy);
        if (brokers.length === 0) await ensureTopics();
        state = await inspect(ctx);
        const total = Date.now() - t0;
        log(
          `RocketMQ ${VERSION} ready in ${seconds(total)}${jars.downloaded ? ` (jar download ${seconds(jars.ms)})` : ''}: ` +
            `endpoints ${ctx.endpoints} (gRPC, ${describeSecurity(ctx.security)}), namesrv ${ctx.namesrvAddr}, home ${ctx.home}`,
        );
        return result(ctx, state, { alreadyRunning: false, ms: total, jarDownloadMs: jars.ms });
      } catch (err) {
        for (const { comp, pid } of started.reverse()) {
          log(`stopping the ${comp.title} (pid ${pid}) that this start launched ...`);
          await killPid(pid, { graceMs: 5000 }).catch(() => {});
          fs.rmSync(comp.pidFile, { force: true });
        }
        throw err;
      }
    },
    timeoutMs,
  );
}

function result(ctx, state, extra) {
  return {
    external: false,
    endpoints: ctx.endpoints,
    namesrvAddr: ctx.namesrvAddr,
    home: ctx.home,
    namesrvPid: state.namesrv.pid,
    proxyPid: state.proxy.pid,
    mode: ctx.brokerProcesses ? 'cluster' : 'local',
    brokers: ctx.brokers.map((b) => ({
      name: b.name,
      addr: `127.0.0.1:${b.port}`,
      pid: ctx.brokerProcesses ? state[b.name].pid : state.proxy.pid,
    })),
    acl: ctx.security.acl,
    tls: ctx.security.tls,
    ...(ctx.security.tls ? { caFile: ctx.tlsFiles.caCert } : {}),
    ...extra,
  };
}

function describeSecurity(sec) {
  const parts = [sec.tls ? 'TLS enforced' : 'plaintext'];
  if (sec.acl) parts.push('ACL 2.0 authentication + authorization');
  return parts.join(', ');
}

/** A running proxy keeps the security it was started with: refuse to pretend otherwise. */
function checkRunningSecurity(ctx) {
  let running = { acl: false, tls: false };
  try {
    running = JSON.parse(fs.readFileSync(ctx.securityMarker, 'utf8'));
  } catch {
    // no marker: started by a version of this script without ACL/TLS support
  }
  if (Boolean(running.acl) !== ctx.security.acl || Boolean(running.tls) !== ctx.security.tls) {
    throw new RocketMqError(
      `the proxy running from ${ctx.home} was started with ACL=${running.acl ? 1 : 0} TLS=${running.tls ? 1 : 0}, ` +
        `but ROCKETMQ_TX_ACL=${ctx.security.acl ? 1 : 0} ROCKETMQ_TX_TLS=${ctx.security.tls ? 1 : 0} asks otherwise: ` +
        'stop it first (npm run rocketmq:stop), or use another ROCKETMQ_TX_HOME and ROCKETMQ_TX_PORT_OFFSET.',
    );
  }
}

/**
 * Stops exactly the pids in the pid files (proxy first, then the brokers of a cluster, then the
 * NameServer): SIGTERM, wait up to ROCKETMQ_STOP_TIMEOUT_MS (default 30 s), then SIGKILL.
 * options: { quiet, components: names (default all: 'proxy', 'broker-a', ..., 'namesrv'),
 * signal: 'SIGTERM' | 'SIGKILL' }.
 * `stop({ components: ['proxy'] })` stops the proxy but keeps the NameServer (broker-restart tests);
 * in cluster mode `stop({ components: ['broker-b'], signal: 'SIGKILL' })` kills one broker, and
 * `start()` brings back whatever is not running. `signal: 'SIGKILL'` simulates a crash (no graceful
 * shutdown; the store recovers on the next start).
 */
async function stop(options = {}) {
  const log = makeLogger(options.quiet);
  const ctx = context();
  const order = Object.keys(ctx.components).reverse();
  const wanted = options.components || order;
  const unknown = wanted.filter((n) => !order.includes(n));
  if (unknown.length) {
    throw new RocketMqError(
      `stop: unknown component ${unknown.join(', ')} (this setup has ${order.join(', ')})`,
    );
  }
  const stopped = [];
  const stopOne = async (name) => {
    const comp = ctx.components[name];
    const pid = proc.readPidFile(comp.pidFile);
    if (pid === null) return;
    if (!isOurProcess(ctx, comp, pid)) {
      log(`${comp.title}: pid ${pid} in ${comp.pidFile} is not running (stale pid file removed)`);
      fs.rmSync(comp.pidFile, { force: true });
      return;
    }
    const t0 = Date.now();
    const how = await killPid(pid, {
      signal: options.signal || 'SIGTERM',
      graceMs: Number(process.env.ROCKETMQ_STOP_TIMEOUT_MS || 30000),
    });
    fs.rmSync(comp.pidFile, { force: true });
    if (name === 'proxy') fs.rmSync(ctx.securityMarker, { force: true });
    log(`${comp.title}: pid ${pid} ${how} in ${seconds(Date.now() - t0)}`);
    stopped.push({ name, pid, how });
  };
  // The proxy, then the brokers of a cluster side by side, then the NameServer.
  if (wanted.includes('proxy')) await stopOne('proxy');
  const brokers = ctx.brokerProcesses ? ctx.brokers.map((b) => b.name) : [];
  await Promise.all(brokers.filter((name) => wanted.includes(name)).map(stopOne));
  if (wanted.includes('namesrv')) await stopOne('namesrv');
  if (stopped.length === 0) log(`nothing to stop (no running RocketMQ from ${ctx.home})`);
  return { stopped };
}

/** Prints and returns the state of each process, its ports and log files. */
async function status(options = {}) {
  const log = makeLogger(options.quiet);
  if (process.env.ROCKETMQ_ENDPOINTS) {
    const { host, port } = parseEndpoint(process.env.ROCKETMQ_ENDPOINTS);
    const open = await proc.portOpen(port, host, 2000);
    log(
      `ROCKETMQ_ENDPOINTS=${process.env.ROCKETMQ_ENDPOINTS} is set (external broker): ${host}:${port} ${open ? 'answers' : 'does NOT answer'}`,
    );
  }
  const ctx = context();
  const state = await inspect(ctx);
  log(
    `home: ${ctx.home}${jarsPresent(ctx) ? ` (RocketMQ ${VERSION} jars present)` : ' (jars not downloaded yet)'}`,
  );
  for (const comp of Object.values(ctx.components)) {
    const s = state[comp.name];
    const ports = Object.entries(s.ports)
      .map(([p, open]) => `${p}:${open ? 'open' : 'closed'}`)
      .join(' ');
    const what = s.alive ? `running, pid ${s.pid}${s.ready ? '' : ' (not answering yet)'}` : 'not running';
    log(`${comp.name.padEnd(8)} ${what}; ports ${ports}`);
    log(`${''.padEnd(8)} logs: ${comp.logs.join(', ')}`);
  }
  const running = Object.values(state).every((c) => c.ready);
  log(
    running
      ? `endpoints: ${ctx.endpoints} (gRPC), namesrv ${ctx.namesrvAddr}`
      : 'RocketMQ is not (fully) running: npm run rocketmq:start',
  );
  return {
    home: ctx.home,
    endpoints: ctx.endpoints,
    mode: ctx.brokerProcesses ? 'cluster' : 'local',
    running,
    ...state,
  };
}

/**
 * The queues of a topic as its brokers report them (mqadmin topicStatus): one entry per broker and
 * queue with its min and max offset, to see which brokers and queues messages reached. Not on an
 * ACL broker (mqadmin does not sign here).
 */
async function topicStatus(topic) {
  const ctx = context();
  checkJava(ctx);
  const res = await admin.mqadmin(ctx, ['topicStatus', '-n', ctx.namesrvAddr, '-t', topic]);
  const rows = res.stdout
    .split('\n')
    .map((l) => l.trim().split(/\s+/))
    .filter((p) => p.length >= 4 && /^\d+$/.test(p[1]) && /^\d+$/.test(p[2]) && /^\d+$/.test(p[3]));
  if (res.code !== 0 || rows.length === 0) {
    const out = `${res.stdout}${res.stderr}`.trim().split('\n').slice(-5).join(' | ');
    throw new RocketMqError(`mqadmin topicStatus ${topic} failed (exit ${res.code}): ${out}`);
  }
  return rows.map((p) => ({
    broker: p[0],
    queueId: Number(p[1]),
    minOffset: Number(p[2]),
    maxOffset: Number(p[3]),
  }));
}

module.exports = {
  start,
  stop,
  status,
  topicStatus,
  context,
  ports,
  VERSION,
  RocketMqError,
  ACL_USERS: security.ACL_USERS,
  generateCa: security.generateCa,
};

if (require.main === module) {
  const cmd = process.argv[2];
  const commands = { start, stop, status };
  if (!commands[cmd]) {
    console.error('usage: node scripts/rocketmq.js start|stop|status   (see docs/local-broker.md)');
    process.exit(2);
  }
  commands[cmd]().then(
    () => {
      process.exitCode = 0;
    },
    (err) => {
      console.error(`[rocketmq] ${cmd} failed: ${err.message}`);
      if (
        !(err instanceof RocketMqError || err instanceof security.SecurityConfigError) &&
        err.code !== 'ETIMEDOUT'
      )
        console.error(err.stack);
      process.exitCode = 1;
    },
  );
}
