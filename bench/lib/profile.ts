/** Top self-time frames of the V8 CPU profiles (`node --cpu-prof`) in a directory tree. */
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import path from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

function files(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((f) => {
    const p = path.join(dir, f);
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.cpuprofile') ? [p] : [];
  });
}

/** Self time per frame of one profile, in ms, and the total. */
export function selfTimes(profile: CpuProfile, root: string): { total: number; frames: Map<string, number> } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const frames = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const dt = (profile.timeDeltas[i] ?? 0) / 1000;
    const n = byId.get(id);
    if (!n) return;
    const f = n.callFrame;
    const where = f.url ? `${f.url.replace('file://', '').replace(root + '/', '')}:${f.lineNumber + 1}` : '';
    const name = `${f.functionName || '(anonymous)'} ${where}`.trim();
    frames.set(name, (frames.get(name) ?? 0) + dt);
    total += dt;
  });
  return { total, frames };
}

export function summarizeProfiles(dir: string, root: string, top = 15): string {
  const lines: string[] = [];
  for (const sub of existsSync(dir) ? readdirSync(dir) : []) {
    for (const file of files(path.join(dir, sub))) {
      const { total, frames } = selfTimes(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, root);
      const idle = frames.get('(idle)') ?? 0;
      lines.push(
        `${sub}: ${(total / 1000).toFixed(1)} s sampled, ${(((total - idle) / total) * 100).toFixed(0)}% busy`,
      );
      const sorted = [...frames].filter(([k]) => k !== '(idle)').sort((a, b) => b[1] - a[1]);
      for (const [name, ms] of sorted.slice(0, top)) {
        lines.push(
          `  ${((ms / (total - idle)) * 100).toFixed(1).padStart(5)}%  ${ms.toFixed(0).padStart(6)} ms  ${name}`,
        );
      }
    }
  }
  return lines.join('\n');
}

/**
 * Starts a V8 CPU profile of this process when `dir` is set; the returned function stops it and
 * writes <dir>/<name>.cpuprofile (for one timed section alone, not the set-up around it).
 */
export async function startProfile(dir: string | undefined, name: string): Promise<() => Promise<void>> {
  if (!dir) return async () => undefined;
  const session = new Session();
  session.connect();
  const post = (method: string): Promise<unknown> =>
    new Promise((resolve, reject) => session.post(method, (err, res) => (err ? reject(err) : resolve(res))));
  await post('Profiler.enable');
  await post('Profiler.start');
  return async () => {
    const { profile } = (await post('Profiler.stop')) as { profile: unknown };
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, `${name}.cpuprofile`), JSON.stringify(profile));
    session.disconnect();
  };
}

if (require.main === module) {
  process.stdout.write(
    summarizeProfiles(process.argv[2] ?? '.', process.cwd(), Number(process.argv[3] ?? 15)) + '\n',
  );
}
