/**
 * `npm run eval:retrieval [-- --tune] [--data=DIR] [--json=FILE] [--database=postgres://…]`
 *
 * Retrieval quality on BEIR SciFact, read in place from ../shared/data/scifact (never copied into
 * the repo; skipped with a message when absent). Every abstract becomes a knowledge source (name =
 * title, content = abstract) ingested through the real service, and each query runs through the
 * service's search, for each mode. Reports nDCG@10 and recall@100 on the 300 test queries (the
 * qrels file), and on the train queries, whose relevant documents come from their `metadata`
 * (SciFact's evidence). `--tune` grid-searches BM25 column weights and fusion weights on the train
 * queries only, so the test figures stay honest. `--database` runs it all on PostgreSQL (an empty
 * database; SWITCHBOARD_SECRET is generated for the run) instead of SQLite, and writes
 * bench/results/retrieval-scifact-postgres.json unless `--json` says otherwise; `--tune` and the
 * budget rows read SQLite's index directly and are SQLite only.
 */
import { systemActor } from '../../src/core/auth/actor.js';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/config.js';
import { type AppContext, createContext } from '../../src/context.js';
import { DEFAULT_FUSION, type FusionOptions, fuse, fusionFor } from '../../src/core/knowledge/fusion.js';
import { type SearchMode, SEARCH_MODES } from '../../src/core/knowledge/knowledge.schemas.js';
import { readJsonl } from '../lib/knowledge-corpus.js';
import { DEFAULT_INDEX_OPTIONS, openSqliteSearchIndex, type Hit } from '../../src/core/knowledge/search-index.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const DEFAULT_DATA = path.resolve(REPO, '../shared/data/scifact');
/** Published BM25 nDCG@10 on SciFact (BEIR paper, Table 2). */
const PUBLISHED_BM25 = 0.665;

interface Query {
  id: string;
  text: string;
  relevant: Set<string>;
}

function loadDataset(dir: string) {
  const corpus = readJsonl<{ _id: string; title: string; text: string }>(path.join(dir, 'corpus.jsonl'));
  const rawQueries = readJsonl<{ _id: string; text: string; metadata: Record<string, unknown> }>(path.join(dir, 'queries.jsonl'));
  const qrels = new Map<string, Set<string>>();
  const lines = fs.readFileSync(path.join(dir, 'qrels.test.tsv'), 'utf8').split('\n').map((l) => l.replace(/\r$/, ''));
  for (const line of lines.slice(1)) {
    const [qid, docId, score] = line.split('\t');
    if (!qid || !docId || Number(score) <= 0) continue;
    if (!qrels.has(qid)) qrels.set(qid, new Set());
    qrels.get(qid)!.add(docId);
  }
  const test: Query[] = [];
  const train: Query[] = [];
  for (const q of rawQueries) {
    const judged = qrels.get(q._id);
    if (judged) test.push({ id: q._id, text: q.text, relevant: judged });
    else if (Object.keys(q.metadata ?? {}).length > 0) train.push({ id: q._id, text: q.text, relevant: new Set(Object.keys(q.metadata)) });
  }
  return { corpus, test, train };
}

/** nDCG@10 (binary relevance, as trec_eval's ndcg_cut.10) and recall@100 of a ranked doc list. */
function score(ranked: string[], relevant: Set<string>) {
  let dcg = 0;
  ranked.slice(0, 10).forEach((d, i) => {
    if (relevant.has(d)) dcg += 1 / Math.log2(i + 2);
  });
  let idcg = 0;
  for (let i = 0; i < Math.min(10, relevant.size); i++) idcg += 1 / Math.log2(i + 2);
  const found = ranked.slice(0, 100).filter((d) => relevant.has(d)).length;
  return { ndcg: idcg === 0 ? 0 : dcg / idcg, recall: found / relevant.size };
}

function mean(xs: number[]) {
  return xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
}

