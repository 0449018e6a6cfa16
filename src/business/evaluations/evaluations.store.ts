import { type Kysely, sql } from 'kysely';
import { type AuditRow, insertAudit, withAudit } from '../../core/audit/audit.js';
import { nameContains } from '../../db/name-filter.js';
import type { Database, DatasetCaseRow, DatasetRow, EvalResultRow, EvalRunRow, EvalRunStatus } from '../../db/schema.js';
import { ValidationError } from '../../errors.js';
import { type Page, type PageRequest, paginate } from '../../lib/pagination.js';

/** A page of results or cases ends at a position: the cursor holds the last one shown. */
const positionCursor = (position: number) => Buffer.from(`p${position}`).toString('base64url');
function positionAfter(cursor: string): number {
  const match = /^p(\d{1,15})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!match) throw ValidationError.field('cursor', 'is not a cursor this list returned');
  return Number(match[1]);
}

/** Keyset page in dataset order (`position` ascending). */
async function byPosition<R extends { position: number }>(rows: (after: number, limit: number) => Promise<R[]>, page: PageRequest): Promise<Page<R>> {
  const after = page.cursor === undefined ? 0 : positionAfter(page.cursor);
  const got = await rows(after, page.limit + 1);
  const data = got.slice(0, page.limit);
  const last = data[data.length - 1];
  return { data, nextCursor: got.length > page.limit && last ? positionCursor(last.position) : null };
}

const UNFINISHED: EvalRunStatus[] = ['queued', 'running'];

