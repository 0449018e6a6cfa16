import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { Actor } from '../auth/actor.js';
import { auditRow } from '../audit/audit.js';
import type { Logger } from 'pino';
import type { KnowledgeSourceRow, SourceKind, SourceStatus } from '../../db/schema.js';
import { NotFoundError, UnsupportedMediaTypeError, ValidationError } from '../../errors.js';
import type { Embedder } from '../../llm/embedder.js';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import { mapPage, type Page, type PageRequest } from '../../lib/pagination.js';
import type { PersonaService } from '../personas/personas.service.js';
import { detectKind } from './extract.js';
import { type Ingestor, type JobQueue, MAX_ATTEMPTS, urlName } from './ingest.js';
import type { CreateSourceJson, KnowledgeChunk, KnowledgeSource, SearchMode, SearchResult } from './knowledge.schemas.js';
import type { KnowledgeStore, SourceSummaryRow } from './knowledge.store.js';
import { fusionFor, type FusionOptions } from './fusion.js';
import type { SearchFilter } from './search-index.js';
import type { ChunkWriter } from './chunk-writer.js';
import type { SearchPool } from './search-pool.js';
import { runSearch } from './search-run.js';
import { assertPublicUrl, type UrlFetchOptions } from './url-fetch.js';
import type { VectorState } from './vector-state.js';

/** A document small enough to process inside the request, so it answers `ready` at once. */
export const INLINE_BYTES = 64 * 1024;

/** An uploaded file (multipart `file` part, or a file the CLI read). */
export interface UploadedFile {
  filename: string | null;
  mediaType: string | null;
  data: Buffer;
}

/** Everything `POST /knowledge` accepts, whichever way it arrived. */
export type CreateSourceInput =
  | CreateSourceJson
  | { kind: 'file'; file: UploadedFile; name?: string | undefined; personaId?: string | null | undefined; metadata?: Record<string, unknown> | undefined };

/** `PUT /knowledge/:id`: new content, or only new settings (then the stored content is re-processed). */
export type UpdateSourceInput =
  | (CreateSourceInput & { name?: string | undefined })
  | { kind?: undefined; name?: string | undefined; personaId?: string | null | undefined; metadata?: Record<string, unknown> | undefined };

export interface SearchInput {
  q: string;
  personaId?: string | undefined;
  limit: number;
  mode: SearchMode;
  filter?: Record<string, unknown> | undefined;
}

