import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * Teams (API.md §8). Members are rows of their own so "already a member → 409" is the UNIQUE
 * constraint on (team, lower-cased e-mail), not a read-then-write race.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE teams (
      id ${d.text} PRIMARY KEY,
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      name ${d.text} NOT NULL,
      status ${d.text} NOT NULL CHECK (status IN ('available', 'busy', 'offline')),
      timezone ${d.text} NOT NULL,
      weekly ${d.text} NOT NULL,
      created_at ${d.text} NOT NULL,
      updated_at ${d.text} NOT NULL
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX teams_workspace ON teams (workspace_id, created_at, id)`.execute(db);

  await sql`
    CREATE TABLE team_members (
      seq ${d.serialKey},
      team_id ${d.text} NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      email ${d.text} NOT NULL,
      email_key ${d.text} NOT NULL,
      role ${d.text} NOT NULL CHECK (role IN ('member', 'lead')),
      status ${d.text} NOT NULL CHECK (status IN ('available', 'busy', 'offline')),
      created_at ${d.text} NOT NULL,
      UNIQUE (team_id, email_key)
    ) ${d.strict}`.execute(db);
}
