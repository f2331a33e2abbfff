/**
 * Nothing of the SDK keeps a process alive once the user's script is done with it: a producer,
 * relay or consumer that was constructed and never started, shut down without a start, or whose
 * start failed (no database, no broker). rocketmq-client-nodejs starts an interval timer in its
 * clients' constructors, so the gateways build their client in start() only; before, each of
 * these processes ran until killed.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import * as path from 'node:path';

const CHILD = path.join(__dirname, '../helpers/exit-child.ts');

async function runChild(component: string, mode: string): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', CHILD, component, mode], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  // A process that does not exit on its own within 30 s is the failure (it would run forever).
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearTimeout(timer);
  return { code, out };
}

describe('a process exits on its own once the script is done with the SDK', () => {
  it.each([
    ['producer', 'never'],
    ['producer', 'shutdown'],
    ['producer', 'start-no-db'],
    ['producer', 'start-no-broker'],
    ['relay', 'never'],
    ['relay', 'shutdown'],
    ['relay', 'start-no-db'],
    ['relay', 'start-no-broker'],
    ['consumer', 'never'],
    ['consumer', 'shutdown'],
    ['consumer', 'start-no-db'],
    ['consumer', 'start-no-broker'],
  ])(
    '%s, %s',
    async (component, mode) => {
      const { code, out } = await runChild(component, mode);
      expect({ code, done: out.includes('script done') }).toEqual({ code: 0, done: true });
      if (mode === 'start-no-db') expect(out).toContain('start failed: STORE_ERROR');
      if (mode === 'start-no-broker') expect(out).toMatch(/start failed: BROKER_UNAVAILABLE/);
    },
    60_000,
  );
});
