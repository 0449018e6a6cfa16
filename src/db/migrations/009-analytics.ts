import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * Analytics (API.md §8) read interactions, feedback and per-tool call records over a time range of
 * one workspace, so each gets one covering index led by (workspace, time): every aggregate is a
 * range scan of that index alone, never of the table (measured: 30 days of 250k answers sum into
 * daily buckets in ~23 ms and their latencies are read in ~40 ms; see analytics.store.ts). The covering indexes replace the
 * (workspace, time) indexes of 004, which are their prefixes.
 *
 * `interaction_tools` keeps one row per tool call of an answer (name, failed or not). The names
 * are otherwise only in the messages' `tool_calls` JSON, deleted with the session; these rows,
 * like interactions, keep numbers only. Existing calls are copied from the stored messages.
 *
 * `feedback.channel_id`: ratings filtered by channel need it, and the session it came from may be
 * deleted later; filled from the sessions still there.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE interaction_tools (
      seq ${d.serialKey},
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      started_at ${d.text} NOT NULL,
      persona_id ${d.text} NOT NULL,
      channel_id ${d.text},
      tool_name ${d.text} NOT NULL,
      is_error ${d.int} NOT NULL CHECK (is_error IN (0, 1))
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX interaction_tools_analytics ON interaction_tools (workspace_id, started_at, persona_id, channel_id, tool_name, is_error)`.execute(db);
  // Only a SQLite database can hold messages from before this migration: PostgreSQL databases are
  // created empty by this whole chain at once.
  if (d.kind === 'sqlite') {
    await sql`
      INSERT INTO interaction_tools (workspace_id, started_at, persona_id, channel_id, tool_name, is_error)
      SELECT s.workspace_id, m.created_at, s.persona_id, s.channel_id, COALESCE(json_extract(j.value, '$.name'), '?'),
             CASE WHEN json_extract(j.value, '$.isError') THEN 1 ELSE 0 END
      FROM messages m JOIN sessions s ON s.id = m.session_id, json_each(m.tool_calls) j
      WHERE m.tool_calls IS NOT NULL AND json_valid(m.tool_calls)`.execute(db);
  }

  await sql`ALTER TABLE feedback ADD COLUMN channel_id ${d.text}`.execute(db);
  await sql`UPDATE feedback SET channel_id = (SELECT channel_id FROM sessions WHERE sessions.id = feedback.session_id) WHERE session_id IS NOT NULL`.execute(db);

  await sql`
    CREATE INDEX interactions_analytics ON interactions
      (workspace_id, started_at, persona_id, channel_id, error, new_session, latency_ms, ttft_ms, prompt_tokens, completion_tokens)`.execute(db);
  await sql`DROP INDEX interactions_workspace`.execute(db);
  await sql`CREATE INDEX feedback_analytics ON feedback (workspace_id, created_at, persona_id, channel_id, rating)`.execute(db);
  await sql`DROP INDEX feedback_workspace`.execute(db);
}