export function toKnowledgeSource(row: SourceSummaryRow): KnowledgeSource {
  return {
    id: row.id,
    name: row.name,
    kind: row.kind,
    personaId: row.persona_id,
    status: row.status,
    error: row.error,
    bytes: row.bytes,
    chunkCount: row.chunk_count,
    metadata: JSON.parse(row.metadata) as Record<string, unknown>,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** Deep equality of JSON values, for metadata filters. */
function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => jsonEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

export interface KnowledgeServiceDeps {
  store: KnowledgeStore;
  vectors: VectorState;
  embedder: Embedder;
  ingestor: Ingestor;
  queue: JobQueue;
  personas: PersonaService;
  clock: Clock;
  ids: IdGenerator;
  logger: Logger;
  fetchOptions: UrlFetchOptions;
  fusion?: FusionOptions;
  /** Search threads; without them (or when none can take a search) searches run here. */
  searchPool?: SearchPool | null;
  /** The writer of processed sources, which also keeps the keyword index merged. */
  writer: ChunkWriter;
  /**
   * Leases of the sources this instance processes (API.md §13): `owner` names the instance, `ms`
   * how long a lease holds without renewal; `shared`: other instances use the database too
   * (PostgreSQL), so a start takes over only lapsed leases and lapsed ones are taken over as they
   * lapse. Without it (SQLite, one process) a start resumes every unfinished source.
   */
  leases?: { owner: string; ms: number; shared: boolean };
}

/** Sources a takeover sweep claims at most at once. */
const CLAIM_BATCH = 20;

/** Knowledge sources (API.md §4): create, re-process, delete, list chunks, and search. */
export function createKnowledgeService(deps: KnowledgeServiceDeps) {
  const { store, vectors, embedder, ingestor, queue, personas, clock, ids } = deps;
  const fusion = deps.fusion ?? fusionFor(embedder.provider);
  const leases = deps.leases ?? { owner: 'local', ms: 30_000, shared: false };
  const leaseUntil = () => new Date(clock.now().getTime() + leases.ms).toISOString();
  let leaseTimer: NodeJS.Timeout | undefined;

  /**
   * Queues the lapsed sources another instance left, failing those interrupted too often; at a
   * start (`mine`), also those this instance's previous run still holds: it died without handing
   * them over, and waiting for its own leases to lapse would only delay them.
   */
  async function takeOverLapsed(mine = false): Promise<number> {
    let taken = 0;
    for (;;) {
      const now = clock.now().toISOString();
      const lapsed = await store.claimLapsed(leases.owner, now, leaseUntil(), CLAIM_BATCH, mine);
      for (const { id, generation, attempts } of lapsed) {
        if (attempts >= MAX_ATTEMPTS) {
          await store.markFailed(id, generation, `Processing was interrupted ${attempts} times; send the content again to retry.`, now);
          continue;
        }
        queue.enqueue(id);
        taken++;
      }
      if (lapsed.length < CLAIM_BATCH) return taken;
    }
  }

  /** The whole row, stored bytes included (to re-process it); another workspace's → 404. */
  async function find(workspaceId: string, id: string): Promise<KnowledgeSourceRow> {
    const row = await store.find(workspaceId, id);
    if (!row) throw new NotFoundError('Knowledge source', id);
    return row;
  }

  /** The row as the API shows it, without reading the stored bytes; another workspace's → 404. */
  async function summaryOf(workspaceId: string, id: string): Promise<SourceSummaryRow> {
    const row = await store.summary(workspaceId, id);
    if (!row) throw new NotFoundError('Knowledge source', id);
    return row;
  }

  /** A persona id from a body or query must name a persona of this workspace (404 otherwise). */
  async function checkPersona(workspaceId: string, personaId: string | null | undefined) {
    // '' (as in `?personaId=`) names no persona: 404, not a silent "shared only" view.
    if (personaId !== undefined && personaId !== null) await personas.get(workspaceId, personaId);
  }

  /** The content columns for new content, validated; URLs are checked against the SSRF guard before anything is stored. */
  async function contentColumns(input: CreateSourceInput) {
    switch (input.kind) {
      case 'url': {
        const url = await assertPublicUrl(input.url, deps.fetchOptions, 'url');
        return { kind: 'url' as SourceKind, name: input.name ?? urlName(url.href), url: url.href, content: null, filename: null, media_type: null, bytes: 0 };
      }
      case 'file': {
        const { file } = input;
        const kind = detectKind({ mediaType: file.mediaType, filename: file.filename, bytes: file.data });
        if (kind === null) {
          throw new UnsupportedMediaTypeError(
            `${file.filename ?? 'The file'} (${file.mediaType ?? 'unknown type'}) is not a supported document; send pdf, docx, md, txt, html, csv or json.`,
          );
        }
        if (file.data.length === 0) throw ValidationError.field('file', 'is empty');
        // Names are 1–200 characters (as in a JSON body); a longer file name is cut.
        const name = input.name ?? file.filename?.slice(0, 200) ?? `Untitled ${kind}`;
        return { kind: kind as SourceKind, name, url: null, content: file.data, filename: file.filename, media_type: file.mediaType, bytes: file.data.length };
      }
      default: {
        const content = Buffer.from(input.content, 'utf8');
        return { kind: input.kind as SourceKind, name: input.name, url: null, content, filename: null, media_type: null, bytes: content.length };
      }
    }
  }

  /** Processes inside the request when small, else queues; answers the row as it stands then. */
  async function schedule(row: KnowledgeSourceRow): Promise<KnowledgeSource> {
    if (row.kind !== 'url' && row.bytes <= INLINE_BYTES) {
      await ingestor.process(row.id);
      return toKnowledgeSource((await store.summary(row.workspace_id, row.id)) ?? row);
    }
    queue.enqueue(row.id);
    // Accepted and queued: the answer is the row as it was accepted ('processing'), not a read that
    // races the job (a job that finished first made the same request answer 'ready' at random).
    return toKnowledgeSource(row);
  }

  return {
    async create(actor: Actor, input: CreateSourceInput): Promise<KnowledgeSource> {
      const workspaceId = actor.workspaceId;
      await checkPersona(workspaceId, input.personaId);
      const content = await contentColumns(input);
      const now = clock.now().toISOString();
      const row: KnowledgeSourceRow = {
        id: ids('src'),
        workspace_id: workspaceId,
        persona_id: input.personaId ?? null,
        status: 'processing',
        error: null,
        chunk_count: 0,
        metadata: JSON.stringify(input.metadata ?? {}),
        generation: 1,
        attempts: 0,
        lease_owner: leases.owner,
        lease_until: leaseUntil(),
        created_at: now,
        updated_at: now,
        ...content,
      };
      await store.insert(row, auditRow(ids, clock, actor, { action: 'knowledge.create', target: { type: 'knowledge', id: row.id } }));
      return schedule(row);
    },

    async list(workspaceId: string, page: PageRequest, filters: { personaId?: string | undefined; status?: SourceStatus | undefined }): Promise<Page<KnowledgeSource>> {
      await checkPersona(workspaceId, filters.personaId);
      return mapPage(await store.list(workspaceId, page, filters), toKnowledgeSource);
    },

    async get(workspaceId: string, id: string): Promise<KnowledgeSource> {
      return toKnowledgeSource(await summaryOf(workspaceId, id));
    },

    /** New content, name, persona or metadata; without new content, the stored content is processed again (a re-index). */
    async update(actor: Actor, id: string, input: UpdateSourceInput): Promise<KnowledgeSource> {
      const workspaceId = actor.workspaceId;
      const existing = await find(workspaceId, id);
      await checkPersona(workspaceId, input.personaId);
      const patch: Partial<KnowledgeSourceRow> = {
        status: 'processing',
        error: null,
        generation: existing.generation + 1,
        attempts: 0,
        lease_owner: leases.owner,
        lease_until: leaseUntil(),
        updated_at: clock.now().toISOString(),
      };
      if (input.kind !== undefined) {
        // New content keeps the source's name unless a new one is given.
        const { name: _derived, ...content } = await contentColumns({ ...input, name: input.name ?? existing.name } as CreateSourceInput);
        Object.assign(patch, content);
      }
      else if (existing.kind !== 'url' && existing.content === null) {
        throw new ValidationError('This source has no stored content to re-process; send new content.');
      }
      if (input.name !== undefined) patch.name = input.name;
      if (input.personaId !== undefined) patch.persona_id = input.personaId;
      // Chunks carry the old persona scope until re-processing rewrites them: drop them now, or a
      // queued (large or URL) source stays visible to personas it no longer belongs to meanwhile.
      const rescoped = input.personaId !== undefined && input.personaId !== existing.persona_id;
      if (rescoped) patch.chunk_count = 0;
      if (input.metadata !== undefined) patch.metadata = JSON.stringify(input.metadata);
      const changes = [
        ...(input.kind !== undefined ? ['content'] : []),
        ...(['name', 'personaId', 'metadata'] as const).filter((f) => input[f] !== undefined),
      ];
      const event = auditRow(ids, clock, actor, { action: input.kind === undefined && changes.length === 0 ? 'knowledge.reindex' : 'knowledge.update', target: { type: 'knowledge', id }, changes });
      if (!(await store.update(workspaceId, id, patch, event))) throw new NotFoundError('Knowledge source', id);
      // After the update (and its event) landed: a failed update leaves the chunks as they were.
      if (rescoped) await store.dropChunks(id);
      return schedule({ ...existing, ...patch });
    },

    async delete(actor: Actor, id: string): Promise<void> {
      // Chunks, and through triggers their keyword and vector rows, go with the source (ON DELETE CASCADE).
      if (!(await store.delete(actor.workspaceId, id, auditRow(ids, clock, actor, { action: 'knowledge.delete', target: { type: 'knowledge', id } })))) throw new NotFoundError('Knowledge source', id);
    },

    async chunks(workspaceId: string, id: string, page: PageRequest): Promise<Page<KnowledgeChunk>> {
      await summaryOf(workspaceId, id);
      return mapPage(await store.chunks(id, page), (r) => ({
        id: r.id,
        position: r.position,
        text: r.text,
        headingPath: JSON.parse(r.heading_path) as string[],
        tokens: r.tokens,
      }));
    },

    /**
     * `personaChecked`: the caller has just read the persona in this workspace (a chat answer), so
     * it is not read again; otherwise an unknown persona is a 404.
     */
    async search(workspaceId: string, input: SearchInput, { personaChecked = false } = {}): Promise<SearchResult> {
      if (!personaChecked) await checkPersona(workspaceId, input.personaId);
      const filter: SearchFilter = { workspaceId, personaId: input.personaId };
      if (input.filter && Object.keys(input.filter).length > 0) {
        const wanted = Object.entries(input.filter);
        const sources = await store.sourcesForFilter(workspaceId, input.personaId);
        filter.sourceIds = sources
          .filter((s) => {
            const meta = JSON.parse(s.metadata) as Record<string, unknown>;
            return wanted.every(([k, v]) => Object.hasOwn(meta, k) && jsonEqual(meta[k], v));
          })
          .map((s) => s.id);
      }
      const resolved = { q: input.q, limit: input.limit, mode: input.mode };
      const onThread = await deps.searchPool?.search(filter, resolved);
      if (onThread) return onThread;
      // Here the search is synchronous work (the offline embedder, or a keyword search): without a
      // turn of the event loop first, a caller searching in a loop (a script, injected requests)
      // never lets timers, I/O or the writer's batches run, so ingestion stalls while everything
      // waiting on a turn piles up in memory (4 GB in ~2 minutes in knowledge-ingest-concurrency).
      // A thread's answer is a message, which gives that turn already.
      await yieldToEventLoop();
      return runSearch({ index: vectors.index(), embedder, hits: store.hits, fusion }, filter, resolved);
    },

    /** Queues every source a previous process left `processing`; fails those interrupted too often. */
    async resumeUnfinished(): Promise<number> {
      // Other instances may be processing theirs: only what has lapsed is this one's to take.
      if (leases.shared) return takeOverLapsed(true);
      let resumed = 0;
      for (const { id, workspace_id, generation, attempts } of await store.unfinished()) {
        if (attempts + 1 >= MAX_ATTEMPTS) {
          await store.markFailed(id, generation, `Processing was interrupted ${attempts + 1} times; send the content again to retry.`, clock.now().toISOString());
          continue;
        }
        await store.update(workspace_id, id, { attempts: attempts + 1 });
        queue.enqueue(id);
        resumed++;
      }
      return resumed;
    },

    /** Source ids by `metadata.origin` (the file or URL `switchboard ingest` read them from). */
    async originIndex(workspaceId: string): Promise<Map<string, string>> {
      const out = new Map<string, string>();
      for (const s of await store.sourcesForFilter(workspaceId, undefined)) {
        const origin = (JSON.parse(s.metadata) as { origin?: unknown }).origin;
        if (typeof origin === 'string') out.set(origin, s.id);
      }
      return out;
    },

    /** Resolves once queued processing is done (CLI ingest, tests). */
    idle: () => queue.idle(),
    /**
     * A server's start: a merge of the keyword index should another process have left it in many
     * segments. (The search threads start at the first search: search-pool.ts.)
     */
    start() {
      const index = vectors.index();
      if (index) deps.writer.mergeSoon(index);
      if (!leases.shared) return;
      // Three times a lease: renew this instance's, then take over any that lapsed elsewhere.
      leaseTimer = setInterval(() => {
        void (async () => {
          await store.renewLeases(leases.owner, leaseUntil());
          const taken = await takeOverLapsed();
          if (taken > 0) deps.logger.info({ taken }, 'took over knowledge sources whose instance stopped renewing them');
        })().catch((err: unknown) => deps.logger.warn({ err: (err as Error).message }, 'knowledge leases: renewal or takeover failed; retrying'));
      }, Math.max(1, Math.floor(leases.ms / 3)));
      leaseTimer.unref();
    },

    /**
     * Stopping (after the queue has stopped): this instance's unfinished sources are handed over at
     * once rather than when their leases lapse.
     */
    async handOver(): Promise<void> {
      clearInterval(leaseTimer);
      if (leases.shared) await store.renewLeases(leases.owner, clock.now().toISOString());
    },
  };
}

export type KnowledgeService = ReturnType<typeof createKnowledgeService>;