async function ingest(ctx: AppContext, workspaceId: string, corpus: { _id: string; title: string; text: string }[]) {
  const docOf = new Map<string, string>();
  const started = Date.now();
  for (const doc of corpus) {
    const source = await ctx.services.knowledge.create(systemActor(workspaceId), {
      kind: 'text',
      name: doc.title.slice(0, 200) || doc._id,
      content: doc.text || doc.title,
      metadata: { docId: doc._id },
    });
    if (source.status !== 'ready') throw new Error(`doc ${doc._id}: ${source.status} ${source.error ?? ''}`);
    docOf.set(source.id, doc._id);
  }
  return { docOf, seconds: (Date.now() - started) / 1000 };
}

/** Chunk hits as documents, best chunk first, each document once. */
function docsOf(sourceIds: string[], docOf: Map<string, string>): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const s of sourceIds) {
    const d = docOf.get(s);
    if (d && !seen.has(d)) {
      seen.add(d);
      out.push(d);
    }
  }
  return out;
}

async function evaluate(ctx: AppContext, workspaceId: string, queries: Query[], docOf: Map<string, string>, mode: SearchMode) {
  const per = [];
  const times: number[] = [];
  for (const q of queries) {
    const t = performance.now();
    const { data } = await ctx.services.knowledge.search(workspaceId, { q: q.text, limit: 100, mode });
    times.push(performance.now() - t);
    per.push(score(docsOf(data.map((r) => r.sourceId), docOf), q.relevant));
  }
  times.sort((a, b) => a - b);
  return { ndcg: mean(per.map((p) => p.ndcg)), recall: mean(per.map((p) => p.recall)), p50: times[Math.floor(times.length / 2)] ?? 0 };
}

/** Scores index hits (chunk rows) against a query's relevant documents. */
function judgeHits(ctx: AppContext, docOf: Map<string, string>) {
  const sourceOfRow = ctx.sqlite().sqlite.prepare('SELECT source_id FROM knowledge_chunks WHERE rowid = ?').pluck();
  return (hits: Hit[], relevant: Query['relevant']) => score(docsOf(hits.map((h) => sourceOfRow.get(h.rowid) as string), docOf), relevant);
}

/** Train-only grid search over BM25 column weights and the fusion's k and weights. */
async function tune(ctx: AppContext, workspaceId: string, train: Query[], docOf: Map<string, string>) {
  const judge = judgeHits(ctx, docOf);
  const filter = { workspaceId };
  const vectors = await ctx.embedder.embed(train.map((q) => q.text));
  let bestKeyword = { ndcg: -1, titleWeight: 1 };
  const keywordRuns = new Map<number, Hit[][]>();
  for (const titleWeight of [0.25, 0.5, 1, 1.5, 2, 3]) {
    const index = openSqliteSearchIndex(ctx.sqlite().sqlite, ctx.embedder.dimension()!, { ...DEFAULT_INDEX_OPTIONS, titleWeight });
    const runs = train.map((q) => index.keyword(filter, q.text, 100));
    keywordRuns.set(titleWeight, runs);
    const ndcg = mean(runs.map((hits, i) => judge(hits, train[i]!.relevant).ndcg));
    console.log(`  keyword titleWeight=${titleWeight}: train nDCG@10 ${ndcg.toFixed(4)}`);
    if (ndcg > bestKeyword.ndcg) bestKeyword = { ndcg, titleWeight };
  }
  const index = openSqliteSearchIndex(ctx.sqlite().sqlite, ctx.embedder.dimension()!, DEFAULT_INDEX_OPTIONS);
  const vectorRuns = train.map((_, i) => index.vector(filter, vectors[i]!, 100));
  const keywordBest = keywordRuns.get(bestKeyword.titleWeight)!;
  let bestFusion: FusionOptions & { ndcg: number } = { ...DEFAULT_FUSION, ndcg: -1 };
  const norm = (hits: Hit[]) => {
    const max = hits[0]?.score ?? 0;
    const min = hits[hits.length - 1]?.score ?? 0;
    return new Map(hits.map((h) => [h.rowid, max > min ? (h.score - min) / (max - min) : 1]));
  };
  for (const alpha of [0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95]) {
    const ndcg = mean(
      train.map((q, i) => {
        const kw = norm(keywordBest[i]!);
        const vc = norm(vectorRuns[i]!);
        const ids = new Set([...kw.keys(), ...vc.keys()]);
        const fused = [...ids].map((rowid) => ({ rowid, score: alpha * (kw.get(rowid) ?? 0) + (1 - alpha) * (vc.get(rowid) ?? 0) })).sort((a, b) => b.score - a.score);
        return judge(fused.slice(0, 100), q.relevant).ndcg;
      }),
    );
    console.log(`  convex alpha=${alpha}: train nDCG@10 ${ndcg.toFixed(4)}`);
  }
  for (const k of [5, 10, 30, 60, 100]) {
    for (const vectorWeight of [0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1]) {
      const options = { ...DEFAULT_FUSION, k, vectorWeight, keywordWeight: 1 };
      const ndcg = mean(train.map((q, i) => judge(fuse(keywordBest[i]!, vectorRuns[i]!, options).slice(0, 100), q.relevant).ndcg));
      if (vectorWeight < 0.06) console.log(`  rrf k=${k} vectorWeight=${vectorWeight}: train nDCG@10 ${ndcg.toFixed(4)}`);
      if (ndcg > bestFusion.ndcg) bestFusion = { ...options, ndcg };
    }
  }
  console.log(`  best keyword: titleWeight=${bestKeyword.titleWeight} (train nDCG@10 ${bestKeyword.ndcg.toFixed(4)})`);
  console.log(`  best fusion: k=${bestFusion.k} vectorWeight=${bestFusion.vectorWeight} (train nDCG@10 ${bestFusion.ndcg.toFixed(4)})`);
}

