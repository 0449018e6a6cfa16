import type { Logger } from 'pino';
import type { KnowledgeStore, SourceWrite } from './knowledge.store.js';
import type { SearchIndex } from './search-index.js';

export interface ChunkWriterOptions {
  /** Most chunks per transaction (a source larger than this is written alone). */
  maxChunks: number;
  /** How long a write may wait for others to share its transaction while more are being prepared. */
  lingerMs: number;
  /** Quiet time after the last write before the keyword index is merged into one segment. */
  mergeAfterMs: number;
  /** Pages written per merge step (one statement on the main thread: ~2 ms for 64). */
  mergeStepPages: number;
  /** Largest keyword index merged whole, in pages (~4 KB); a larger one is left to FTS5's own automerge. */
  mergeMaxPages: number;
}

/**
 * A 1 ms linger (8 ms before) lets a batch gather what is ready without holding requests processed
 * inline for long. Merging is measured on SciFact (6,918 chunks, 19 segments, 1,134 pages): 17 steps
 * of 64 pages, 35 ms in all, the longest 2.4 ms; 16,384 pages is about half a second.
 */
export const DEFAULT_WRITER: ChunkWriterOptions = { maxChunks: 2_000, lingerMs: 1, mergeAfterMs: 500, mergeStepPages: 64, mergeMaxPages: 16_384 };

interface Pending {
  index: SearchIndex;
  write: SourceWrite;
  resolve(written: boolean): void;
  reject(err: unknown): void;
}

/**
 * The one writer of processed sources. Writes queue up and go to the database together, several
 * sources per transaction (`store.writeSources`): a commit and an FTS5 segment cost about as much
 * for 2,000 chunks as for 15. A batch goes as soon as nothing else is being prepared (`busy()`),
 * when it holds `maxChunks`, or `lingerMs` after its first write. A batch that fails is retried
 * source by source, so one bad source fails alone.
 *
 * Every transaction adds an FTS5 segment, and a keyword search probes each segment for each of its
 * terms: 11 segments of 200 chunks cost 250 µs a search, one 150 µs (issue 18). FTS5's automerge
 * keeps the count logarithmic, not one, so once writes have been quiet for `mergeAfterMs` the
 * writer merges the index into one segment, a step per event-loop turn, and stops at the next write
 * (whose own quiet time starts it again).
 */
export function createChunkWriter(
  store: KnowledgeStore,
  logger: Logger,
  busy: () => boolean,
  options: ChunkWriterOptions = DEFAULT_WRITER,
  /** Called when a batch is scheduled (context.ts: starts the WAL checkpoint thread). */
  onWrite: () => void = () => {},
) {
  let queue: Pending[] = [];
  let queuedChunks = 0;
  let timer: { kind: 'now'; handle: NodeJS.Immediate } | { kind: 'linger'; handle: NodeJS.Timeout } | null = null;
  let closed = false;
  let merge: { kind: 'wait'; handle: NodeJS.Timeout } | { kind: 'step'; handle: NodeJS.Immediate } | null = null;

  function stopMerge() {
    if (merge === null) return;
    if (merge.kind === 'wait') clearTimeout(merge.handle);
    else clearImmediate(merge.handle);
    merge = null;
  }

  function mergeLater(index: SearchIndex) {
    stopMerge();
    merge = { kind: 'wait', handle: setTimeout(() => mergeStep(index, true), options.mergeAfterMs).unref() };
  }

  /** One merge step; the next in a later turn while there is work, unless a write is waiting. */
  function mergeStep(index: SearchIndex, first: boolean) {
    merge = null;
    if (closed || queue.length > 0) return; // the waiting write's batch starts a new quiet time
    try {
      if (first && index.keywordPages(options.mergeMaxPages + 1) > options.mergeMaxPages) return;
      if (!index.mergeStep(first, options.mergeStepPages)) return;
    } catch (err) {
      logger.warn({ err }, 'merging the keyword index failed; searches stay correct, only slower');
      return;
    }
    merge = { kind: 'step', handle: setImmediate(() => mergeStep(index, false)).unref() };
  }

  function schedule() {
    // After close() the queue is close()'s to write.
    if (closed || timer !== null || writing !== null || queue.length === 0) return;
    onWrite();
    if (queuedChunks >= options.maxChunks || !busy()) timer = { kind: 'now', handle: setImmediate(flush) };
    else timer = { kind: 'linger', handle: setTimeout(flush, options.lingerMs) };
  }

  function cancel() {
    if (timer === null) return;
    if (timer.kind === 'now') clearImmediate(timer.handle);
    else clearTimeout(timer.handle);
    timer = null;
  }

  /** Takes writes for one transaction: same index, up to `maxChunks` (at least one write). */
  function take(): Pending[] {
    const batch: Pending[] = [];
    let chunks = 0;
    while (queue.length > 0) {
      const next = queue[0]!;
      if (batch.length > 0 && (next.index !== batch[0]!.index || chunks + next.write.chunks.length > options.maxChunks)) break;
      batch.push(queue.shift()!);
      chunks += next.write.chunks.length;
    }
    queuedChunks -= chunks;
    return batch;
  }

  async function writeBatch(batch: Pending[]): Promise<void> {
    try {
      const written = await store.writeSources(batch[0]!.index, batch.map((p) => p.write));
      batch.forEach((p, i) => p.resolve(written[i]!));
    } catch (err) {
      if (batch.length === 1) return batch[0]!.reject(err);
      logger.warn({ err, sources: batch.length }, 'knowledge batch write failed; writing its sources one by one');
      for (const p of batch) await writeBatch([p]);
    }
  }

  /** The batch being written: one at a time, so sources commit in the order they were queued. */
  let writing: Promise<void> | null = null;

  function flush() {
    timer = null;
    const batch = take();
    if (batch.length === 0) return schedule();
    writing = (async () => {
      await writeBatch(batch);
      mergeLater(batch[0]!.index);
    })().finally(() => {
      writing = null;
      schedule();
    });
  }

  return {
    /** Resolves true once the source's chunks are committed, false when it changed (or went) meanwhile. */
    write(index: SearchIndex, write: SourceWrite): Promise<boolean> {
      if (closed) return Promise.reject(new Error('The knowledge writer is closed.'));
      return new Promise<boolean>((resolve, reject) => {
        queue.push({ index, write, resolve, reject });
        queuedChunks += write.chunks.length;
        // A full batch goes now, not at the end of a linger started for a small one.
        if (queuedChunks >= options.maxChunks && timer?.kind === 'linger') cancel();
        schedule();
      });
    },
    /**
     * Merges the keyword index once writes have been quiet, as after a write of this process: for an
     * index another process left in many segments (`switchboard ingest`, an earlier run).
     */
    mergeSoon(index: SearchIndex) {
      if (!closed && queue.length === 0) mergeLater(index);
    },
    /** Writes what is queued, now (shutdown); later writes are refused. */
    async close() {
      closed = true;
      cancel();
      stopMerge();
      await writing;
      while (queue.length > 0) await writeBatch(take());
    },
  };
}

export type ChunkWriter = ReturnType<typeof createChunkWriter>;
