import type { SqlBackend } from '../../db/backend.js';
import { type AuditRow, withAudit } from '../audit/audit.js';
import type { KnowledgeSourceRow, SourceStatus } from '../../db/schema.js';
import { ValidationError } from '../../errors.js';
import { type PageRequest, paginate, type Page } from '../../lib/pagination.js';
import type { Chunk } from './chunk.js';
import type { KnowledgeDialect } from './knowledge-dialect.js';
import type { SearchIndex } from './search-index.js';

export interface ChunkWrite extends Chunk {
  id: string;
  vector: Float32Array;
  /** Its binary code, when an ingestion worker computed it. */
  code?: Buffer | undefined;
}

/** One processed source as the writer hands it to `writeSources`. */
export interface SourceWrite {
  source: { id: string; workspaceId: string; scope: string; name: string; generation: number; bytes: number; content: Buffer | null };
  chunks: ChunkWrite[];
  /** The index title of a chunk (source name and headings). */
  title: (chunk: Chunk) => string;
  now: string;
}

/** The columns of a source the API returns (`toKnowledgeSource`). */
export type SourceSummaryRow = Omit<KnowledgeSourceRow, 'content' | 'url' | 'filename' | 'media_type' | 'generation' | 'attempts' | 'lease_owner' | 'lease_until'>;

export interface ChunkListRow {
  id: string;
  position: number;
  text: string;
  heading_path: string;
  tokens: number;
}

export interface ChunkHitRow {
  rowid: number;
  id: string;
  source_id: string;
  text: string;
  position: number;
  source_name: string;
  metadata: string;
}

function decodePositionCursor(cursor: string): number {
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const n = Number(text);
  // Number('') is 0: a cursor of junk characters decodes to '' and must not read as position 0.
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n)) throw ValidationError.field('cursor', 'is not a cursor this list returned');
  return n;
}

/**
 * Knowledge sources and chunks: portable reads here; the writes that share a transaction with the
 * search index come from the backend's knowledge dialect (knowledge-dialect.ts).
 */
