import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { Logger } from 'pino';
import { AppError } from '../../errors.js';
import type { Embedder } from '../../llm/embedder.js';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import type { Chunk, ChunkOptions } from './chunk.js';
import type { ChunkWriter } from './chunk-writer.js';
import { detectKind, ExtractionError, type FileKind } from './extract.js';
import type { IngestPool } from './ingest-pool.js';
import type { KnowledgeStore } from './knowledge.store.js';
import { chunkSource, chunkTitle, embeddingText, type PrepareInput, urlName } from './prepare.js';
import { SHARED_SCOPE } from './search-index.js';
import { fetchUrl, UrlFetchError, type UrlFetchOptions } from './url-fetch.js';
import type { VectorState } from './vector-state.js';

export { chunkTitle, embeddingText, urlName } from './prepare.js';

/** Texts per embedder call; between batches the event loop gets a turn, so requests keep flowing while a big file is embedded. */
const EMBED_BATCH = 64;
/** Processing runs a source may start before it is failed instead of retried (a file that crashes the process must not loop). */
export const MAX_ATTEMPTS = 3;

export interface IngestDeps {
  store: KnowledgeStore;
  vectors: VectorState;
  embedder: Embedder;
  clock: Clock;
  ids: IdGenerator;
  logger: Logger;
  /** How URL sources are fetched (the SSRF guard's settings). */
  fetchOptions: UrlFetchOptions;
  chunking?: ChunkOptions;
  /** Commits processed sources, several per transaction. */
  writer: ChunkWriter;
  /**
   * Worker threads running extraction, chunking and the offline embedder. Only for the built-in
   * `hashed` embedder; null sends every stage through the main thread and `embedder` (a remote model).
   */
  pool?: IngestPool | null;
}

/** Embeds texts in batches, yielding between batches. */
export async function embedAll(embedder: Embedder, texts: string[], signal?: AbortSignal): Promise<Float32Array[]> {
  const out: Float32Array[] = [];
  for (let i = 0; i < texts.length; i += EMBED_BATCH) {
    signal?.throwIfAborted();
    out.push(...(await embedder.embed(texts.slice(i, i + EMBED_BATCH), signal)));
    await yieldToEventLoop();
  }
  return out;
}

/** A failure as the short sentence users see in a source's `error`. */
function describeFailure(err: unknown): string | null {
  if (err instanceof ExtractionError || err instanceof UrlFetchError || err instanceof AppError) return err.message;
  return null;
}

