import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { cdcSnapshotStatement } from '../store/typeorm/cdcQueries';

/**
 * The CDC engine of `rocketmq-tx cdc`: the Debezium embedded engine (MySQL/MariaDB binlog) with a
 * RocketMQ sink, a Java program (cdc/RocketMqTxCdc.java in this package) whose jars Maven fetches
 * from Maven Central into the engine's home on the first start, and which this module compiles
 * with javac and supervises: restarted with backoff when it dies, stopped when asked.
 */

/** The package's cdc/ directory: the engine's pom.xml and Java source. */
export const ENGINE_SOURCE_DIR = path.resolve(__dirname, '..', '..', 'cdc');
const MAIN_CLASS = 'RocketMqTxCdc';

export interface EngineDatabase {
  /** MySQL/MariaDB (binlog) or PostgreSQL (logical decoding with pgoutput). */
  type: 'mysql' | 'postgres';
  host: string;
  port: number;
  user: string;
  /** Passed to the engine in its environment only. */
  password?: string;
  database: string;
}

export interface CdcEnginePlan {
  /** Directory of the jars, the compiled engine, offsets, schema history, state and logs. */
  home: string;
  /** Engine name: Debezium's name and topic prefix, and the name of its offset/history files. */
  name: string;
  db: EngineDatabase;
  /** MySQL server id of the binlog client: unique among the server's replicas. */
  serverId: number;
  namesrv: string;
  producerGroup: string;
  fifoTopics: readonly string[];
  transactionTopics: readonly string[];
  /** Debezium snapshot.mode: when the stored offset is missing or purged, what to read first. */
  snapshotMode: 'when_needed' | 'initial' | 'no_data';
  /** How long a send may take before it is retried (ms). */
  sendTimeoutMs: number;
}

/** The engine's progress, as its supervisor keeps it (and writes to <home>/<name>.state.json). */
export interface CdcEngineState {
  name: string;
  /** Events published by the engine since the supervisor started (all runs). */
  published: number;
  /** Binlog rows of outbox_event that were not CDC rows (relay rows, updates by the relay). */
  skipped: number;
  /** Failed sends, each retried. */
  sendRetries: number;
  /** Engine runs after the first (crashes, exits). */
  restarts: number;
  /** The published event with the latest occurred_at (this run's); null before the first. */
  lastEventId: string | null;
  /** Commit time (database clock, ms) of the last binlog row processed; null before the first. */
  lastSourceTsMs: number | null;
  lastError: string | null;
  running: boolean;
  /** CDC rows after the last one published (the CLI measures it on the database); null: not measured. */
  behindEvents: number | null;
  /** Age of the oldest of them on the database clock (ms); 0 when none; null: not measured. */
  behindMs: number | null;
  /** Process clock, ISO-8601. */
  updatedAt: string;
}

export class CdcEngineError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CdcEngineError';
  }
}

type Log = (line: string) => void;

interface RunResult {
  code: number | null;
  output: string;
}

function run(cmd: string, args: readonly string[], cwd: string): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

function hashOf(...files: string[]): string {
  const h = createHash('sha256');
  for (const f of files) h.update(fs.readFileSync(f));
  return h.digest('hex').slice(0, 16);
}

function markerMatches(file: string, value: string): boolean {
  try {
    return fs.readFileSync(file, 'utf8').trim() === value;
  } catch {
    return false;
  }
}

function lastLines(text: string, n: number): string {
  return text.trim().split('\n').slice(-n).join('\n');
}

/**
 * The engine's jars (Maven, once per pom) and classes (javac, once per source) in `home`.
 * Resolves with the classpath.
 */
