/** What the database holds, for asserting that a refused call wrote nothing anywhere. */
import { sql } from 'kysely';
import type { TestApp } from './app.js';

/**
 * Every row of every table, each table's rows as sorted JSON: on SQLite FTS shadow tables included
 * (virtual tables are read through them), on PostgreSQL every table of the schema. Flush what is
 * kept in memory first (`auth.flushUsage()`), or a periodic flush of `lastUsedAt` may land between
 * two snapshots.
 */
export async function databaseSnapshot(t: TestApp): Promise<Record<string, string[]>> {
  if (t.ctx.db.kind === 'sqlite') {
    const db = t.ctx.sqlite().sqlite;
    const tables = db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name")
      .pluck()
      .all() as string[];
    return Object.fromEntries(tables.map((name) => [name, (db.prepare(`SELECT * FROM "${name}"`).all() as unknown[]).map((row) => JSON.stringify(row)).sort()]));
  }
  const k = t.ctx.db.kysely;
  const tables = await sql<{ name: string }>`SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`.execute(k);
  const out: Record<string, string[]> = {};
  for (const { name } of tables.rows) out[name] = (await sql`SELECT * FROM ${sql.table(name)}`.execute(k)).rows.map((row) => JSON.stringify(row)).sort();
  return out;
}
