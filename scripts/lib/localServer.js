'use strict';
/** The command line shared by scripts/mariadb-binlog.js and scripts/postgres-logical.js. */
const proc = require('./proc');

/** Prints whether the server runs; resolves 0 when it does, 1 when not. */
async function printStatus(label, pid, port, url) {
  const up = pid && proc.isAlive(pid) && (await proc.portOpen(port));
  console.log(up ? `[${label}] running (pid ${pid}): ${url}` : `[${label}] not running`);
  return up ? 0 : 1;
}

/** `node <script> start|stop|status`: runs the action and exits with its code. */
function runCli(label, script, { start, stop, status }) {
  const cmd = process.argv[2];
  const actions = { start: () => start().then(() => 0), stop: () => stop().then(() => 0), status };
  if (!actions[cmd]) {
    console.error(`usage: node scripts/${script} start|stop|status`);
    process.exit(2);
  }
  actions[cmd]().then(
    (code) => process.exit(code),
    (err) => {
      console.error(`[${label}] ${err.message}`);
      process.exit(1);
    },
  );
}

module.exports = { printStatus, runCli };
