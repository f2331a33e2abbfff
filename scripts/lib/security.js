'use strict';
/**
 * ACL 2.0 and TLS for the local broker (ROCKETMQ_TX_ACL=1, ROCKETMQ_TX_TLS=1): the users it
 * creates, the certificates it generates with openssl, and the config entries both need.
 * These are TEST credentials, written in clear into <home>/conf: never reuse them elsewhere.
 */
const fs = require('node:fs');
const path = require('node:path');
const childProcess = require('node:child_process');

class SecurityConfigError extends Error {}

/** "1"/"true" or "0"/"false"/unset; anything else is refused, naming the variable. */
function flagFromEnv(name) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return false;
  const v = raw.trim().toLowerCase();
  if (v === '1' || v === 'true') return true;
  if (v === '0' || v === 'false') return false;
  throw new SecurityConfigError(`${name} must be 1, true, 0 or false (got ${JSON.stringify(raw)})`);
}

/** What the local broker enforces, from ROCKETMQ_TX_ACL / ROCKETMQ_TX_TLS (read per call). */
function securityFromEnv() {
  return { acl: flagFromEnv('ROCKETMQ_TX_ACL'), tls: flagFromEnv('ROCKETMQ_TX_TLS') };
}

/**
 * The users of an ACL broker. `admin` is the broker's inner-client credential (a SUPER user: the
 * proxy's own clients and our admin helper); `user` may publish and subscribe on the test topics
 * and groups; `reader` may only subscribe (Pub is denied); `denied` exists but has no ACL entry,
 * so authorization refuses it everything.
 */
const ACL_USERS = Object.freeze({
  admin: Object.freeze({ accessKey: 'rmqtx-admin', accessSecret: 'rmqtx-admin-secret-Xq7v2Kp9' }),
  user: Object.freeze({ accessKey: 'rmqtx-user', accessSecret: 'rmqtx-user-secret-Wm4c8Rz1' }),
  reader: Object.freeze({ accessKey: 'rmqtx-reader', accessSecret: 'rmqtx-reader-secret-Jd2s9Lq4' }),
  denied: Object.freeze({ accessKey: 'rmqtx-denied', accessSecret: 'rmqtx-denied-secret-Bn5t3Hy6' }),
});

/** ACL entries per user: ACL 2.0 resources (a trailing `*` is a prefix match) and actions. */
const GRANTS = Object.freeze({
  user: [
    { resource: 'Topic:rmqtx_*', actions: ['Pub', 'Sub'] },
    { resource: 'Topic:orders_*', actions: ['Pub', 'Sub'] },
    { resource: 'Group:*', actions: ['Sub'] },
  ],
  reader: [
    { resource: 'Topic:rmqtx_*', actions: ['Sub'] },
    { resource: 'Group:*', actions: ['Sub'] },
  ],
});

const AUTH_PROVIDERS = {
  authenticationProvider: 'org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider',
  authorizationProvider: 'org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider',
};

function innerCredentialsJson() {
  return JSON.stringify({ accessKey: ACL_USERS.admin.accessKey, secretKey: ACL_USERS.admin.accessSecret });
}

/**
 * broker.conf lines. In Local mode the embedded broker owns the users and ACLs (RocksDB under
 * <store>/config) and enforces ACL on its remoting port; the proxy reads them through it.
 */
function brokerAuthLines(sec) {
  if (!sec.acl) return [];
  return [
    '# ACL 2.0 (ROCKETMQ_TX_ACL=1): users and ACLs are stored by the broker; test credentials only.',
    'authenticationEnabled=true',
    `authenticationProvider=${AUTH_PROVIDERS.authenticationProvider}`,
    'authenticationMetadataProvider=org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider',
    'authorizationEnabled=true',
    `authorizationProvider=${AUTH_PROVIDERS.authorizationProvider}`,
    'authorizationMetadataProvider=org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider',
    // Creates the SUPER user the proxy's inner clients and our admin helper sign with.
    `innerClientAuthenticationCredentials=${innerCredentialsJson()}`,
  ];
}

/** rmq-proxy.json entries: ACL on the proxy's gRPC/remoting, TLS certificate of the gRPC port. */
function proxyAuthEntries(sec, tlsFiles) {
  const out = {};
  if (sec.acl) {
    Object.assign(out, {
      authenticationEnabled: true,
      authenticationProvider: AUTH_PROVIDERS.authenticationProvider,
      // Local mode: read users and ACLs from the embedded broker (LocalMetadataService).
      authenticationMetadataProvider: 'org.apache.rocketmq.proxy.auth.ProxyAuthenticationMetadataProvider',
      authorizationEnabled: true,
      authorizationProvider: AUTH_PROVIDERS.authorizationProvider,
      authorizationMetadataProvider: 'org.apache.rocketmq.proxy.auth.ProxyAuthorizationMetadataProvider',
      innerClientAuthenticationCredentials: innerCredentialsJson(),
    });
  }
  if (sec.tls) {
    Object.assign(out, {
      tlsTestModeEnable: false,
      tlsCertPath: tlsFiles.serverCert,
      tlsKeyPath: tlsFiles.serverKey,
    });
  }
  return out;
}

