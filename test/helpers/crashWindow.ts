import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import * as path from 'node:path';
import * as readline from 'node:readline';
import type { DataSource } from 'typeorm';
import { txRecord } from './db';
import { waitFor } from './env';

const CHILD = path.join(__dirname, 'crash-child.ts');

/** The crash windows crash-child.ts opens (see its header). */
export type CrashMode =
  | 'before-commit'
  | 'after-commit'
  | 'join-after-half'
  | 'join-in-work'
  | 'join-after-commit'
  | 'join-savepoint-rolled-back'
  | 'join-savepoint-released';

/** What the savepoint modes report besides the outer txId. */
export interface SavepointWindow {
  savepointTxId: string;
  /** Events on the outer fence row. */
  outerEventIds: string[];
  /** Events on the savepoint's fence row. */
  savepointEventIds: string[];
}

/** Starts a producer process and resolves with its txId once it stands inside the crash window. */
export async function childInWindow(
  mode: CrashMode,
  topic: string,
  group: string,
  orderId: string,
): Promise<{ txId: string; savepoint?: SavepointWindow; kill: () => Promise<void> }> {
  const child: ChildProcess = spawn(
    process.execPath,
    ['-r', 'ts-node/register/transpile-only', CHILD, mode, topic, group, orderId],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, TS_NODE_TRANSPILE_ONLY: '1' },
    },
  );
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const lines = readline.createInterface({ input: child.stdout! });
  const exited = once(child, 'exit');
  const line = await Promise.race([
    once(lines, 'line').then(([l]) => String(l)),
    exited.then(([code]) => {
      throw new Error(`crash child exited early (code ${code}): ${stderr}`);
    }),
  ]);
  const { txId, ...rest } = JSON.parse(line) as { txId: string } & Partial<SavepointWindow>;
  const savepoint =
    rest.savepointTxId !== undefined
      ? {
          savepointTxId: rest.savepointTxId,
          outerEventIds: rest.outerEventIds ?? [],
          savepointEventIds: rest.savepointEventIds ?? [],
        }
      : undefined;
  return {
    txId,
    ...(savepoint ? { savepoint } : {}),
    kill: async () => {
      child.kill('SIGKILL');
      await exited;
    },
  };
}

/**
 * Half messages of killed producers whose fence row went with a rollback: a check-back that
 * reaches the surviving instance finds no row and writes a ROLLED_BACK tombstone. The broker may
 * also send every check of a half to killed instances' channels (it keeps a dead client's channel
 * ~2 min and probes at most 3 channels per check, docs/checkback-routing.md; CI saw this once)
 * and then discard the half after its check maximum: never delivered either, but no tombstone.
 * So each txId gets the right tombstone or none within `timeoutMs`, and at least one of them
 * must have been tombstoned (the check-back did run). Waits for all at once.
 */
export async function expectCheckBackRollbacks(
  ds: DataSource,
  txIds: readonly string[],
  timeoutMs: number,
): Promise<void> {
  const decided = await Promise.all(
    txIds.map((txId) =>
      waitFor(async () => (await txRecord(ds, txId)) !== undefined, {
        timeoutMs,
        description: `check-back decided ${txId}`,
      }).then(
        () => true,
        () => false,
      ),
    ),
  );
  for (const [i, txId] of txIds.entries()) {
    if (decided[i]) {
      expect(await txRecord(ds, txId)).toMatchObject({ status: 'ROLLED_BACK', resolved_by: 'CHECK_BACK' });
    } else {
      process.stdout.write(`no check of ${txId} reached the survivor within ${timeoutMs} ms\n`);
    }
  }
  expect(decided.filter(Boolean).length).toBeGreaterThanOrEqual(1);
}
