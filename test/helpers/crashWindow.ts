import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import * as path from 'node:path';
import * as readline from 'node:readline';

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