/** Extract → chunk → embed → index for one source. */
export function createIngestor(deps: IngestDeps) {
  const { store, vectors, embedder, clock, ids, logger, writer } = deps;
  const pool = deps.pool ?? null;

  async function contentOf(source: { kind: string; url: string | null; content: Buffer | null; filename: string | null; media_type: string | null }, signal?: AbortSignal) {
    if (source.kind === 'url') {
      const fetched = await fetchUrl(source.url ?? '', { ...deps.fetchOptions, ...(signal ? { signal } : {}) });
      const kind = detectKind({ mediaType: fetched.mediaType, filename: fetched.filename, bytes: fetched.body });
      if (kind === null) {
        throw new UrlFetchError(`The URL returned ${fetched.mediaType ?? 'a document of unknown type'}, which cannot be read as text.`);
      }
      return { kind, data: fetched.body, fetched: true };
    }
    return { kind: source.kind as FileKind, data: source.content ?? Buffer.alloc(0), fetched: false };
  }

  /** Chunks with their vectors (and codes, from a worker): in the pool, or here with the configured embedder. */
  async function prepare(input: PrepareInput, signal?: AbortSignal): Promise<{ name: string; chunks: Chunk[]; vectors: Float32Array[]; codes: Buffer[] | null }> {
    if (pool) {
      const p = await pool.prepare(input, signal);
      const { dimension, codeBytes } = p;
      return {
        name: p.name,
        chunks: p.chunks,
        vectors: p.chunks.map((_, i) => p.vectors.subarray(i * dimension, (i + 1) * dimension)),
        codes: p.chunks.map((_, i) => Buffer.from(p.codes.buffer, p.codes.byteOffset + i * codeBytes, codeBytes)),
      };
    }
    const { name, chunks } = await chunkSource(input);
    const embedded = await embedAll(embedder, chunks.map((c) => embeddingText(name, c)), signal);
    return { name, chunks, vectors: embedded, codes: null };
  }

  /**
   * Processes the source's current generation. Never throws for a bad document: the source ends
   * `failed` with a readable error. Aborting (shutdown) leaves it `processing` for the next start.
   */
  async function process(sourceId: string, signal?: AbortSignal): Promise<void> {
    const source = await store.findForJob(sourceId);
    if (!source || source.status !== 'processing') return;
    const { generation } = source;
    const now = () => clock.now().toISOString();
    try {
      const { kind, data } = await contentOf(source, signal);
      // A URL source without a name is named after the page's title once it is known.
      const nameFromTitle = source.kind === 'url' && source.name === urlName(source.url ?? '');
      const { name, chunks, vectors: vectorsOf, codes } = await prepare({ kind, data, name: source.name, nameFromTitle, chunking: deps.chunking }, signal);
      signal?.throwIfAborted();
      const index = await vectors.indexFor(vectorsOf[0]!.length);
      const written = await writer.write(index, {
        source: {
          id: source.id,
          workspaceId: source.workspace_id,
          scope: source.persona_id ?? SHARED_SCOPE,
          name,
          generation,
          bytes: data.length,
          // null keeps the stored content (COALESCE): binding it again only copied it; a fetched page is not stored.
          content: null,
        },
        chunks: chunks.map((c, i) => ({ ...c, id: ids('chk'), vector: vectorsOf[i]!, code: codes?.[i] })),
        title: (c) => chunkTitle(name, c.headingPath),
        now: now(),
      });
      if (written) logger.info({ sourceId, chunks: chunks.length }, 'knowledge source ready');
    } catch (err) {
      if (signal?.aborted) throw err;
      const message = describeFailure(err);
      if (message === null) logger.error({ err, sourceId }, 'knowledge processing failed');
      await store.markFailed(sourceId, generation, message ?? 'Processing failed unexpectedly; see the server log.', now());
    }
  }

  return { process };
}

export type Ingestor = ReturnType<typeof createIngestor>;

/**
 * The in-process job queue: up to `concurrency` sources at a time (1 by default; with ingestion
 * workers, their number plus a little prefetch so a thread never waits for the next document), each
 * source queued at most once and never run twice at once. `close()` aborts the running jobs, which
 * stay `processing` in the database and are resumed at the next start.
 */
export function createJobQueue(run: (sourceId: string, signal: AbortSignal) => Promise<void>, logger: Logger, { concurrency = 1 } = {}) {
  const queued = new Set<string>();
  const running = new Map<string, Promise<void>>();
  const controller = new AbortController();
  let idleWaiters: (() => void)[] = [];

  function wake() {
    const waiters = idleWaiters;
    idleWaiters = [];
    for (const w of waiters) w();
  }

  function start(id: string) {
    // Through a promise: a job throwing synchronously must not escape enqueue() or wedge the queue.
    const job = Promise.resolve()
      .then(() => run(id, controller.signal))
      .catch((err: unknown) => {
        if (!controller.signal.aborted) logger.error({ err, sourceId: id }, 'knowledge job failed');
      })
      .finally(() => {
        running.delete(id);
        pump();
        if (running.size === 0) wake();
      });
    running.set(id, job);
  }

  function pump() {
    if (controller.signal.aborted) return;
    for (const id of queued) {
      if (running.size >= concurrency) return;
      // Queued again while it runs (a newer generation): it starts once the running one ends.
      if (running.has(id)) continue;
      queued.delete(id);
      start(id);
    }
  }

  return {
    enqueue(sourceId: string) {
      if (controller.signal.aborted) return;
      queued.add(sourceId);
      pump();
    },
    /** Resolves when nothing is queued or running (tests, the CLI). */
    idle(): Promise<void> {
      if (running.size === 0) return Promise.resolve();
      return new Promise((resolve) => idleWaiters.push(resolve));
    },
    get pending() {
      return queued.size + running.size;
    },
    async close() {
      queued.clear();
      controller.abort(new Error('shutting down'));
      await Promise.all(running.values());
    },
  };
}

export type JobQueue = ReturnType<typeof createJobQueue>;
