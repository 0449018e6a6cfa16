import type { Kysely } from 'kysely';
import type { ChannelWrites } from '../business/channels/channels.store.js';
import type { ChatWrites } from '../core/chat/chat.store.js';
import type { ThreadWrites } from '../core/openai-compat/openai.store.js';
import type { DialectKind } from './dialect.js';
import type { Database } from './schema.js';

/**
 * A read that runs on every request (a persona per answer, a session per follow-up): prepared once
 * rather than built and compiled by Kysely each time. SQL with `?` placeholders, written once for
 * both dialects.
 */
export interface PreparedRead<Row> {
  first(...params: unknown[]): Promise<Row | undefined>;
  all(...params: unknown[]): Promise<Row[]>;
}

/**
 * What a feature's store receives from either backend (DESIGN.md, "One machine or many"): portable
 * row SQL through Kysely, and prepared reads for the hot paths (better-sqlite3 statements on
 * SQLite, named prepared statements on PostgreSQL). What must differ beyond this lives in the
 * per-dialect modules under src/db/sqlite and src/db/postgres.
 */
export interface SqlBackend {
  readonly kind: DialectKind;
  kysely: Kysely<Database>;
  prepare<Row>(sql: string): PreparedRead<Row>;
}

/** A unique or primary key constraint refused the row, on either backend. */
export function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === '23505';
}

/**
 * The hot path's writes, grouped by each backend per event-loop turn into one transaction, each
 * settling after its commit, so an acknowledged write is durable (src/db/sqlite/hot-writes.ts,
 * src/db/postgres/hot-writes.ts).
 */
export interface HotWrites {
  chat: ChatWrites;
  channels: ChannelWrites;
  threads: ThreadWrites;
}