/**
 * JVM system properties. TLS: the proxy JVM enforces TLS on every server port (gRPC with our
 * certificate, remoting with a self-signed one) and, being in enforcing mode, its own clients use
 * TLS too (the NameServer accepts both: permissive). The admin helper then needs tls.enable.
 */
function proxyJvmProps(sec) {
  return sec.tls ? ['-Dtls.server.mode=enforcing'] : [];
}

function toolJvmProps(sec) {
  return sec.tls ? ['-Dtls.enable=true'] : [];
}

function tlsFiles(home) {
  const dir = path.join(home, 'tls');
  return {
    dir,
    caCert: path.join(dir, 'ca.crt'),
    caKey: path.join(dir, 'ca.key'),
    serverCert: path.join(dir, 'server.crt'),
    serverKey: path.join(dir, 'server.key'),
  };
}

function openssl(args, cwd) {
  const res = childProcess.spawnSync(process.env.ROCKETMQ_TX_OPENSSL || 'openssl', args, {
    cwd,
    encoding: 'utf8',
  });
  if (res.error) {
    throw new SecurityConfigError(
      `openssl is needed to generate the TLS certificate (ROCKETMQ_TX_TLS=1): ${res.error.message}`,
    );
  }
  if (res.status !== 0) {
    throw new SecurityConfigError(`openssl ${args[0]} failed (exit ${res.status}): ${res.stderr.trim()}`);
  }
  return res.stdout;
}

function validFor(cert, seconds) {
  if (!fs.existsSync(cert)) return false;
  const res = childProcess.spawnSync(
    process.env.ROCKETMQ_TX_OPENSSL || 'openssl',
    ['x509', '-checkend', String(seconds), '-noout', '-in', cert],
    { encoding: 'utf8' },
  );
  return res.status === 0;
}

/** A self-signed CA (ca.crt, ca.key) in dir; RSA 2048, valid `days`. */
function generateCa(dir, { days = 30, name = 'rocketmq-tx local test CA' } = {}) {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  openssl(
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'ca.key',
      '-out',
      'ca.crt',
      '-days',
      String(days),
      '-subj',
      `/CN=${name}`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ],
    dir,
  );
  return { caCert: path.join(dir, 'ca.crt'), caKey: path.join(dir, 'ca.key') };
}

/**
 * Generates (when missing or expiring within a day) a CA and a server certificate for 127.0.0.1
 * and localhost, signed by it, in <home>/tls. The key is PKCS#8 PEM, which the proxy's Netty reads.
 * Returns the file paths; clients trust `caCert`.
 */
function ensureTlsFiles(home) {
  const f = tlsFiles(home);
  if (validFor(f.caCert, 86400) && validFor(f.serverCert, 86400) && fs.existsSync(f.serverKey)) {
    return { ...f, generated: false };
  }
  fs.rmSync(f.dir, { recursive: true, force: true });
  generateCa(f.dir);
  fs.writeFileSync(
    path.join(f.dir, 'server.ext'),
    [
      'basicConstraints=CA:FALSE',
      'keyUsage=critical,digitalSignature,keyEncipherment',
      'extendedKeyUsage=serverAuth',
      'subjectAltName=IP:127.0.0.1,DNS:localhost',
    ].join('\n') + '\n',
  );
  openssl(
    [
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'server.key',
      '-out',
      'server.csr',
      '-subj',
      '/CN=localhost',
    ],
    f.dir,
  );
  openssl(
    [
      'x509',
      '-req',
      '-in',
      'server.csr',
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      'server.crt',
      '-days',
      '30',
      '-extfile',
      'server.ext',
    ],
    f.dir,
  );
  return { ...f, generated: true };
}

/** Admin-helper spec lines: users, then ACL entries (secrets stay in <home>/conf, test only). */
function aclSpecLines(sec) {
  if (!sec.acl) return [];
  const lines = [];
  for (const key of ['user', 'reader', 'denied']) {
    const u = ACL_USERS[key];
    lines.push(`user ${u.accessKey} ${u.accessSecret}`);
  }
  for (const [key, grants] of Object.entries(GRANTS)) {
    for (const g of grants)
      lines.push(`acl ${ACL_USERS[key].accessKey} ${g.resource} ${g.actions.join(',')}`);
  }
  return lines;
}

module.exports = {
  ACL_USERS,
  GRANTS,
  SecurityConfigError,
  securityFromEnv,
  brokerAuthLines,
  proxyAuthEntries,
  proxyJvmProps,
  toolJvmProps,
  tlsFiles,
  ensureTlsFiles,
  generateCa,
  aclSpecLines,
};
