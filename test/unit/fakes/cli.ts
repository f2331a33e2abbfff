import { main } from '../../../src/cli/main';
import type { CommandContext } from '../../../src/cli/args';

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the CLI in this process with captured output and the given environment. */
export async function runCli(argv: string[], env: Record<string, string> = {}): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const ctx: CommandContext = {
    io: {
      stdout: { write: (s: string) => (stdout += s) },
      stderr: { write: (s: string) => (stderr += s) },
      env,
    },
    onSignal: () => () => undefined,
  };
  const code = await main(argv, ctx);
  return { code, stdout, stderr };
}
