/** What the database holds, for asserting that a refused call wrote nothing anywhere. */
import type { TestApp } from './app.js';

/**
 * Every row of every table, FTS shadow tables included (virtual tables are read through them),
 * each table's rows as sorted JSON. Flush what is kept in memory first (`auth.flushUsage()`), or a
 * periodic flush of `lastUsedAt` may land between two snapshots.
 */
export function databaseSnapshot(t: TestApp): Record<string, string[]> {
  const db = t.ctx.db.sqlite;
  const tables = db
    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name")
    .pluck()
    .all() as string[];
  return Object.fromEntries(tables.map((name) => [name, (db.prepare(`SELECT * FROM "${name}"`).all() as unknown[]).map((row) => JSON.stringify(row)).sort()]));
}
