#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { InvalidOptionError, RocketMqTxError } from '../errors';
import { helpText, parseFlags, UsageError, type Command, type CommandContext } from './args';
import { CliError, describeError, errorStacks, type Io } from './output';

/** Loaded on demand, so `--help` and flag errors do not load the broker client. */
const COMMANDS: Record<string, { summary: string; load: () => Promise<Command> }> = {
  status: {
    summary: 'counts and ages per table and state, in-doubt transactions, DEAD events',
    load: () => import('./status').then((m) => m.statusCommand),
  },
  relay: {
    summary: 'run the OutboxRelay as a process (graceful stop on SIGINT/SIGTERM)',
    load: () => import('./relay').then((m) => m.relayCommand),
  },
  'dead-letter': {
    summary: 'list DEAD outbox events with their last error, or replay them',
    load: () => import('./deadLetter').then((m) => m.deadLetterCommand),
  },
  reconcile: {
    summary: 'fact reconciliation: facts that must have an event vs outbox_event (dry run by default)',
    load: () => import('./reconcile').then((m) => m.reconcileCommand),
  },
  archive: {
    summary: 'move old SENT outbox rows to outbox_event_archive, purge settled rows (bounded batches)',
    load: () => import('./archive').then((m) => m.archiveCommand),
  },
  cdc: {
    summary:
      "publish delivery 'cdc' outbox rows from the MySQL/MariaDB binlog or PostgreSQL WAL (Debezium engine, restarted on crash)",
    load: () => import('./cdc').then((m) => m.cdcCommand),
  },
  chaos: {
    summary: 'crash-window runner: SIGKILL your producer code in every window, count lost/phantom/duplicates',
    load: () => import('./chaos').then((m) => m.chaosCommand),
  },
  doctor: {
    summary: 'production checklist against the live database and broker (exit 0 pass, 1 warn, 2 fail)',
    load: () => import('./doctor').then((m) => m.doctorCommand),
  },
};

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

function version(): string {
  try {
    const pkg = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as {
      version?: string;
    };
    return pkg.version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

function topHelp(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((n) => n.length)) + 2;
  const rows = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}${c.summary}`);
  return (
    'Usage: rocketmq-tx <command> [flags]\n\n' +
    'Operate the rocketmq-tx tables and relay: status, delivery, dead letters.\n\n' +
    `Commands:\n${rows.join('\n')}\n\n` +
    'rocketmq-tx <command> --help shows the flags of a command. Database: --db-url or\n' +
    'ROCKETMQ_TX_DB_URL (password only from the environment: ROCKETMQ_TX_DB_PASSWORD); broker:\n' +
    '--endpoints or ROCKETMQ_ENDPOINTS. Exit codes: 0 ok, 1 failure (unreachable database or\n' +
    'broker, failed statement), 2 bad command line.\n'
  );
}

function usageFailure(io: Io, command: string | undefined, message: string): number {
  const prefix = command ? `rocketmq-tx ${command}` : 'rocketmq-tx';
  io.stderr.write(`${prefix}: ${message}\n`);
  io.stderr.write(`Run '${prefix} --help' for usage.\n`);
  return EXIT_USAGE;
}

/** Runs one command line; resolves with the exit code. Never throws. */
export async function main(argv: readonly string[], ctx: CommandContext): Promise<number> {
  const { io } = ctx;
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    const topic = name === 'help' ? rest[0] : undefined;
    if (topic === undefined) {
      io.stdout.write(topHelp());
      return name === undefined ? EXIT_USAGE : EXIT_OK;
    }
    return main([topic, '--help'], ctx);
  }
  if (name === '--version' || name === '-V') {
    io.stdout.write(`${version()}\n`);
    return EXIT_OK;
  }
  const entry = COMMANDS[name];
  if (!entry) {
    return usageFailure(
      io,
      undefined,
      `unknown command ${JSON.stringify(name)} (commands: ${Object.keys(COMMANDS).join(', ')})`,
    );
  }
  const command = await entry.load();
  const verbose = rest.includes('--verbose') || rest.includes('-v');
  try {
    const parsed = parseFlags(command.flags, rest, command.maxPositionals ?? 0);
    if (parsed.flags.help === true) {
      io.stdout.write(helpText(command.usage, command.description, command.flags));
      return EXIT_OK;
    }
    return await command.run(parsed, ctx);
  } catch (err) {
    if (err instanceof UsageError) return usageFailure(io, name, err.message);
    if (err instanceof InvalidOptionError) return usageFailure(io, name, describeError(err));
    const line = err instanceof CliError ? err.message : describeError(err);
    io.stderr.write(`rocketmq-tx ${name}: ${line}\n`);
    if (verbose) io.stderr.write(`${errorStacks(err)}\n`);
    else if (!(err instanceof CliError || err instanceof RocketMqTxError)) {
      io.stderr.write('(run with --verbose for the stack trace)\n');
    }
    return EXIT_FAILURE;
  }
}

function processContext(): CommandContext {
  return {
    io: { stdout: process.stdout, stderr: process.stderr, env: process.env },
    onSignal(handler) {
      const onInt = () => handler('SIGINT');
      const onTerm = () => handler('SIGTERM');
      process.on('SIGINT', onInt);
      process.on('SIGTERM', onTerm);
      return () => {
        process.off('SIGINT', onInt);
        process.off('SIGTERM', onTerm);
      };
    },
  };
}

if (require.main === module) {
  // A stray rejection inside a client library must not print a stack trace or kill a running relay.
  process.on('unhandledRejection', (reason) => {
    process.stderr.write(`rocketmq-tx: warning: unhandled rejection: ${describeError(reason)}\n`);
  });
  main(process.argv.slice(2), processContext()).then(
    (code) => {
      // Exit once stdout is flushed: a broker client left behind by a failed start must not hold the process.
      process.stdout.write('', () => process.exit(code));
    },
    () => process.exit(EXIT_FAILURE),
  );
}
