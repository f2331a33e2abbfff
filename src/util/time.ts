/** Races a promise against a timer; the timer never keeps the process alive. */
export async function withTimeout<T>(promise: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), ms);
    timer.unref();
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    if (timer) clearTimeout(timer);
  }
}

/** Waits at most `ms` for `work`; true if it fulfilled in time, false on timeout or rejection. */
export function completesWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  return withTimeout(work, ms, () => new Error('timeout')).then(
    () => true,
    () => false,
  );
}