/** Datasets, their cases, evaluation runs and their per-case results; every query filters by workspace. */
export function createEvaluationStore(db: Kysely<Database>) {
  return {
    // Datasets and cases.
    insertDataset: (row: DatasetRow, cases: DatasetCaseRow[], audit?: AuditRow) =>
      db.transaction().execute(async (trx) => {
        await trx.insertInto('datasets').values(row).execute();
        if (cases.length > 0) await trx.insertInto('dataset_cases').values(cases).execute();
        if (audit) await insertAudit(trx, audit);
      }),
    findDataset: (workspaceId: string, id: string) =>
      db.selectFrom('datasets').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst(),
    listDatasets: (workspaceId: string, page: PageRequest, text?: string) => {
      let q = db.selectFrom('datasets').selectAll().where('workspace_id', '=', workspaceId);
      if (text) q = q.where(nameContains(text));
      return paginate(q, page);
    },
    updateDataset: (workspaceId: string, id: string, patch: Partial<DatasetRow>, audit?: AuditRow) =>
      withAudit(db, audit, async (trx) => {
        await trx.updateTable('datasets').set(patch).where('workspace_id', '=', workspaceId).where('id', '=', id).execute();
      }),
    deleteDataset: (workspaceId: string, id: string, audit?: AuditRow) =>
      withAudit(db, audit, async (trx) => {
        const r = await trx.deleteFrom('datasets').where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
        return Number(r.numDeletedRows) > 0;
      }),
    /**
     * Appends cases after the last one, numbering them on from it and counting them into the
     * dataset, in one transaction; false (nothing added) when they would take it past `max`.
     * Two appends at once: the unique (dataset, position) index refuses the second, which retries.
     */
    appendCases: (workspaceId: string, datasetId: string, make: (firstPosition: number) => DatasetCaseRow[], max: number, now: string, audit?: (rows: DatasetCaseRow[]) => AuditRow) =>
      db.transaction().execute(async (trx) => {
        const ds = await trx.selectFrom('datasets').select(['case_count']).where('workspace_id', '=', workspaceId).where('id', '=', datasetId).executeTakeFirst();
        if (!ds) return null;
        const last = await trx.selectFrom('dataset_cases').select(sql<number | null>`max(position)`.as('p')).where('dataset_id', '=', datasetId).executeTakeFirst();
        const rows = make(Number(last?.p ?? 0) + 1);
        if (ds.case_count + rows.length > max) return false;
        for (let i = 0; i < rows.length; i += 500) await trx.insertInto('dataset_cases').values(rows.slice(i, i + 500)).execute();
        await trx
          .updateTable('datasets')
          .set({ case_count: sql`case_count + ${rows.length}`, updated_at: now })
          .where('id', '=', datasetId)
          .execute();
        if (audit) await insertAudit(trx, audit(rows));
        return rows;
      }),
    listCases: (workspaceId: string, datasetId: string, page: PageRequest) =>
      byPosition(
        (after, limit) =>
          db
            .selectFrom('dataset_cases')
            .selectAll()
            .where('workspace_id', '=', workspaceId)
            .where('dataset_id', '=', datasetId)
            .where('position', '>', after)
            .orderBy('position')
            .limit(limit)
            .execute(),
        page,
      ),
    /** The bodies of some cases of the workspace, by id (the ones deleted since are missing). */
    caseBodies: async (workspaceId: string, ids: string[]): Promise<Map<string, string>> => {
      if (ids.length === 0) return new Map();
      const rows = await db.selectFrom('dataset_cases').select(['id', 'body']).where('workspace_id', '=', workspaceId).where('id', 'in', ids).execute();
      return new Map(rows.map((r) => [r.id, r.body]));
    },
    /** Every case of a dataset in order (export, and a run's work list). */
    allCases: (workspaceId: string, datasetId: string): Promise<DatasetCaseRow[]> =>
      db.selectFrom('dataset_cases').selectAll().where('workspace_id', '=', workspaceId).where('dataset_id', '=', datasetId).orderBy('position').execute(),
    deleteCase: (workspaceId: string, datasetId: string, caseId: string, now: string, audit?: AuditRow) =>
      db.transaction().execute(async (trx) => {
        const r = await trx.deleteFrom('dataset_cases').where('workspace_id', '=', workspaceId).where('dataset_id', '=', datasetId).where('id', '=', caseId).executeTakeFirst();
        if (Number(r.numDeletedRows) === 0) return false;
        await trx.updateTable('datasets').set({ case_count: sql`case_count - 1`, updated_at: now }).where('id', '=', datasetId).execute();
        if (audit) await insertAudit(trx, audit);
        return true;
      }),

    // Runs.
    insertRun: (row: EvalRunRow, audit?: AuditRow) =>
      withAudit(db, audit, async (trx) => {
        await trx.insertInto('eval_runs').values(row).execute();
      }),
    findRun: (workspaceId: string, id: string) =>
      db.selectFrom('eval_runs').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst(),
    runById: (id: string) => db.selectFrom('eval_runs').selectAll().where('id', '=', id).executeTakeFirst(),
    listRuns: (workspaceId: string, page: PageRequest, filter: { datasetId?: string | undefined; personaId?: string | undefined; status?: EvalRunStatus | undefined }) => {
      let q = db.selectFrom('eval_runs').selectAll().where('workspace_id', '=', workspaceId);
      if (filter.datasetId !== undefined) q = q.where('dataset_id', '=', filter.datasetId);
      if (filter.personaId !== undefined) q = q.where('persona_id', '=', filter.personaId);
      if (filter.status !== undefined) q = q.where('status', '=', filter.status);
      return paginate(q, page);
    },
    /** Changes an unfinished run held by `owner` (any owner when null); false when it is finished or another instance holds it. */
    updateRun: async (id: string, owner: string | null, patch: Partial<EvalRunRow>) => {
      let q = db.updateTable('eval_runs').set(patch).where('id', '=', id).where('status', 'in', UNFINISHED);
      if (owner !== null) q = q.where('lease_owner', '=', owner);
      return Number((await q.executeTakeFirst()).numUpdatedRows) > 0;
    },
    /** A queued or running run over a dataset, or of a persona, if any: what may not be deleted under it. */
    unfinishedRun: (workspaceId: string, of: { datasetId: string } | { personaId: string }) =>
      db
        .selectFrom('eval_runs')
        .select('id')
        .where('workspace_id', '=', workspaceId)
        .where('datasetId' in of ? 'dataset_id' : 'persona_id', '=', 'datasetId' in of ? of.datasetId : of.personaId)
        .where('status', 'in', UNFINISHED)
        .executeTakeFirst(),
    /** A finished run's count and summary (a cancelled run's, over what it answered). */
    setSummary: (id: string, done: number, summary: string) => db.updateTable('eval_runs').set({ done, summary }).where('id', '=', id).execute(),
    /** The latest rating of an answer, from its interaction; null when unrated. */
    answerRating: async (workspaceId: string, messageId: string): Promise<number | null> =>
      (await db.selectFrom('interactions').select('rating').where('workspace_id', '=', workspaceId).where('message_id', '=', messageId).executeTakeFirst())?.rating ?? null,
    /** Cancels an unfinished run of the workspace; false when it had finished. */
    cancelRun: (workspaceId: string, id: string, now: string, audit?: AuditRow) =>
      withAudit(db, audit, async (trx) => {
      const r = await trx
        .updateTable('eval_runs')
        .set({ status: 'cancelled', finished_at: now, lease_owner: null, lease_until: null })
        .where('workspace_id', '=', workspaceId)
        .where('id', '=', id)
        .where('status', 'in', UNFINISHED)
        .executeTakeFirst();
      return Number(r.numUpdatedRows) > 0;
      }),
    /**
     * Takes up to `limit` unfinished runs whose lease has lapsed (or that never had one; with
     * `all`, every unfinished run whoever held it), counting the attempt.
     */
    claimLapsed: (owner: string, now: string, until: string, limit: number, all: boolean) =>
      db.transaction().execute(async (trx) => {
        const lapsed = await trx
          .selectFrom('eval_runs')
          .select(['id'])
          .where('status', 'in', UNFINISHED)
          .where((eb) => (all ? sql<boolean>`1 = 1` : eb.or([eb('lease_until', 'is', null), eb('lease_until', '<', now)])))
          .orderBy('created_at')
          .limit(limit)
          .execute();
        const claimed: string[] = [];
        for (const { id } of lapsed) {
          const r = await trx
            .updateTable('eval_runs')
            .set({ lease_owner: owner, lease_until: until, attempts: sql`attempts + 1` })
            .where('id', '=', id)
            .where('status', 'in', UNFINISHED)
            .where((eb) => (all ? sql<boolean>`1 = 1` : eb.or([eb('lease_until', 'is', null), eb('lease_until', '<', now)])))
            .executeTakeFirst();
          if (Number(r.numUpdatedRows) > 0) claimed.push(id);
        }
        return claimed;
      }),
    renewLeases: (owner: string, until: string) =>
      db.updateTable('eval_runs').set({ lease_until: until }).where('lease_owner', '=', owner).where('status', 'in', UNFINISHED).execute(),

    // Results.
    /** Keeps a case's result once: a run taken over may answer a case again, and the first stays. */
    insertResult: async (row: EvalResultRow) => {
      await db.insertInto('eval_results').values(row).onConflict((oc) => oc.columns(['run_id', 'case_id']).doNothing()).execute();
    },
    answeredCases: async (runId: string): Promise<Set<string>> =>
      new Set((await db.selectFrom('eval_results').select('case_id').where('run_id', '=', runId).execute()).map((r) => r.case_id)),
    countResults: async (runId: string) =>
      Number((await db.selectFrom('eval_results').select(sql<number>`count(*)`.as('n')).where('run_id', '=', runId).executeTakeFirstOrThrow()).n),
    allResults: (runId: string): Promise<EvalResultRow[]> => db.selectFrom('eval_results').selectAll().where('run_id', '=', runId).orderBy('position').execute(),
    listResults: (runId: string, page: PageRequest, passed?: boolean) =>
      byPosition((after, limit) => {
        let q = db.selectFrom('eval_results').selectAll().where('run_id', '=', runId).where('position', '>', after);
        if (passed !== undefined) q = q.where('passed', '=', passed ? 1 : 0);
        return q.orderBy('position').limit(limit).execute();
      }, page),
  };
}

export type EvaluationStore = ReturnType<typeof createEvaluationStore>;
