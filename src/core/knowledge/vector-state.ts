import type { Db } from '../../db/database.js';
import { type Embedder, embedderId } from '../../llm/embedder.js';
import { openSqliteSearchIndex, resetVectorTable, type SearchIndex, type SqliteSearchIndexOptions } from './search-index.js';

/** Thrown at start-up when stored vectors came from another embedder than the configured one. */
export class EmbedderMismatchError extends Error {}

/**
 * Which embedder the stored vectors came from, and the search index over them. The index opens
 * once the dimension is known: at once for the offline embedder, at the first answer for a remote
 * model. Vectors of two embedders never mix: a change needs `switchboard reindex`.
 */
export interface VectorState {
  /** The open index, or null while no dimension is known (nothing has been embedded yet). */
  index(): SearchIndex | null;
  /** The index for vectors of this dimension, created (and the embedder recorded) if need be. */
  indexFor(dimension: number): SearchIndex;
  /** Drops every indexed row and opens an empty index of `dimension` (reindex); records nothing. */
  reset(dimension: number): SearchIndex;
  /** Records the configured embedder as the one the stored vectors came from. */
  record(dimension: number): void;
}

export function createVectorState(
  db: Db,
  embedder: Embedder,
  options: SqliteSearchIndexOptions = {},
  /** `reindex` opens the state precisely to fix a mismatch. */
  { allowMismatch = false } = {},
): VectorState {
  const getSetting = db.sqlite.prepare('SELECT value FROM settings WHERE key = ?').pluck();
  const setSetting = db.sqlite.prepare(
    'INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
  );
  const id = embedderId(embedder);
  const record = (dimension: number) => {
    setSetting.run('embedder', id);
    setSetting.run('dimension', String(dimension));
  };

  const recordedId = getSetting.get('embedder') as string | undefined;
  const recordedDim = Number(getSetting.get('dimension') ?? NaN);
  const chunks = db.sqlite.prepare('SELECT count(*) FROM knowledge_chunks').pluck().get() as number;
  const mismatch = recordedId !== undefined && recordedId !== id && chunks > 0;
  if (mismatch && !allowMismatch) {
    throw new EmbedderMismatchError(
      `The knowledge index holds ${chunks} chunks embedded with "${recordedId}", but the configured embedder is "${id}". ` +
        'Run `switchboard reindex` to re-embed them, or set SWITCHBOARD_EMBEDDINGS/SWITCHBOARD_EMBEDDING_MODEL back.',
    );
  }
  let current: SearchIndex | null = null;
  const known = recordedId === id && Number.isInteger(recordedDim) ? recordedDim : embedder.dimension();
  if (known !== null && !mismatch) {
    current = openSqliteSearchIndex(db.sqlite, known, options);
    record(known);
  }

  return {
    index: () => current,
    indexFor(dimension) {
      if (current?.dimension === dimension) return current;
      if (current !== null) {
        throw new EmbedderMismatchError(
          `The embedder answered vectors of ${dimension} dimensions; the index holds ${current.dimension}. Run \`switchboard reindex\`.`,
        );
      }
      current = openSqliteSearchIndex(db.sqlite, dimension, options);
      record(dimension);
      return current;
    },
    reset(dimension) {
      db.sqlite.transaction(() => {
        db.sqlite.exec(`INSERT INTO knowledge_fts (knowledge_fts) VALUES ('delete-all')`);
        resetVectorTable(db.sqlite, dimension);
      })();
      current = openSqliteSearchIndex(db.sqlite, dimension, options);
      return current;
    },
    record,
  };
}
