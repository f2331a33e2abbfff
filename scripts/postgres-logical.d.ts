/** Types of scripts/postgres-logical.js (used by the CDC tests). */
export function start(options?: {
  quiet?: boolean;
}): Promise<{ url: string; port: number; pid: number | null }>;
export function stop(options?: { quiet?: boolean }): Promise<void>;
export const URL: string;
export const PORT: number;
