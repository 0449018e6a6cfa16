import type { SqlBackend } from '../../db/backend.js';
import type { Embedder } from '../../llm/embedder.js';
import { embedAll, embeddingText, chunkTitle } from './ingest.js';
import type { KnowledgeDialect } from './knowledge-dialect.js';
import { createVectorState } from './vector-state.js';

/** Chunks re-embedded per transaction: small enough that a crash loses little, large enough to batch embedder calls. */
const BATCH = 256;

interface ChunkToEmbed {
  rowid: number;
  workspace_id: string;
  source_id: string;
  scope: string;
  text: string;
  heading_path: string;
  source_name: string;
}

/**
 * Rebuilds both indexes from the stored chunk text with the configured embedder (after
 * SWITCHBOARD_EMBEDDINGS or the model changed): no document is extracted or fetched again. The new
 * embedder is recorded only at the end, so an interrupted reindex is simply run again.
 */
export async function reindexKnowledge(
  db: SqlBackend,
  knowledge: KnowledgeDialect,
  embedder: Embedder,
  onProgress: (done: number, total: number) => void = () => {},
): Promise<{ chunks: number; dimension: number | null }> {
  const k = db.kysely;
  const { total } = await k.selectFrom('knowledge_chunks').select((eb) => eb.fn.countAll<number>().as('total')).executeTakeFirstOrThrow();
  const vectors = await createVectorState(db, knowledge, embedder, { allowMismatch: true });
  const page = db.prepare<ChunkToEmbed>(`
    SELECT c.rowid AS rowid, c.workspace_id, c.source_id, c.scope, c.text, c.heading_path, s.name AS source_name
    FROM knowledge_chunks c JOIN knowledge_sources s ON s.id = c.source_id
    WHERE c.rowid > ? ORDER BY c.rowid LIMIT ?`);
  onProgress(0, total);
  let done = 0;
  let after = 0;
  let dimension = embedder.dimension();
  let reset = false;
  for (;;) {
    const rows = await page.all(after, BATCH);
    if (rows.length === 0) break;
    const headings = rows.map((r) => JSON.parse(r.heading_path) as string[]);
    const embedded = await embedAll(embedder, rows.map((r, i) => embeddingText(r.source_name, { text: r.text, headingPath: headings[i]! })));
    dimension = embedded[0]!.length;
    if (!reset) {
      await vectors.reset(dimension);
      reset = true;
    }
    await knowledge.reembed(
      vectors.index()!,
      rows.map((r, i) => ({
        rowid: r.rowid,
        workspaceId: r.workspace_id,
        sourceId: r.source_id,
        scope: r.scope,
        title: chunkTitle(r.source_name, headings[i]!),
        text: r.text,
        vector: embedded[i]!,
      })),
    );
    done += rows.length;
    after = rows[rows.length - 1]!.rowid;
    onProgress(done, total);
  }
  if (dimension !== null) {
    if (!reset) await vectors.reset(dimension);
    await vectors.record(dimension);
  }
  // Codes were re-added under their old rowids: in-memory copies loaded meanwhile must reload.
  await knowledge.bumpVectorEpochs();
  return { chunks: done, dimension };
}