export async function assembleEngine(home: string, log: Log): Promise<string> {
  const pom = path.join(ENGINE_SOURCE_DIR, 'pom.xml');
  const source = path.join(ENGINE_SOURCE_DIR, `${MAIN_CLASS}.java`);
  const lib = path.join(home, 'lib');
  const classes = path.join(home, 'classes');
  fs.mkdirSync(home, { recursive: true });
  const pomHash = hashOf(pom);
  if (!markerMatches(path.join(home, 'lib.version'), pomHash)) {
    const mavenDir = path.join(home, 'maven');
    const partial = path.join(home, 'lib.partial');
    fs.mkdirSync(mavenDir, { recursive: true });
    fs.rmSync(partial, { recursive: true, force: true });
    fs.copyFileSync(pom, path.join(mavenDir, 'pom.xml'));
    const extra = (process.env.ROCKETMQ_TX_MAVEN_ARGS || '').split(/\s+/).filter(Boolean);
    const args = ['-B', '-q', '-Dstyle.color=never', ...extra, 'dependency:copy-dependencies'];
    args.push(`-DoutputDirectory=${partial}`, '-DincludeScope=runtime');
    log(`cdc: downloading the Debezium engine jars with Maven into ${lib} (first start only)`);
    const t0 = Date.now();
    const res = await run('mvn', args, mavenDir).catch((err: Error) => {
      throw new CdcEngineError(`mvn could not run (${err.message}): install Apache Maven 3.6+ and Java 17+`);
    });
    const jars = fs.existsSync(partial) ? fs.readdirSync(partial).filter((f) => f.endsWith('.jar')) : [];
    if (res.code !== 0 || !jars.some((j) => j.startsWith('debezium-embedded-'))) {
      throw new CdcEngineError(
        `Maven could not fetch the Debezium engine jars (exit ${res.code}; ${jars.length} jars); ` +
          `check access to Maven Central. Last lines:\n${lastLines(res.output, 20)}`,
      );
    }
    fs.rmSync(lib, { recursive: true, force: true });
    fs.renameSync(partial, lib);
    fs.writeFileSync(path.join(home, 'lib.version'), `${pomHash}\n`);
    log(`cdc: ${jars.length} jars ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }
  const classpath = [classes, path.join(lib, '*')].join(path.delimiter);
  const sourceHash = hashOf(source, pom);
  if (!markerMatches(path.join(home, 'classes.version'), sourceHash)) {
    fs.rmSync(classes, { recursive: true, force: true });
    fs.mkdirSync(classes, { recursive: true });
    const res = await run(
      'javac',
      ['-nowarn', '-d', classes, '-cp', path.join(lib, '*'), source],
      home,
    ).catch((err: Error) => {
      throw new CdcEngineError(`javac could not run (${err.message}): install a JDK 17+`);
    });
    if (res.code !== 0) {
      throw new CdcEngineError(`javac failed on ${source} (exit ${res.code}):\n${lastLines(res.output, 20)}`);
    }
    fs.writeFileSync(path.join(home, 'classes.version'), `${sourceHash}\n`);
  }
  return classpath;
}

/** Debezium and sink settings: the properties file the engine reads (no password in it). */
export function engineProperties(plan: CdcEnginePlan): Record<string, string> {
  const file = (suffix: string) => path.join(plan.home, `${plan.name}.${suffix}`);
  const pg = plan.db.type === 'postgres';
  const table = pg ? 'public.outbox_event' : `${plan.db.database}.outbox_event`;
  // A replication slot / publication name: lower case letters, digits and underscores.
  const slot = `rmqtx_${plan.name.toLowerCase().replace(/[^a-z0-9_]/g, '_')}`.slice(0, 63);
  const source: Record<string, string> = pg
    ? {
        'connector.class': 'io.debezium.connector.postgresql.PostgresConnector',
        'database.dbname': plan.db.database,
        'plugin.name': 'pgoutput',
        'slot.name': slot,
        'publication.name': `${slot}_pub`,
        // The publication covers outbox_event only (created on the first start).
        'publication.autocreate.mode': 'filtered',
        'schema.include.list': 'public',
      }
    : {
        'connector.class': 'io.debezium.connector.mysql.MySqlConnector',
        'database.server.id': String(plan.serverId),
        'database.include.list': plan.db.database,
        'schema.history.internal': 'io.debezium.storage.file.history.FileSchemaHistory',
        'schema.history.internal.file.filename': file('schema-history'),
        'schema.history.internal.store.only.captured.tables.ddl': 'true',
        'include.schema.changes': 'false',
      };
  return {
    name: plan.name,
    ...source,
    'offset.storage': 'org.apache.kafka.connect.storage.FileOffsetBackingStore',
    'offset.storage.file.filename': file('offsets'),
    // A crash re-sends at most about a second of rows (duplicates, same EVENT_ID).
    'offset.flush.interval.ms': '1000',
    'database.hostname': plan.db.host,
    'database.port': String(plan.db.port),
    'database.user': plan.db.user,
    'topic.prefix': plan.name,
    'table.include.list': table,
    'tombstones.on.delete': 'false',
    // While outbox_event is idle but other tables change, heartbeats move the stored position
    // (and PostgreSQL's slot) forward: a restart does not re-read the backlog of other tables, and
    // the slot does not hold WAL without bound.
    'heartbeat.interval.ms': '10000',
    // How long the engine waits for more changes before handing a batch over (default 500 ms).
    'poll.interval.ms': '50',
    'binary.handling.mode': 'bytes',
    'snapshot.mode': plan.snapshotMode,
    // A snapshot (first start, or the stored position gone from the log) reads only the rows the
    // engine publishes: CDC rows.
    'snapshot.select.statement.overrides': table,
    [`snapshot.select.statement.overrides.${table}`]: cdcSnapshotStatement(plan.db.type, plan.db.database),
    'rmqtx.namesrv': plan.namesrv,
    'rmqtx.producerGroup': plan.producerGroup,
    'rmqtx.fifoTopics': plan.fifoTopics.join(','),
    'rmqtx.transactionTopics': plan.transactionTopics.join(','),
    'rmqtx.sendTimeoutMs': String(plan.sendTimeoutMs),
  };
}

/** java.util.Properties text: keys and values escaped. */
function propertiesText(props: Record<string, string>): string {
  const esc = (s: string, key: boolean) =>
    s
      .replace(/\\/g, '\\\\')
      .replace(/\n/g, '\\n')
      .replace(/\r/g, '\\r')
      .replace(key ? /([=: #!])/g : /^([ #!])/g, '\\$1');
  return Object.entries(props)
    .map(([k, v]) => `${esc(k, true)}=${esc(v, false)}`)
    .join('\n');
}

export interface SupervisorEvents {
  /** Engine output worth a line on stderr (start, exit, restart, send errors). */
  onNotice?: (line: string) => void;
  /** Every engine stderr line (its log), for --verbose. */
  onLog?: (line: string) => void;
  onState?: (state: CdcEngineState) => void;
}

interface EngineLine {
  type?: string;
  published?: number;
  skipped?: number;
  retries?: number;
  lastEventId?: string;
  lastSourceTsMs?: number;
  message?: string;
}

/**
 * Runs the engine until stop(): a run that exits (crash, database or broker gone) is started
 * again after a backoff (1 s doubling to 30 s; reset after a run that lasted a minute). Each run
 * resumes from the stored binlog offset.
 */
export class CdcEngineSupervisor {
  private child: ChildProcess | undefined;
  private stopping = false;
  private wake: (() => void) | undefined;
  private base = { published: 0, skipped: 0, sendRetries: 0 };
  private readonly state: CdcEngineState;
  private readonly stateFile: string;
  private readonly logFile: string;

  constructor(
    private readonly plan: CdcEnginePlan,
    private readonly classpath: string,
    private readonly events: SupervisorEvents = {},
  ) {
    this.stateFile = path.join(plan.home, `${plan.name}.state.json`);
    this.logFile = path.join(plan.home, 'logs', `${plan.name}.log`);
    this.state = {
      name: plan.name,
      published: 0,
      skipped: 0,
      sendRetries: 0,
      restarts: -1,
      lastEventId: null,
      lastSourceTsMs: null,
      lastError: null,
      running: false,
      behindEvents: null,
      behindMs: null,
      updatedAt: new Date().toISOString(),
    };
  }

  get current(): Readonly<CdcEngineState> {
    return this.state;
  }

  /** The pid of the running engine process (undefined between runs). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Runs engine processes until stop() is called; resolves after the last one exited. */
  async run(): Promise<void> {
    fs.mkdirSync(path.dirname(this.logFile), { recursive: true });
    const propsFile = path.join(this.plan.home, `${this.plan.name}.properties`);
    fs.writeFileSync(propsFile, `${propertiesText(engineProperties(this.plan))}\n`, { mode: 0o600 });
    let delayMs = 1000;
    while (!this.stopping) {
      this.state.restarts++;
      const started = Date.now();
      const code = await this.runOnce(propsFile);
      if (this.stopping) break;
      this.state.lastError ??= `engine exited with code ${code}`;
      if (Date.now() - started > 60_000) delayMs = 1000;
      this.events.onNotice?.(
        `cdc: engine exited (code ${code}); restarting in ${delayMs} ms from the stored offset (log: ${this.logFile})`,
      );
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, delayMs);
        this.wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
      delayMs = Math.min(delayMs * 2, 30_000);
    }
    this.publishState();
  }

  /** Records the backlog measured on the database (see readCdcBacklog). */
  setBacklog(events: number, ageMs: number): void {
    this.state.behindEvents = events;
    this.state.behindMs = ageMs;
    this.publishState();
  }

  /** Stops the engine: it finishes the send in progress, flushes its offset and exits. */
  stop(): void {
    this.stopping = true;
    this.wake?.();
    this.child?.kill('SIGTERM');
  }

  /** Kills the engine at once (SIGKILL); the supervisor restarts it unless stopping. */
  kill(): void {
    this.child?.kill('SIGKILL');
  }

  private runOnce(propsFile: string): Promise<number | null> {
    const log = fs.createWriteStream(this.logFile, { flags: 'a' });
    const env = { ...process.env, RMQTX_CDC_DB_PASSWORD: this.plan.db.password ?? '' };
    const child = spawn('java', ['-cp', this.classpath, MAIN_CLASS, propsFile], {
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.child = child;
    this.base = {
      published: this.state.published,
      skipped: this.state.skipped,
      sendRetries: this.state.sendRetries,
    };
    createInterface({ input: child.stdout! }).on('line', (line) => this.onLine(line));
    createInterface({ input: child.stderr! }).on('line', (line) => {
      log.write(`${line}\n`);
      this.events.onLog?.(line);
    });
    return new Promise((resolve) => {
      child.on('error', (err) => {
        this.state.lastError = `java could not run: ${err.message}`;
        this.events.onNotice?.(`cdc: ${this.state.lastError}`);
      });
      child.on('close', (code, signal) => {
        this.child = undefined;
        this.state.running = false;
        log.end();
        this.publishState();
        resolve(code ?? (signal ? 128 : null));
      });
    });
  }

  private onLine(line: string): void {
    let o: EngineLine;
    try {
      o = JSON.parse(line) as EngineLine;
    } catch {
      this.events.onLog?.(line);
      return;
    }
    if (o.type === 'ready') {
      this.state.running = true;
      this.state.lastError = null;
      this.events.onNotice?.(`cdc: engine ${this.plan.name} running (pid ${this.child?.pid})`);
    } else if (o.type === 'progress') {
      this.state.published = this.base.published + (o.published ?? 0);
      this.state.skipped = this.base.skipped + (o.skipped ?? 0);
      this.state.sendRetries = this.base.sendRetries + (o.retries ?? 0);
      if (o.lastEventId) this.state.lastEventId = o.lastEventId;
      if (o.lastSourceTsMs) this.state.lastSourceTsMs = o.lastSourceTsMs;
    } else if (o.type === 'error') {
      this.state.lastError = o.message ?? 'unknown engine error';
      this.events.onNotice?.(`cdc: ${this.state.lastError}`);
    }
    this.publishState();
  }

  private publishState(): void {
    this.state.updatedAt = new Date().toISOString();
    try {
      fs.writeFileSync(this.stateFile, `${JSON.stringify(this.state, null, 2)}\n`);
    } catch {
      // the state file is informative; the engine's offsets are what matter
    }
    this.events.onState?.(this.state);
  }
}
