import { type Kysely, sql } from 'kysely';

/**
 * Teams (API.md §8). Members are rows of their own so "already a member → 409" is the UNIQUE
 * constraint on (team, lower-cased e-mail), not a read-then-write race.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE teams (
      id TEXT PRIMARY KEY,
      workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      name TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('available', 'busy', 'offline')),
      timezone TEXT NOT NULL,
      weekly TEXT NOT NULL,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL
    ) STRICT`.execute(db);
  await sql`CREATE INDEX teams_workspace ON teams (workspace_id, created_at, id)`.execute(db);

  await sql`
    CREATE TABLE team_members (
      seq INTEGER PRIMARY KEY,
      team_id TEXT NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
      workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      email TEXT NOT NULL,
      email_key TEXT NOT NULL,
      role TEXT NOT NULL CHECK (role IN ('member', 'lead')),
      status TEXT NOT NULL CHECK (status IN ('available', 'busy', 'offline')),
      created_at TEXT NOT NULL,
      UNIQUE (team_id, email_key)
    ) STRICT`.execute(db);
}
