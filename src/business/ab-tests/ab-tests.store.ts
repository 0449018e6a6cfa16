import { type Kysely, sql } from 'kysely';
import type { AbTestRow, Database } from '../../db/schema.js';
import { type PageRequest, paginate } from '../../lib/pagination.js';

/** A/B tests, and the answers and ratings recorded under them (API.md §8); every query filters by workspace. */
export function createAbTestStore(db: Kysely<Database>) {
  return {
    insert: (row: AbTestRow) => db.insertInto('ab_tests').values(row).execute(),
    find: (workspaceId: string, id: string) =>
      db.selectFrom('ab_tests').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst(),
    list: (workspaceId: string, page: PageRequest, status?: AbTestRow['status']) => {
      let q = db.selectFrom('ab_tests').selectAll().where('workspace_id', '=', workspaceId);
      if (status !== undefined) q = q.where('status', '=', status);
      return paginate(q, page);
    },
    /** Moves a test from `from` to a new status; false when it was not in `from` (someone else moved it). */
    transition: async (workspaceId: string, id: string, from: AbTestRow['status'], patch: Pick<AbTestRow, 'status'> & Partial<AbTestRow>) => {
      const r = await db.updateTable('ab_tests').set(patch).where('workspace_id', '=', workspaceId).where('id', '=', id).where('status', '=', from).executeTakeFirst();
      return Number(r.numUpdatedRows) > 0;
    },
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
    /** Latency of every answer, by variant. */
    latencies: (workspaceId: string, testId: string) =>
      db
        .selectFrom('interactions')
        .select(['variant', 'latency_ms'])
        .where('workspace_id', '=', workspaceId)
        .where('ab_test_id', '=', testId)
        .where('error', 'is', null)
        .execute(),
    /** Every rating given to the test's answers, by variant. */
    ratings: (workspaceId: string, testId: string) =>
      db.selectFrom('feedback').select(['variant', 'rating']).where('workspace_id', '=', workspaceId).where('ab_test_id', '=', testId).execute(),
  };
}

export type AbTestStore = ReturnType<typeof createAbTestStore>;
