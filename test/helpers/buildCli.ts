import { spawn } from 'node:child_process';
import { resolve } from 'node:path';

const ROOT = resolve(__dirname, '..', '..');

/**
 * Compiles the package into `outDir` (one tsc run) so a test can run the CLI as users do, with
 * plain node: a ts-node child per call costs ~10x the CPU. Put `outDir` under node_modules/.cache
 * so its requires resolve.
 */
export function buildCli(outDir: string): Promise<void> {
  return new Promise((res, rej) => {
    const tsc = spawn(
      process.execPath,
      [
        require.resolve('typescript/bin/tsc'),
        '-p',
        'tsconfig.build.json',
        '--outDir',
        outDir,
        '--declaration',
        'false',
        '--sourceMap',
        'false',
      ],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    tsc.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    tsc.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    tsc.on('error', rej);
    tsc.on('close', (code) => (code === 0 ? res() : rej(new Error(`tsc exited ${code}:\n${output}`))));
  });
}