/**
 * SciFact is far too small for the keyword budget to drop anything, so its effect is measured here
 * at the share of the index it has at 100k chunks: the budget scaled to this index's size.
 */
async function budgetEffect(ctx: AppContext, workspaceId: string, test: Query[], docOf: Map<string, string>, chunks: number) {
  const budget = Math.max(1, Math.round((DEFAULT_INDEX_OPTIONS.keywordBudget * chunks) / 100_000));
  const index = openSqliteSearchIndex(ctx.sqlite().sqlite, ctx.embedder.dimension()!, { ...DEFAULT_INDEX_OPTIONS, keywordBudget: budget });
  const judge = judgeHits(ctx, docOf);
  const filter = { workspaceId };
  const vectors = await ctx.embedder.embed(test.map((q) => q.text));
  const keyword = test.map((q) => index.keyword(filter, q.text, 100));
  const hybrid = test.map((_, i) => fuse(keyword[i]!, index.vector(filter, vectors[i]!, 100).filter((h) => h.score > 0), fusionFor(ctx.embedder.provider)).slice(0, 100));
  const quality = (runs: Hit[][]) => {
    const per = runs.map((hits, i) => judge(hits, test[i]!.relevant));
    return { ndcg: mean(per.map((x) => x.ndcg)), recall: mean(per.map((x) => x.recall)) };
  };
  return { budget, keyword: quality(keyword), hybrid: quality(hybrid) };
}

