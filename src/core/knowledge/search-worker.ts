/**
 * A search thread (search-pool.ts starts it): its own connection to the database file, its own
 * index (keyword statements, vector cache) and the offline embedder, answering one search per
 * message with exactly what the main thread would (search-run.ts). SQLite's WAL lets it read while
 * the main thread writes; the vector cache brings a workspace up to date at every search, so a
 * source is searchable here as soon as its chunks are committed.
 */
import { workerData } from 'node:worker_threads';
import { openDatabase } from '../../db/database.js';
import { createSqliteKnowledge } from '../../db/sqlite/knowledge.js';
import { serveRequests } from '../../lib/worker-pool.js';
import { createHashedEmbedder } from '../../llm/hashed-embedder.js';
import { openSqliteSearchIndex } from './search-index.js';
import type { SearchRequest, SearchThreadOptions } from './search-pool.js';
import { runSearch } from './search-run.js';

const options = workerData as SearchThreadOptions;
const db = openDatabase({ filename: options.filename, durability: options.durability });
const knowledge = createSqliteKnowledge(db, options.index);
const deps = {
  index: openSqliteSearchIndex(db.sqlite, options.dimension, options.index),
  embedder: createHashedEmbedder(options.dimension),
  hits: knowledge.hits,
  fusion: options.fusion,
};

serveRequests((request: SearchRequest) => runSearch(deps, request.filter, request.input));
