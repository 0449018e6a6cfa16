import type { SqlBackend } from '../../db/backend.js';
import { type Embedder, embedderId } from '../../llm/embedder.js';
import type { KnowledgeDialect } from './knowledge-dialect.js';
import type { SearchIndex } from './search-index.js';

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
  indexFor(dimension: number): Promise<SearchIndex>;
  /** Drops every indexed row and opens an empty index of `dimension` (reindex); records nothing. */
  reset(dimension: number): Promise<SearchIndex>;
  /** Records the configured embedder as the one the stored vectors came from. */
  record(dimension: number): Promise<void>;
}

export async function createVectorState(
  db: SqlBackend,
  knowledge: KnowledgeDialect,
  embedder: Embedder,
  /** `reindex` opens the state precisely to fix a mismatch. */
  { allowMismatch = false } = {},
): Promise<VectorState> {
  const k = db.kysely;
  const setting = async (key: string) => (await k.selectFrom('settings').select('value').where('key', '=', key).executeTakeFirst())?.value;
  const id = embedderId(embedder);
  const record = async (dimension: number) => {
    for (const [key, value] of [['embedder', id], ['dimension', String(dimension)]] as const) {
      await k.insertInto('settings').values({ key, value }).onConflict((oc) => oc.column('key').doUpdateSet({ value })).execute();
    }
  };

  const recordedId = await setting('embedder');
  const recordedDim = Number((await setting('dimension')) ?? NaN);
  const { chunks } = await k.selectFrom('knowledge_chunks').select((eb) => eb.fn.countAll<number>().as('chunks')).executeTakeFirstOrThrow();
  const mismatch = recordedId !== undefined && recordedId !== id && chunks > 0;
  if (mismatch && !allowMismatch) {
    throw new EmbedderMismatchError(
      `The knowledge index holds ${chunks} chunks embedded with "${recordedId}", but the configured embedder is "${id}". ` +
        'Run `switchboard reindex` to re-embed them, or set SWITCHBOARD_EMBEDDINGS/SWITCHBOARD_EMBEDDING_MODEL back.',
    );
  }
  let current: SearchIndex | null = null;
  let opening: Promise<SearchIndex> | null = null;
  const known = recordedId === id && Number.isInteger(recordedDim) ? recordedDim : embedder.dimension();
  if (known !== null && !mismatch) {
    current = await knowledge.openIndex(known);
    await record(known);
  }

  return {
    index: () => current,
    async indexFor(dimension) {
      if (current === null && opening !== null) await opening; // two first answers at once open it once
      if (current?.dimension === dimension) return current;
      if (current !== null) {
        throw new EmbedderMismatchError(
          `The embedder answered vectors of ${dimension} dimensions; the index holds ${current.dimension}. Run \`switchboard reindex\`.`,
        );
      }
      opening = (async () => {
        const index = await knowledge.openIndex(dimension);
        await record(dimension);
        return (current = index);
      })();
      try {
        return await opening;
      } finally {
        opening = null;
      }
    },
    async reset(dimension) {
      current = await knowledge.resetIndex(dimension);
      return current;
    },
    record,
  };
}
