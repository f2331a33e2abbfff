import { runCli } from './fakes/cli';

const run = runCli;

describe('rocketmq-tx command line (no services)', () => {
  it('prints the command list for --help (exit 0) and for no command (exit 2)', async () => {
    const help = await run(['--help']);
    expect(help.code).toBe(0);
    for (const c of ['status', 'relay', 'reconcile', 'archive', 'dead-letter'])
      expect(help.stdout).toContain(c);
    expect((await run([])).code).toBe(2);
  });

  it.each(['status', 'relay', 'reconcile', 'archive', 'dead-letter', 'doctor'])(
    '%s --help lists its flags',
    async (cmd) => {
      const r = await run([cmd, '--help']);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`^Usage: rocketmq-tx ${cmd}`));
      expect(r.stdout).toContain('--db-url <url>');
      expect(r.stdout).toContain('--verbose');
      expect(r.stderr).toBe('');
      expect((await run(['help', cmd])).stdout).toBe(r.stdout);
    },
  );

  it('rejects an unknown command with exit 2', async () => {
    const r = await run(['stauts']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^rocketmq-tx: unknown command "stauts" \(commands: status, relay, dead-letter/);
  });

  it('rejects bad flags with exit 2, naming flag, value and rule, without a stack trace', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['status', '--topics', 'x'], /^rocketmq-tx status: unknown flag --topics \(allowed: .*--topic,/],
      [
        ['status', '--discard-horizon', '500ms'],
        /invalid --discard-horizon "500ms": expected a duration from 1s to 1w/,
      ],
      [
        ['status', '--discard-horizon', 'soon'],
        /invalid --discard-horizon "soon": expected a duration such as/,
      ],
      [['relay'], /^rocketmq-tx relay: --topics is required/],
      [['relay', '--topics', 'a', '--lease', '10'], /invalid --lease "10": expected a duration such as/],
      [
        ['relay', '--topics', 'a', '--max-attempts', '0'],
        /invalid --max-attempts "0": expected an integer from 1 to 1000/,
      ],
      [
        ['relay', '--topics', 'a', '--lease', '100ms'],
        /invalid --lease "100ms": expected a duration from 1s to 1h/,
      ],
      [['archive'], /^rocketmq-tx archive: --older-than <duration> is required/],
      [
        ['archive', '--older-than', '500ms'],
        /invalid --older-than "500ms": expected a duration from 1s to 3650d/,
      ],
      [['reconcile'], /^rocketmq-tx reconcile: --facts <module> is required/],
      [
        ['reconcile', '--facts', './no/such/file.js'],
        /invalid --facts "\.\/no\/such\/file\.js": no such file/,
      ],
      [['dead-letter'], /dead-letter needs a subcommand: list or replay/],
      [['dead-letter', 'show'], /unknown dead-letter subcommand "show": expected list or replay/],
      [['dead-letter', 'replay'], /needs --event-id <id> \(repeatable\) or --all/],
      [['dead-letter', 'replay', '--all', '--event-id', 'a'], /--event-id or --all, not both/],
      [
        ['dead-letter', 'list', '--event-id', "x'; DROP"],
        /invalid --event-id "x'; DROP": expected event ids/,
      ],
      [
        ['status', '--db-url', 'mysql://root:topsecret@h/d'],
        /--db-url "mysql:\/\/root:\*\*\*@h\/d" carries a password/,
      ],
    ];
    for (const [argv, pattern] of cases) {
      const r = await run(argv);
      expect({ argv, code: r.code }).toEqual({ argv, code: 2 });
      expect(r.stderr).toMatch(pattern);
      expect(r.stderr).toContain(`Run 'rocketmq-tx ${argv[0]} --help' for usage.`);
      expect(r.stderr).not.toMatch(/\n\s+at /);
      expect(r.stderr).not.toContain('topsecret');
      expect(r.stdout).toBe('');
    }
  });

  it('prints the package version', async () => {
    const r = await run(['--version']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^\d+\.\d+\.\d+/);
  });
});
