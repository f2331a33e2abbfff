import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { InvalidOptionError } from '../../errors';
import { CHILD_ENV, type ChildLine } from './protocol';
import { tsNodeHook } from './target';

/** A forked target process and what it reported on stdout. */
export interface Child {
  readonly process: ChildProcess;
  readonly exited: Promise<unknown>;
  /** Resolves with the window line when the process reached its crash window. */
  readonly reached: Promise<ChildLine & { t: 'window' }>;
  /** Transaction ids it began (producer children). */
  readonly txIds: string[];
  stderrTail(): string;
}

/** The file of a sibling entry point, .ts when this code runs from source (ts-node, jest). */
export function entryPoint(name: string): string {
  return path.join(__dirname, `${name}${path.extname(__filename)}`);
}

/**
 * Forks `entry` with its config in the environment; resolves once it printed "ready". onLine
 * sees every protocol line the process prints.
 */
export async function forkChild(
  entry: string,
  module: string,
  config: unknown,
  readyTimeoutMs: number,
  onLine?: (line: ChildLine) => void,
): Promise<Child> {
  const hooks = new Set([tsNodeHook(entry), tsNodeHook(module)].filter((h): h is string => h !== undefined));
  const proc = spawn(process.execPath, [...[...hooks].flatMap((h) => ['-r', h]), entry], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, TS_NODE_TRANSPILE_ONLY: '1', [CHILD_ENV]: JSON.stringify(config) },
  });
  let stderr = '';
  proc.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const exited = once(proc, 'exit');
  const txIds: string[] = [];
  let onReady: () => void = () => undefined;
  let onWindow: (line: ChildLine & { t: 'window' }) => void = () => undefined;
  const ready = new Promise<void>((r) => (onReady = r));
  const reached = new Promise<ChildLine & { t: 'window' }>((r) => (onWindow = r));
  readline.createInterface({ input: proc.stdout! }).on('line', (text) => {
    let line: ChildLine;
    try {
      line = JSON.parse(text) as ChildLine;
    } catch {
      return; // the target's own output
    }
    onLine?.(line);
    if (line.t === 'ready') onReady();
    else if (line.t === 'tx') txIds.push(line.txId);
    else if (line.t === 'window') onWindow(line);
  });
  const child: Child = { process: proc, exited, reached, txIds, stderrTail: () => stderr.trim() };
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      ready,
      exited.then(([code]) => {
        throw new InvalidOptionError(
          'module',
          module,
          `a module whose process starts (it exited with code ${String(code)}: ${stderr.trim().slice(-1500)})`,
        );
      }),
      new Promise((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new InvalidOptionError(
                'module',
                module,
                `a module whose process starts within ${readyTimeoutMs} ms`,
              ),
            ),
          readyTimeoutMs,
        );
      }),
    ]);
  } catch (err) {
    proc.kill('SIGKILL');
    throw err;
  } finally {
    clearTimeout(timer);
  }
  return child;
}

/** SIGKILL, then wait for the exit. */
export async function kill(child: Child): Promise<void> {
  if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill('SIGKILL');
  await child.exited;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