export function createKnowledgeStore(db: SqlBackend, dialect: KnowledgeDialect) {
  const k = db.kysely;
  // Every upload's job reads its source back and the response reads its state: prepared, and the
  // response's without the stored bytes (a 15 KiB upload read back only to be dropped). Issue 18.
  const sourceForJob = db.prepare<KnowledgeSourceRow>('SELECT * FROM knowledge_sources WHERE id = ?');
  const sourceSummary = db.prepare<SourceSummaryRow>(
    'SELECT id, workspace_id, persona_id, name, kind, status, error, bytes, chunk_count, metadata, created_at, updated_at FROM knowledge_sources WHERE workspace_id = ? AND id = ?',
  );

  return {
    /** With an audit event: both in one transaction (through Kysely, the executor the event shares). */
    insert: (row: KnowledgeSourceRow, audit?: AuditRow): Promise<void> =>
      audit === undefined
        ? dialect.insertSource(row)
        : withAudit(k, audit, async (trx) => {
            await trx.insertInto('knowledge_sources').values(row).execute();
          }),

    find: (workspaceId: string, id: string) =>
      k.selectFrom('knowledge_sources').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst(),

    /** A source as the API shows it (no stored bytes, url, generation). */
    summary: (workspaceId: string, id: string): Promise<SourceSummaryRow | undefined> => sourceSummary.first(workspaceId, id),

    /** Any workspace's source: for the job runner, which got the id from a trusted place. */
    findForJob: (id: string): Promise<KnowledgeSourceRow | undefined> => sourceForJob.first(id),

    list(workspaceId: string, page: PageRequest, filters: { personaId?: string | undefined; status?: SourceStatus | undefined }) {
      let q = k
        .selectFrom('knowledge_sources')
        .select(['id', 'workspace_id', 'persona_id', 'name', 'kind', 'status', 'error', 'bytes', 'chunk_count', 'metadata', 'created_at', 'updated_at'])
        .where('workspace_id', '=', workspaceId);
      if (filters.personaId !== undefined) q = q.where('persona_id', '=', filters.personaId);
      if (filters.status !== undefined) q = q.where('status', '=', filters.status);
      return paginate(q, page);
    },

    update: (workspaceId: string, id: string, patch: Partial<KnowledgeSourceRow>, audit?: AuditRow) =>
      withAudit(k, audit, async (trx) => {
        const r = await trx.updateTable('knowledge_sources').set(patch).where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
        return Number(r.numUpdatedRows) > 0;
      }),

    /** Drops a source's chunks (and through triggers their index rows) without touching the source. */
    dropChunks: (sourceId: string): Promise<void> => dialect.dropChunks(sourceId),

    delete: (workspaceId: string, id: string, audit?: AuditRow): Promise<boolean> =>
      withAudit(k, audit, async (trx) => {
        const r = await trx.deleteFrom('knowledge_sources').where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
        return Number(r.numDeletedRows) > 0;
      }),

    /** Sources still `processing`, oldest first: the jobs a restart must resume (one process on the database). */
    unfinished: () =>
      k.selectFrom('knowledge_sources').select(['id', 'workspace_id', 'generation', 'attempts']).where('status', '=', 'processing').orderBy('created_at').execute(),

    /** Takes over up to `limit` `processing` sources whose lease has lapsed, for `owner` until `until` (knowledge-dialect.ts). */
    claimLapsed: (owner: string, now: string, until: string, limit: number, mine = false) => dialect.claimLapsed(owner, now, until, limit, mine),

    /** Keeps `owner`'s leases of the sources it still processes until `until`; `until` now hands them over. */
    async renewLeases(owner: string, until: string): Promise<void> {
      await k.updateTable('knowledge_sources').set({ lease_until: until }).where('lease_owner', '=', owner).where('status', '=', 'processing').execute();
    },

    /** Names of the ready sources a persona answers from, its own first, then shared ones, newest first. */
    async titlesFor(workspaceId: string, personaId: string, limit: number): Promise<string[]> {
      const rows = await k
        .selectFrom('knowledge_sources')
        .select(['name', 'persona_id'])
        .where('workspace_id', '=', workspaceId)
        .where('status', '=', 'ready')
        .where((eb) => eb.or([eb('persona_id', 'is', null), eb('persona_id', '=', personaId)]))
        .orderBy('created_at', 'desc')
        .limit(limit * 4)
        .execute();
      return [...rows.filter((r) => r.persona_id !== null), ...rows.filter((r) => r.persona_id === null)].slice(0, limit).map((r) => r.name);
    },

    /** Id, scope and metadata of the sources a search may see, for metadata filters. */
    sourcesForFilter(workspaceId: string, personaId: string | undefined) {
      let q = k.selectFrom('knowledge_sources').select(['id', 'metadata']).where('workspace_id', '=', workspaceId);
      if (personaId !== undefined) q = q.where((eb) => eb.or([eb('persona_id', 'is', null), eb('persona_id', '=', personaId)]));
      return q.execute();
    },

    async chunks(sourceId: string, page: PageRequest): Promise<Page<ChunkListRow>> {
      let q = k
        .selectFrom('knowledge_chunks')
        .select(['id', 'position', 'text', 'heading_path', 'tokens'])
        .where('source_id', '=', sourceId);
      if (page.cursor !== undefined) q = q.where('position', '>', decodePositionCursor(page.cursor));
      const rows = await q.orderBy('position').limit(page.limit + 1).execute();
      const more = rows.length > page.limit;
      const data = more ? rows.slice(0, page.limit) : rows;
      const last = data[data.length - 1];
      return { data, nextCursor: more && last ? Buffer.from(String(last.position)).toString('base64url') : null };
    },

    /** Chunk rows of search hits with their source's name and metadata, only from this workspace. */
    hits: (workspaceId: string, rowids: number[]): Promise<ChunkHitRow[]> => dialect.hits(workspaceId, rowids),

    writeSources: (index: SearchIndex, writes: SourceWrite[]): Promise<boolean[]> => dialect.writeSources(index, writes),

    /**
     * Marks a source failed, unless it changed since `generation`, and drops its chunks: a failed
     * source is not searchable, not even with the text of an earlier version.
     */
    markFailed: (id: string, generation: number, error: string, now: string): Promise<boolean> => dialect.markFailed(id, generation, error, now),
  };
}

export type KnowledgeStore = ReturnType<typeof createKnowledgeStore>;
