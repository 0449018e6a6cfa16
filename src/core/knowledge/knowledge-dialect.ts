import type { KnowledgeSourceRow } from '../../db/schema.js';
import type { ChunkHitRow, SourceWrite } from './knowledge.store.js';
import type { IndexedChunk, SearchIndex } from './search-index.js';

/** A chunk re-embedded by `switchboard reindex`: its row keeps its text, gets a new vector. */
export type ReembeddedChunk = Omit<IndexedChunk, 'code'>;

/**
 * What knowledge does differently on each backend (ANCHORS-storage.md, rule 1): the search index
 * and the writes that must land in one transaction with it. src/db/sqlite/knowledge.ts (FTS5,
 * sqlite-vec, prepared statements) and src/db/postgres/knowledge.ts (BM25 postings, binary codes).
 * Each accepts only the indexes it opened.
 */
export interface KnowledgeDialect {
  /** Opens the index over vectors of this dimension, creating or rebuilding what it needs. */
  openIndex(dimension: number): Promise<SearchIndex>;
  /** Empties the keyword and vector indexes and opens one for `dimension` (reindex). */
  resetIndex(dimension: number): Promise<SearchIndex>;
  insertSource(row: KnowledgeSourceRow): Promise<void>;
  /**
   * Takes over up to `limit` `processing` sources whose lease has lapsed (or that never had one),
   * and, with `mine`, those `owner` itself holds until before `until` (its previous run's, at a
   * start; what this call claims gets `until` exactly, so a next call does not take it again), oldest
   * first, for `owner` until `until`, counting the attempt; each is taken by one caller (PostgreSQL
   * locks the rows it reads and skips those another instance is taking; SQLite has one writer at a
   * time).
   */
  claimLapsed(owner: string, now: string, until: string, limit: number, mine?: boolean): Promise<LapsedSource[]>;
  /**
   * Swaps the chunks of several sources for new ones, indexes them and marks the sources ready, in
   * one transaction: a search never sees part of a source. Each source is written only if its
   * generation is still current (not changed or deleted since); the result says which were.
   */
  writeSources(index: SearchIndex, writes: SourceWrite[]): Promise<boolean[]>;
  /** Marks a source failed, unless it changed since `generation`, and drops its chunks. */
  markFailed(id: string, generation: number, error: string, now: string): Promise<boolean>;
  /** Drops a source's chunks and their index rows without touching the source. */
  dropChunks(sourceId: string): Promise<void>;
  /** Chunk rows of search hits with their source's name and metadata, only from this workspace. */
  hits(workspaceId: string, rowids: number[]): Promise<ChunkHitRow[]>;
  /** Stores re-embedded vectors of chunks and indexes them, in one transaction (reindex). */
  reembed(index: SearchIndex, chunks: ReembeddedChunk[]): Promise<void>;
  /** In-memory copies of the codes must reload (reindex re-added codes under their old rowids). */
  bumpVectorEpochs(): Promise<void>;
}

/** A source taken over by `claimLapsed`, its attempt counted. */
export interface LapsedSource {
  id: string;
  workspace_id: string;
  generation: number;
  attempts: number;
}
