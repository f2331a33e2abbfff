/**
 * Runs the producers-only kill scenario from the command line and prints its report as JSON:
 *   node -r ts-node/register/transpile-only test/helpers/kill-run.ts --kills 60 [--horizon 20000|off]
 *     [--broker-horizon 15000] [--instances 3] [--concurrency 2] [--seed 7] [--topic rmqtx_tx_21]
 *     [--relay-horizon 20000 (an OutboxRelay beside the survivor)] [--settle 120000]
 * The broker is the local one (ROCKETMQ_ENDPOINTS / ROCKETMQ_TX_PORT_OFFSET), or --endpoints.
 */
import { ENDPOINTS } from './env';
import { runKillScenario, type KillScenarioOptions } from './killScenario';

function parse(argv: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i]!;
    const value = argv[i + 1];
    if (!flag.startsWith('--') || value === undefined) throw new Error(`expected --flag value, got ${flag}`);
    out[flag.slice(2)] = value;
  }
  return out;
}

function int(flags: Record<string, string>, name: string, fallback: number): number {
  const raw = flags[name];
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} must be a non-negative integer (got ${raw})`);
  return n;
}

async function main(): Promise<void> {
  const flags = parse(process.argv.slice(2));
  const known = [
    'kills',
    'horizon',
    'broker-horizon',
    'instances',
    'concurrency',
    'seed',
    'topic',
    'endpoints',
    'settle',
    'relay-horizon',
  ];
  for (const k of Object.keys(flags)) if (!known.includes(k)) throw new Error(`unknown flag --${k}`);
  const horizon = flags.horizon;
  const options: KillScenarioOptions = {
    endpoints: flags.endpoints ?? ENDPOINTS,
    topic: flags.topic ?? 'rmqtx_tx_21',
    kills: int(flags, 'kills', 60),
    instances: int(flags, 'instances', 3),
    concurrency: int(flags, 'concurrency', 2),
    ...(horizon === undefined
      ? {}
      : { recoveryHorizonMs: horizon === 'off' ? 'off' : int(flags, 'horizon', 0) }),
    brokerHorizonMs: int(flags, 'broker-horizon', 15_000),
    ...(flags['relay-horizon'] !== undefined ? { relayHorizonMs: int(flags, 'relay-horizon', 0) } : {}),
    settleTimeoutMs: int(flags, 'settle', 120_000),
    seed: int(flags, 'seed', Date.now() % 1_000_000),
    log: (line) => process.stderr.write(`${line}\n`),
  };
  process.stderr.write(`[kill] seed ${options.seed}\n`);
  const report = await runKillScenario(options);
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
