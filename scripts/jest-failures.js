'use strict';
/**
 * Jest's machine-readable results (`--json --outputFile`), read back after a run so the last lines
 * of `npm test` name every failed test, not only the failed step: a CI log that is cut short
 * still says which test failed and why (first line of its message).
 */
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

let dir;
let seq = 0;

/** Jest args that write this run's results to a fresh file; returns { args, file }. */
function jsonOutput(label) {
  dir ??= fs.mkdtempSync(path.join(os.tmpdir(), 'rmqtx-jest-'));
  const file = path.join(dir, `${++seq}-${label.replace(/[^a-z0-9]+/gi, '-')}.json`);
  return { args: ['--json', `--outputFile=${file}`], file };
}

/** One line per failed test (or suite that failed to run) in a results file; [] if none or no file. */
function failuresIn(file) {
  let report;
  try {
    report = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    return [];
  }
  const root = process.cwd() + path.sep;
  const lines = [];
  for (const suite of report.testResults ?? []) {
    const name = String(suite.name ?? '').replace(root, '');
    const failed = (suite.assertionResults ?? []).filter((a) => a.status === 'failed');
    for (const a of failed) lines.push(`${name} › ${a.fullName}: ${firstLine(a.failureMessages?.[0])}`);
    if (failed.length === 0 && suite.status === 'failed') lines.push(`${name}: ${firstLine(suite.message)}`);
  }
  return lines;
}

function firstLine(text) {
  // eslint-disable-next-line no-control-regex
  const plain = String(text ?? '').replace(/\u001b\[[0-9;]*m/g, '');
  // The assertion and, for expect(), its Expected/Received lines: up to eight lines, one row.
  const lines = plain
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('●') && !l.startsWith('at '));
  return lines.slice(0, 8).join(' | ').slice(0, 500);
}

module.exports = { jsonOutput, failuresIn };
