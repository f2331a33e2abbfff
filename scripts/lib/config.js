'use strict';
/** Files written into the RocketMQ home folder: Maven pom, broker.conf, rmq-proxy.json, logback configs. */
const path = require('node:path');
const security = require('./security');

function intFromEnv(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer (got "${raw}")`);
  return n;
}

/** Transaction check-back timing (broker.conf); env overrides for tests that need other values. */
function txTiming() {
  return {
    transactionTimeOut: intFromEnv('ROCKETMQ_TX_TIMEOUT_MS', 1000),
    transactionCheckInterval: intFromEnv('ROCKETMQ_TX_CHECK_INTERVAL_MS', 2000),
    transactionCheckMax: intFromEnv('ROCKETMQ_TX_CHECK_MAX', 5),
    transactionOpBatchInterval: intFromEnv('ROCKETMQ_TX_OP_BATCH_INTERVAL_MS', 200),
  };
}

function pomXml(version) {
  return `<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by scripts/rocketmq.js: resolves the Apache RocketMQ ${version} runtime jars from Maven Central. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.rocketmq-tx</groupId>
  <artifactId>rocketmq-local-dist</artifactId>
  <version>${version}</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.rocketmq</groupId><artifactId>rocketmq-proxy</artifactId><version>${version}</version></dependency>
    <dependency><groupId>org.apache.rocketmq</groupId><artifactId>rocketmq-namesrv</artifactId><version>${version}</version></dependency>
    <dependency><groupId>org.apache.rocketmq</groupId><artifactId>rocketmq-tools</artifactId><version>${version}</version></dependency>
  </dependencies>
  <build>
    <pluginManagement>
      <plugins>
        <plugin>
          <groupId>org.apache.maven.plugins</groupId>
          <artifactId>maven-dependency-plugin</artifactId>
          <version>3.6.1</version>
        </plugin>
      </plugins>
    </pluginManagement>
  </build>
</project>
`;
}

/** broker.conf of one broker: `broker` is one of ctx.brokers ({ name, port, storeDir }). */
function brokerConf(ctx, broker = ctx.brokers[0]) {
  const tx = txTiming();
  const store = broker.storeDir;
  const lines = [
    '# Written by scripts/rocketmq.js on every start; edit the script (or env vars), not this file.',
    `brokerClusterName=${ctx.cluster}`,
    `brokerName=${broker.name}`,
    'brokerId=0',
    'brokerRole=ASYNC_MASTER',
    'flushDiskType=ASYNC_FLUSH',
    // Advertise loopback: otherwise the broker registers another interface's address.
    'brokerIP1=127.0.0.1',
    `namesrvAddr=${ctx.namesrvAddr}`,
    `listenPort=${broker.port}`,
    `storePathRootDir=${store}`,
    `storePathCommitLog=${path.join(store, 'commitlog')}`,
    // Where the broker persists runtime config changes (mqadmin updateBrokerConfig); keeps this file ours.
    `brokerConfigPath=${path.join(store, 'config', 'broker.runtime.conf')}`,
    'autoCreateTopicEnable=false',
    'autoCreateSubscriptionGroup=true',
    // Small test store: 64 MiB commit log files, 16 MiB timer log files.
    'mappedFileSizeCommitLog=67108864',
    'mappedFileSizeTimerLog=16777216',
    // The broker refuses writes near a full disk (checked ~60 s after boot); allow up to 95 %.
    'diskMaxUsedSpaceRatio=95',
    // Transactional check-back timing (ms / count): test values so check-back paths run in seconds.
    `transactionTimeOut=${tx.transactionTimeOut}`,
    `transactionCheckInterval=${tx.transactionCheckInterval}`,
    `transactionCheckMax=${tx.transactionCheckMax}`,
    // The broker writes EndTransaction's op records in batches (default every 3000 ms); a check round
    // that runs before the batch is flushed re-checks an ended transaction and a COMMIT answer
    // delivers it a second time. Keep the batch interval well under transactionTimeOut.
    `transactionOpBatchInterval=${tx.transactionOpBatchInterval}`,
    ...security.brokerAuthLines(ctx.security),
  ];
  return lines.join('\n') + '\n';
}

function namesrvConf(ctx) {
  return (
    [
      '# Written by scripts/rocketmq.js.',
      `listenPort=${ctx.ports.namesrv}`,
      `kvConfigPath=${path.join(ctx.storeDir, 'namesrv', 'kvConfig.json')}`,
      `configStorePath=${path.join(ctx.storeDir, 'namesrv', 'namesrv.properties')}`,
    ].join('\n') + '\n'
  );
}

function proxyJson(ctx) {
  return (
    JSON.stringify(
      {
        rocketMQClusterName: ctx.cluster,
        // Local: the proxy embeds the broker; Cluster: a stateless proxy in front of separate brokers.
        proxyMode: ctx.brokerProcesses ? 'Cluster' : 'Local',
        namesrvAddr: ctx.namesrvAddr,
        grpcServerPort: ctx.ports.grpc,
        remotingListenPort: ctx.ports.remoting,
        grpcShutdownTimeSeconds: 1,
        // New topics become routable within ~2 s.
        topicRouteServiceCacheRefreshSeconds: 2,
        // No periodic jstack dumps into the proxy log.
        enablePrintJstack: false,
        // Cluster mode: the proxy tells the brokers which producers of a topic can answer
        // check-backs only on this period (default 20 s); a check before that finds no channel
        // ("channel is null") and is lost. With the test broker's 5 checks 2 s apart, a new
        // producer's half messages were discarded unchecked. Test timing, like the broker's.
        ...(ctx.brokerProcesses ? { transactionHeartbeatPeriodSecond: 1 } : {}),
        ...security.proxyAuthEntries(ctx.security, ctx.tlsFiles),
      },
      null,
      2,
    ) + '\n'
  );
}

const PATTERN = '%d{yyyy-MM-dd HH:mm:ss.SSS} %p [%t] %c - %m%n';

function fileAppender(name, file) {
  const base = file.replace(/\.log$/, '');
  return `  <appender name="${name}" class="ch.qos.logback.core.rolling.RollingFileAppender">
    <file>${file}</file>
    <append>true</append>
    <rollingPolicy class="ch.qos.logback.core.rolling.FixedWindowRollingPolicy">
      <fileNamePattern>${base}.%i.log</fileNamePattern>
      <minIndex>1</minIndex>
      <maxIndex>3</maxIndex>
    </rollingPolicy>
    <triggeringPolicy class="ch.qos.logback.core.rolling.SizeBasedTriggeringPolicy">
      <maxFileSize>50MB</maxFileSize>
    </triggeringPolicy>
    <encoder><pattern>${PATTERN}</pattern></encoder>
  </appender>`;
}

const STDOUT_APPENDER = `  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>${PATTERN}</pattern></encoder>
  </appender>`;

function logger(name, appender, level = 'INFO') {
  return `  <logger name="${name}" additivity="false" level="${level}"><appender-ref ref="${appender}"/></logger>`;
}

function logbackXml(appenders, loggers, rootAppender, rootLevel = 'INFO') {
  return `<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by scripts/rocketmq.js. -->
<configuration>
${appenders.join('\n')}
${loggers.join('\n')}
  <root level="${rootLevel}"><appender-ref ref="${rootAppender}"/></root>
</configuration>
`;
}

/** The broker's logger names (the embedded broker in the proxy, or a broker process). */
const BROKER_LOGGERS = [
  'RocketmqBroker',
  'RocketmqCommon',
  'RocketmqStore',
  'RocketmqStoreError',
  'RocketmqRemoting',
  'RocketmqRebalanceLock',
  'RocketmqFilter',
  'RocketmqPop',
  'RocketmqProtection',
  'RocketmqAuthAudit',
];

/** The broker's loggers into the appenders BROKER, TX and STDOUT (embedded or a process of its own). */
function brokerLoggerLines() {
  return [
    ...BROKER_LOGGERS.map((n) => logger(n, 'BROKER')),
    logger('RocketmqWaterMark', 'BROKER', 'WARN'),
    logger('RocketmqStats', 'BROKER', 'WARN'),
    logger('RocketmqCommercial', 'BROKER', 'WARN'),
    logger('RocketmqTransaction', 'TX'),
    logger('RocketmqConsole', 'STDOUT'),
  ];
}

function namesrvLogback(ctx) {
  return logbackXml(
    [fileAppender('FILE', path.join(ctx.logsDir, 'namesrv.log')), STDOUT_APPENDER],
    [logger('RocketmqNamesrvConsole', 'STDOUT')],
    'FILE',
  );
}

function proxyLogback(ctx) {
  return logbackXml(
    [
      fileAppender('PROXY', path.join(ctx.logsDir, 'proxy.log')),
      fileAppender('BROKER', path.join(ctx.logsDir, 'broker.log')),
      fileAppender('TX', path.join(ctx.logsDir, 'transaction.log')),
      STDOUT_APPENDER,
    ],
    [
      logger('RocketmqProxy', 'PROXY'),
      logger('RocketmqProxyWatermark', 'PROXY', 'WARN'),
      ...brokerLoggerLines(),
      logger('io.opentelemetry', 'PROXY', 'WARN'),
    ],
    'PROXY',
  );
}

/** The logback file of a separate broker process (cluster mode): <name>.log and <name>-transaction.log. */
function brokerLogback(ctx, broker) {
  return logbackXml(
    [
      fileAppender('BROKER', path.join(ctx.logsDir, `${broker.name}.log`)),
      fileAppender('TX', path.join(ctx.logsDir, `${broker.name}-transaction.log`)),
      STDOUT_APPENDER,
    ],
    brokerLoggerLines(),
    'BROKER',
  );
}

function toolsLogback(ctx) {
  return logbackXml(
    [fileAppender('FILE', path.join(ctx.logsDir, 'tools.log')), STDOUT_APPENDER],
    [logger('STDOUT', 'STDOUT')],
    'FILE',
    'WARN',
  );
}

module.exports = {
  txTiming,
  pomXml,
  brokerConf,
  namesrvConf,
  proxyJson,
  namesrvLogback,
  proxyLogback,
  brokerLogback,
  toolsLogback,
};
