/**
 * Runs fn with `env` set in process.env and restores the previous values after. The scripts
 * module (scripts/rocketmq.js) reads its env per call: tests that run a second local broker wrap
 * each call with that broker's variables.
 */
export async function withEnv<T>(env: Readonly<Record<string, string>>, fn: () => Promise<T>): Promise<T> {
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  try {
    return await fn();
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}
