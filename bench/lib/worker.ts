/** A column's process (Node or Java) driven over stdin/stdout: one command, one RESULT line. */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import path from 'node:path';

export interface WorkerSpec {
  name: string;
  command: string;
  args: string[];
}

/** Check-backs a column's producer answered, by answer (bench/java does not count them). */
export interface CheckBackCounts {
  commit: number;
  rollback: number;
  unknown: number;
}

/** What a worker's `run` command answers (the RESULT line; bench/java writes the same shape). */
export interface RunResult {
  committed: number;
  rolledBack: number;
  errors: number;
  firstError?: string;
  elapsedMs: number;
  cpuMs: number;
  latencies: number[];
  committedKeys: string[];
  rolledBackKeys: string[];
  /** Check-backs the column answered during the run (and since the previous one). */
  checkBacks?: CheckBackCounts;
  /** Database statements (round trips) sent during the run, by first word. */
  dbStatements?: Record<string, number>;
}

const ROOT = path.resolve(__dirname, '..', '..');

export function nodeWorkerSpec(
  name: string,
  mode: 'ours' | 'publish' | 'official' | 'baseline' | 'raw' | 'rawlean',
  topic: string,
  group: string,
  nodeFlags: string[] = [],
): WorkerSpec {
  return {
    name,
    command: process.execPath,
    args: [
      ...nodeFlags,
      '-r',
      'ts-node/register/transpile-only',
      path.join(ROOT, 'bench', 'workers', 'node-worker.ts'),
      mode,
      topic,
      group,
    ],
  };
}

export class Worker {
  private readonly child: ChildProcess;
  private readonly waiting: Array<(line: string) => void> = [];
  private stderr = '';
  private exited: string | undefined;

  constructor(readonly spec: WorkerSpec) {
    this.child = spawn(spec.command, spec.args, { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      if (line.startsWith('READY ') || line.startsWith('RESULT ')) this.waiting.shift()?.(line);
    });
    this.child.stderr!.on('data', (d: Buffer) => {
      this.stderr = (this.stderr + d.toString()).slice(-4000);
    });
    this.child.on('exit', (code, signal) => {
      this.exited = `exited with ${code ?? signal}`;
      for (const w of this.waiting.splice(0)) w(`EXIT ${this.exited}`);
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  private next(timeoutMs: number): Promise<string> {
    if (this.exited) return Promise.reject(this.failure(this.exited));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(this.failure(`no answer within ${timeoutMs} ms`)), timeoutMs);
      this.waiting.push((line) => {
        clearTimeout(timer);
        if (line.startsWith('EXIT ')) reject(this.failure(line.slice(5)));
        else resolve(line);
      });
    });
  }

  private failure(why: string): Error {
    return new Error(`${this.spec.name} worker ${why}; stderr: ${this.stderr.trim().slice(-1500)}`);
  }

  // Generous: four workers compiling with ts-node at once on a loaded 2-core machine take a while.
  ready(timeoutMs = 240_000): Promise<string> {
    return this.next(timeoutMs);
  }

  async command<T>(line: string, timeoutMs: number): Promise<T> {
    const answer = this.next(timeoutMs);
    this.child.stdin!.write(line + '\n');
    const result = await answer;
    return JSON.parse(result.slice('RESULT '.length)) as T;
  }

  async quit(timeoutMs = 20_000): Promise<void> {
    if (this.exited) return;
    const done = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.stdin!.write('quit\n');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    await done;
    clearTimeout(timer);
  }
}
