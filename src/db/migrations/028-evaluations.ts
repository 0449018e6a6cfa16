import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * Datasets of evaluation cases and evaluation runs (issue 28). A case is its JSON (the input and
 * what makes an answer good: business/evaluations/cases.ts) in a dataset, in order. A run answers every
 * case of a dataset with one persona version in the background: it is leased like a knowledge
 * source (an instance that stops renewing its lease hands the run to another, or to itself after a
 * restart), and each case's answer, sources and scores are kept once (run, case) so a run taken
 * over resumes where it stopped.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE datasets (
      id ${d.text} PRIMARY KEY,
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      name ${d.text} NOT NULL,
      description ${d.text},
      case_count ${d.int} NOT NULL DEFAULT 0,
      created_at ${d.text} NOT NULL,
      updated_at ${d.text} NOT NULL
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX datasets_workspace ON datasets (workspace_id, created_at, id)`.execute(db);
  await sql`
    CREATE TABLE dataset_cases (
      id ${d.text} PRIMARY KEY,
      workspace_id ${d.text} NOT NULL,
      dataset_id ${d.text} NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
      position ${d.int} NOT NULL,
      body ${d.text} NOT NULL,
      session_id ${d.text},
      created_at ${d.text} NOT NULL
    ) ${d.strict}`.execute(db);
  await sql`CREATE UNIQUE INDEX dataset_cases_order ON dataset_cases (dataset_id, position)`.execute(db);
  await sql`
    CREATE TABLE eval_runs (
      id ${d.text} PRIMARY KEY,
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      dataset_id ${d.text} NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
      persona_id ${d.text} NOT NULL REFERENCES personas(id) ON DELETE CASCADE,
      persona_version ${d.int} NOT NULL,
      status ${d.text} NOT NULL CHECK (status IN ('queued', 'running', 'completed', 'cancelled', 'failed')),
      total ${d.int} NOT NULL,
      done ${d.int} NOT NULL DEFAULT 0,
      concurrency ${d.int} NOT NULL,
      judge ${d.int} NOT NULL,
      summary ${d.text},
      error ${d.text},
      created_by ${d.text},
      created_at ${d.text} NOT NULL,
      started_at ${d.text},
      finished_at ${d.text},
      lease_owner ${d.text},
      lease_until ${d.text},
      attempts ${d.int} NOT NULL DEFAULT 0
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX eval_runs_workspace ON eval_runs (workspace_id, created_at, id)`.execute(db);
  await sql`CREATE INDEX eval_runs_unfinished ON eval_runs (lease_until) WHERE status IN ('queued', 'running')`.execute(db);
  await sql`
    CREATE TABLE eval_results (
      run_id ${d.text} NOT NULL REFERENCES eval_runs(id) ON DELETE CASCADE,
      case_id ${d.text} NOT NULL,
      position ${d.int} NOT NULL,
      passed ${d.int},
      score ${d.real},
      answer ${d.text} NOT NULL,
      sources ${d.text} NOT NULL,
      scores ${d.text} NOT NULL,
      latency_ms ${d.int} NOT NULL,
      prompt_tokens ${d.int} NOT NULL,
      completion_tokens ${d.int} NOT NULL,
      error ${d.text},
      created_at ${d.text} NOT NULL,
      PRIMARY KEY (run_id, case_id)
    ) ${d.strictWithoutRowid}`.execute(db);
  await sql`CREATE INDEX eval_results_order ON eval_results (run_id, position)`.execute(db);
}
