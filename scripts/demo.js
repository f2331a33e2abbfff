#!/usr/bin/env node
'use strict';
/** `npm run demo`: ensures the local broker (unless ROCKETMQ_ENDPOINTS is set), then runs samples/orders-demo.ts. */
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const rocketmq = require('./rocketmq');

async function main() {
  await rocketmq.start();
  const sample = path.join(__dirname, '..', 'samples', 'orders-demo.ts');
  const r = spawnSync(process.execPath, ['-r', 'ts-node/register/transpile-only', sample], {
    stdio: 'inherit',
    env: { ...process.env, TS_NODE_TRANSPILE_ONLY: '1' },
  });
  process.exit(r.status ?? 1);
}

main().catch((err) => {
  console.error(err && err.message ? err.message : err);
  process.exit(1);
});
