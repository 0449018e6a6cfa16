import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { Logger } from 'pino';
import { AppError } from '../../errors.js';
import type { Embedder } from '../../llm/embedder.js';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import { type Chunk, chunkBlocks, type ChunkOptions } from './chunk.js';
import { detectKind, ExtractionError, extract, type FileKind } from './extract.js';
import type { KnowledgeStore } from './knowledge.store.js';
import { SHARED_SCOPE } from './search-index.js';
import { fetchUrl, UrlFetchError, type UrlFetchOptions } from './url-fetch.js';
import type { VectorState } from './vector-state.js';

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
}

/** The name of a URL source given none: its address, cut to the 200 characters a name may have (until the page's title replaces it). */
export function urlName(url: string): string {
  return url.slice(0, 200);
}

/** What the index's title column holds for a chunk: the source name and the headings above it. */
export function chunkTitle(sourceName: string, headingPath: string[]): string {
  return [sourceName, ...headingPath].join(' › ');
}

/** The text a chunk is embedded as: its title gives the vector the context the chunk itself may lack. */
export function embeddingText(sourceName: string, chunk: Pick<Chunk, 'headingPath' | 'text'>): string {
  return `${chunkTitle(sourceName, chunk.headingPath)}\n${chunk.text}`;
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
  const { store, vectors, embedder, clock, ids, logger } = deps;

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
      const { kind, data, fetched } = await contentOf(source, signal);
      const extracted = await extract(kind, data);
      const chunks = chunkBlocks(extracted.blocks, deps.chunking);
      if (chunks.length === 0) throw new ExtractionError('No text could be extracted from the document.');
      // A URL source without a name is named after the page's title once it is known.
      const name = source.kind === 'url' && source.name === urlName(source.url ?? '') && extracted.title ? extracted.title.slice(0, 200) : source.name;
      const vectorsOf = await embedAll(embedder, chunks.map((c) => embeddingText(name, c)), signal);
      signal?.throwIfAborted();
      const index = vectors.indexFor(vectorsOf[0]!.length);
      const written = store.replaceChunks(
        index,
        {
          id: source.id,
          workspaceId: source.workspace_id,
          scope: source.persona_id ?? SHARED_SCOPE,
          name,
          generation,
          bytes: data.length,
          content: fetched ? null : source.content,
        },
        chunks.map((c, i) => ({ ...c, id: ids('chk'), vector: vectorsOf[i]! })),
        (c) => chunkTitle(name, c.headingPath),
        now(),
      );
      if (written) logger.info({ sourceId, chunks: chunks.length }, 'knowledge source ready');
    } catch (err) {
      if (signal?.aborted) throw err;
      const message = describeFailure(err);
      if (message === null) logger.error({ err, sourceId }, 'knowledge processing failed');
      store.markFailed(sourceId, generation, message ?? 'Processing failed unexpectedly; see the server log.', now());
    }
  }

  return { process };
}

export type Ingestor = ReturnType<typeof createIngestor>;

/**
 * The in-process job queue: one source at a time (ingestion is CPU-bound and the machine small),
 * each source queued at most once. `close()` aborts the running job, which stays `processing` in
 * the database and is resumed at the next start.
 */
export function createJobQueue(run: (sourceId: string, signal: AbortSignal) => Promise<void>, logger: Logger) {
  const queued = new Set<string>();
  const controller = new AbortController();
  let running: Promise<void> | null = null;
  let idleWaiters: (() => void)[] = [];

  async function pump() {
    while (queued.size > 0 && !controller.signal.aborted) {
      const [id] = queued;
      queued.delete(id!);
      try {
        // Through a promise: a job throwing synchronously must not end pump before `running` is set, wedging the queue.
        await Promise.resolve().then(() => run(id!, controller.signal));
      } catch (err) {
        if (!controller.signal.aborted) logger.error({ err, sourceId: id }, 'knowledge job failed');
      }
    }
    running = null;
    const waiters = idleWaiters;
    idleWaiters = [];
    for (const w of waiters) w();
  }

  return {
    enqueue(sourceId: string) {
      if (controller.signal.aborted) return;
      queued.add(sourceId);
      running ??= pump();
    },
    /** Resolves when nothing is queued or running (tests, the CLI). */
    idle(): Promise<void> {
      if (running === null) return Promise.resolve();
      return new Promise((resolve) => idleWaiters.push(resolve));
    },
    get pending() {
      return queued.size + (running ? 1 : 0);
    },
    async close() {
      queued.clear();
      controller.abort(new Error('shutting down'));
      await running;
    },
  };
}

export type JobQueue = ReturnType<typeof createJobQueue>;
