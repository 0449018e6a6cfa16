import { type Kysely, sql } from 'kysely';
import type { AbTestRow, Database } from '../../db/schema.js';
import type { Variant } from './ab-tests.schemas.js';
import { type PageRequest, paginate } from '../../lib/pagination.js';
import { type AuditRow, withAudit } from '../../core/audit/audit.js';

/** A/B tests, and the answers and ratings recorded under them (API.md §8); every query filters by workspace. */
export function createAbTestStore(db: Kysely<Database>) {
  return {
    insert: (row: AbTestRow, audit?: AuditRow) =>
      withAudit(db, audit, async (trx) => {
        await trx.insertInto('ab_tests').values(row).execute();
      }),
    find: (workspaceId: string, id: string) =>
      db.selectFrom('ab_tests').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst(),
    list: (workspaceId: string, page: PageRequest, status?: AbTestRow['status']) => {
      let q = db.selectFrom('ab_tests').selectAll().where('workspace_id', '=', workspaceId);
      if (status !== undefined) q = q.where('status', '=', status);
      return paginate(q, page);
    },
    /** Moves a test from `from` to a new status; false when it was not in `from` (someone else moved it). */
    transition: (workspaceId: string, id: string, from: AbTestRow['status'], patch: Pick<AbTestRow, 'status'> & Partial<AbTestRow>, audit?: AuditRow) =>
      withAudit(db, audit, async (trx) => {
      const r = await trx.updateTable('ab_tests').set(patch).where('workspace_id', '=', workspaceId).where('id', '=', id).where('status', '=', from).executeTakeFirst();
      return Number(r.numUpdatedRows) > 0;
      }),
    /** Marks the test promoted; false when another request promoted it first. */
    promote: (workspaceId: string, id: string, variant: 'A' | 'B', at: string, audit?: AuditRow) =>
      withAudit(db, audit, async (trx) => {
      const r = await trx
        .updateTable('ab_tests')
        .set({ promoted: variant, promoted_at: at })
        .where('workspace_id', '=', workspaceId)
        .where('id', '=', id)
        .where('status', '=', 'completed')
        .where('promoted', 'is', null)
        .executeTakeFirst();
      return Number(r.numUpdatedRows) > 0;
      }),
    /** Running tests with guardrails, in every workspace (the guardrail sweep). */
    runningWithGuardrails: () => db.selectFrom('ab_tests').selectAll().where('status', '=', 'running').where('guardrails', '<>', '{}').execute(),
    /** A running test that routes to the persona, if any. */
    runningWithPersona: (workspaceId: string, personaId: string) =>
      db
        .selectFrom('ab_tests')
        .select(['id', 'name'])
        .where('workspace_id', '=', workspaceId)
        .where('status', '=', 'running')
        .where((eb) => eb.or([eb('persona_a', '=', personaId), eb('persona_b', '=', personaId)]))
        .executeTakeFirst(),
    /** Per variant: sessions opened and answers given (failed answers not counted). */
    counts: (workspaceId: string, testId: string) =>
      db
        .selectFrom('interactions')
        .select(['variant', sql<number>`coalesce(sum(new_session), 0)`.as('conversations'), sql<number>`count(*) FILTER (WHERE error IS NULL)`.as('messages')])
        .where('workspace_id', '=', workspaceId)
        .where('ab_test_id', '=', testId)
        .groupBy('variant')
        .execute(),
    /** Every answer and failure, by variant, in the order they were recorded (guardrails look at each in turn). */
    answers: (workspaceId: string, testId: string) =>
      db
        .selectFrom('interactions')
        .select(['variant', 'latency_ms', 'error'])
        .where('workspace_id', '=', workspaceId)
        .where('ab_test_id', '=', testId)
        .orderBy('seq')
        .execute() as Promise<{ variant: Variant; latency_ms: number; error: string | null }[]>,
    /** Every rating given to the test's answers, by variant, in the order given (each is a look of the sequential test). */
    ratings: (workspaceId: string, testId: string) =>
      db
        .selectFrom('feedback')
        .select(['variant', 'rating', 'created_at'])
        .where('workspace_id', '=', workspaceId)
        .where('ab_test_id', '=', testId)
        .orderBy('seq')
        .execute() as Promise<{ variant: Variant; rating: number; created_at: string }[]>,
  };
}

export type AbTestStore = ReturnType<typeof createAbTestStore>;
