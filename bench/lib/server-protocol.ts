/** What the bench parent and its server children (`servers.ts`) agree on. Imports nothing heavy. */

export const SERVER_KINDS = ['bare', 'reference', 'switchboard', 'switchboard-limited'] as const;
/**
 * `bare`: fastify hello-world (the ceiling). `reference`: plain fastify listing the same personas
 * straight from better-sqlite3. `switchboard`: the app, rate limit off. `switchboard-limited`: the
 * app with the limiter on but never tripping.
 */
export type ServerKind = (typeof SERVER_KINDS)[number];

export const PERSONA_COUNT = 20;
/** High enough never to trip during a run, so the limiter's bookkeeping is measured, not its 429s. */
export const HIGH_RATE_LIMIT = 100_000_000;

export type ChildMessage =
  | { type: 'ready'; port: number; key: string | null }
  | { type: 'cpu'; usage: NodeJS.CpuUsage }
  | { type: 'failed'; message: string };

export type ParentMessage = { type: 'cpu' } | { type: 'stop' };