async function main() {
  const args = process.argv.slice(2);
  const dataDir = args.find((a) => a.startsWith('--data='))?.slice('--data='.length) ?? DEFAULT_DATA;
  const database = args.find((a) => a.startsWith('--database='))?.slice('--database='.length);
  // A run on PostgreSQL writes its own file by default, beside (not over) the SQLite one.
  const jsonOut = args.find((a) => a.startsWith('--json='))?.slice('--json='.length) ?? path.join(REPO, `bench/results/retrieval-scifact${database ? '-postgres' : ''}.json`);
  if (!fs.existsSync(path.join(dataDir, 'corpus.jsonl'))) {
    console.log(`eval:retrieval skipped: no SciFact dataset at ${dataDir} (corpus.jsonl, queries.jsonl, qrels.test.tsv).`);
    return;
  }
  const { corpus, test, train } = loadDataset(dataDir);
  console.log(`SciFact: ${corpus.length} documents, ${test.length} test queries, ${train.length} train queries with evidence.`);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'switchboard-eval-'));
  const onPostgres = database ? { SWITCHBOARD_DATABASE_URL: database, SWITCHBOARD_SECRET: crypto.randomBytes(32).toString('base64') } : {};
  const ctx = await createContext(loadConfig({ SWITCHBOARD_DATA_DIR: tmp, LOG_LEVEL: 'silent', ...onPostgres }));
  const onSqlite = ctx.db.kind === 'sqlite';
  try {
    const { workspace } = await ctx.services.auth.createWorkspace('eval');
    const { docOf, seconds } = await ingest(ctx, workspace.id, corpus);
    const { chunks } = await ctx.db.kysely.selectFrom('knowledge_chunks').select((eb) => eb.fn.countAll<number>().as('chunks')).executeTakeFirstOrThrow();
    console.log(`Backend: ${ctx.db.kind}.`);
    console.log(`Ingested in ${seconds.toFixed(1)} s (${chunks} chunks, ${(chunks / seconds).toFixed(0)} chunks/s through the service).`);
    if (args.includes('--tune') && onSqlite) {
      console.log('Tuning on train queries only:');
      await tune(ctx, workspace.id, train, docOf);
    }
    const rows = [];
    for (const mode of SEARCH_MODES) {
      const t = await evaluate(ctx, workspace.id, test, docOf, mode);
      const tr = await evaluate(ctx, workspace.id, train, docOf, mode);
      rows.push({ mode, testNdcg10: t.ndcg, testRecall100: t.recall, trainNdcg10: tr.ndcg, trainRecall100: tr.recall, p50ms: t.p50 });
    }
    console.log('\n| mode | test nDCG@10 | test recall@100 | train nDCG@10 | train recall@100 | p50 ms |');
    console.log('|---|---|---|---|---|---|');
    for (const r of rows) {
      console.log(`| ${r.mode} | ${r.testNdcg10.toFixed(4)} | ${r.testRecall100.toFixed(4)} | ${r.trainNdcg10.toFixed(4)} | ${r.trainRecall100.toFixed(4)} | ${r.p50ms.toFixed(1)} |`);
    }
    const pruned = onSqlite ? await budgetEffect(ctx, workspace.id, test, docOf, chunks) : null;
    const label = `budget ${pruned?.budget} chunks (= ${DEFAULT_INDEX_OPTIONS.keywordBudget.toLocaleString('en-US')} at 100k)`;
    for (const mode of ['keyword', 'hybrid'] as const) {
      if (pruned) console.log(`| ${mode}, ${label} | ${pruned[mode].ndcg.toFixed(4)} | ${pruned[mode].recall.toFixed(4)} | | | |`);
    }
    const keyword = rows.find((r) => r.mode === 'keyword')!;
    const hybrid = rows.find((r) => r.mode === 'hybrid')!;
    const checks = [
      { check: `keyword test nDCG@10 ≥ published BM25 ${PUBLISHED_BM25}`, ok: keyword.testNdcg10 >= PUBLISHED_BM25 },
      { check: 'hybrid test nDCG@10 ≥ keyword', ok: hybrid.testNdcg10 >= keyword.testNdcg10 },
    ];
    for (const c of checks) console.log(`${c.ok ? 'PASS' : 'FAIL'} ${c.check}`);
    fs.mkdirSync(path.dirname(jsonOut), { recursive: true });
    fs.writeFileSync(jsonOut, `${JSON.stringify({ dataset: 'BEIR SciFact', backend: ctx.db.kind, documents: corpus.length, chunks, testQueries: test.length, trainQueries: train.length, ingestSeconds: seconds, rows, budgetAt100kShare: pruned, checks, fusion: fusionFor(ctx.embedder.provider), index: DEFAULT_INDEX_OPTIONS }, null, 2)}\n`);
    console.log(`Wrote ${path.relative(process.cwd(), jsonOut)}`);
    if (checks.some((c) => !c.ok)) process.exitCode = 1;
  } finally {
    await ctx.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

await main();
