import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * People (issue 41, API.md §14):
 * - `users`: one per e-mail across the installation (`email_key` is the e-mail lower-cased, unique);
 *   `password` is the scrypt hash with its parameters, null for a user who signs in otherwise.
 * - `memberships`: a user's role in a workspace.
 * - `login_sessions`: sign-in sessions, found by the SHA-256 of the cookie's secret (never the
 *   secret itself); the CSRF token is kept as its hash too. Idle and absolute ends are checked at use.
 * - `invitations`: one-use links, found by their token's hash: `invite` (a member, 7 days), `setup`
 *   (the first owner, 24 h).
 * - `signin_failures`: failed password sign-ins, counted per e-mail and per address over a window,
 *   shared by every instance on the database.
 * - `audit_events`: who did what (append-only; kept for the retention window).
 * - `api_keys.user_id`: the person a key belongs to; null for service keys. Users are disabled, never
 *   deleted: a deleted user's key must not turn into a service key.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE users (
      id ${d.text} PRIMARY KEY,
      email ${d.text} NOT NULL,
      email_key ${d.text} NOT NULL UNIQUE,
      name ${d.text} NOT NULL,
      status ${d.text} NOT NULL CHECK (status IN ('active', 'disabled')),
      password ${d.text},
      created_at ${d.text} NOT NULL,
      last_seen_at ${d.text}
    ) ${d.strict}`.execute(db);
  await sql`
    CREATE TABLE memberships (
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      user_id ${d.text} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      role ${d.text} NOT NULL CHECK (role IN ('viewer', 'agent', 'editor', 'admin', 'owner')),
      joined_at ${d.text} NOT NULL,
      PRIMARY KEY (workspace_id, user_id)
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX memberships_user ON memberships (user_id)`.execute(db);
  await sql`
    CREATE TABLE login_sessions (
      id ${d.text} PRIMARY KEY,
      token_hash ${d.text} NOT NULL UNIQUE,
      csrf_hash ${d.text} NOT NULL,
      user_id ${d.text} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      method ${d.text} NOT NULL CHECK (method IN ('password', 'oidc', 'passkey', 'setup', 'invitation')),
      ip ${d.text},
      user_agent ${d.text},
      created_at ${d.text} NOT NULL,
      last_seen_at ${d.text} NOT NULL,
      expires_at ${d.text} NOT NULL,
      ended_at ${d.text}
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX login_sessions_user ON login_sessions (user_id, created_at)`.execute(db);
  await sql`
    CREATE TABLE invitations (
      id ${d.text} PRIMARY KEY,
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      purpose ${d.text} NOT NULL CHECK (purpose IN ('invite', 'setup')),
      email ${d.text},
      role ${d.text} NOT NULL CHECK (role IN ('viewer', 'agent', 'editor', 'admin', 'owner')),
      token_hash ${d.text} NOT NULL UNIQUE,
      created_by ${d.text},
      created_at ${d.text} NOT NULL,
      expires_at ${d.text} NOT NULL,
      used_at ${d.text},
      revoked_at ${d.text}
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX invitations_workspace ON invitations (workspace_id, created_at, id)`.execute(db);
  await sql`
    CREATE TABLE signin_failures (
      seq ${d.serialKey},
      email_key ${d.text} NOT NULL,
      ip ${d.text} NOT NULL,
      at_ms ${d.int} NOT NULL
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX signin_failures_email ON signin_failures (email_key, at_ms)`.execute(db);
  await sql`CREATE INDEX signin_failures_ip ON signin_failures (ip, at_ms)`.execute(db);
  await sql`
    CREATE TABLE audit_events (
      id ${d.text} PRIMARY KEY,
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      at ${d.text} NOT NULL,
      actor_type ${d.text} NOT NULL CHECK (actor_type IN ('user', 'key', 'oauth', 'channel', 'system')),
      actor_id ${d.text} NOT NULL,
      actor_name ${d.text} NOT NULL,
      on_behalf_of ${d.text},
      action ${d.text} NOT NULL,
      target_type ${d.text} NOT NULL,
      target_id ${d.text},
      outcome ${d.text} NOT NULL CHECK (outcome IN ('success', 'denied')),
      request_id ${d.text},
      ip ${d.text},
      user_agent ${d.text},
      changes ${d.text}
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX audit_events_workspace ON audit_events (workspace_id, at, id)`.execute(db);
  await sql`CREATE INDEX audit_events_at ON audit_events (at)`.execute(db);
  await sql`ALTER TABLE api_keys ADD COLUMN user_id ${d.text} REFERENCES users(id)`.execute(db);
  await sql`CREATE INDEX api_keys_user ON api_keys (user_id) WHERE user_id IS NOT NULL`.execute(db);
}
