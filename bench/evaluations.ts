/**
 * Evaluation runs (issue 28): a dataset of 1,000 cases answered by a persona through the real
 * service (createContext, in this process) and the real `openai` client against the instant fake
 * model (its own process), over a help-centre knowledge base of 200 articles, so every case runs a
 * hybrid search, one model call and every deterministic scorer (phrases, regex, retrieval hit@k and
 * MRR, latency, tokens), and each result is written to the database. Target: the run finishes in
 * ≤ 10 s (wall time from the create to `completed`). A second row grades every case with the model
 * as judge too (a second model call per case; reported, no target). On SQLite and PostgreSQL.
 */
import { systemActor } from '../src/core/auth/actor.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../src/config.js';
import { type AppContext, createContext } from '../src/context.js';
import { type BackendDatabase, labelled, withBackendDatabase } from './lib/backends.js';
import { chatQuestions, chatSources } from './lib/chat-corpus.js';
import { startFakeModel } from './lib/fake-model-process.js';
import type { BenchOptions, BenchRow } from './lib/harness.js';
import { type MetricRow, metricRow, metricTable, startWindow } from './lib/in-process.js';

export const name = 'evaluations';
export const description = 'an evaluation run of 1,000 cases (hybrid search, the instant fake model, every scorer) through the real service: wall time to completed (target ≤ 10 s); with the model as judge too';
export const backends = ['sqlite', 'postgres'] as const;

const CASES = 1_000;
const SOURCES = 200;
const TARGET_SECONDS = 10;

/** The cases: the corpus's questions in turn, each checked by phrases, a regex and the sources it should find. */
function cases(judge: boolean) {
  const questions = chatQuestions(200);
  const articles = chatSources(SOURCES);
  return Array.from({ length: CASES }, (_, i) => {
    const question = questions[i % questions.length]!;
    // The articles about the question's subject (every facet of it); none for the questions that do not name one.
    const about = articles.map((a) => a.name).filter((n) => question.includes(n.slice(n.indexOf(': ') + 2)));
    return {
      input: `${question} (case ${i})`,
      mustContain: ['Settings'],
      mustNotContain: ['I cannot answer'],
      regex: '/knowledge base \\[\\d\\]/i',
      ...(about.length > 0 ? { expectedSources: about } : {}),
      ...(judge ? { rubric: 'Answers the question from the help-centre articles, and says where in the product to look.' } : {}),
    };
  });
}

async function runOnce(ctx: AppContext, workspaceId: string, personaId: string, judge: boolean, label: string, db: BackendDatabase): Promise<MetricRow> {
  const dataset = await ctx.services.evaluations.createDataset(systemActor(workspaceId), { name: `Bench ${judge ? 'judged' : 'checks'}`, cases: [] });
  // Cases are created through the same path an import takes (1,000 per call is above the create body's limit).
  const jsonl = cases(judge).map((c) => JSON.stringify(c)).join('\n');
  await ctx.services.evaluations.importCases(systemActor(workspaceId), dataset.id, 'jsonl', jsonl);
  const dbBefore = await db.cpuUs();
  const window = startWindow();
  const run = await ctx.services.evaluations.createRun(systemActor(workspaceId), { datasetId: dataset.id, personaId, concurrency: 4, judge });
  await ctx.services.evaluations.idle();
  const measured = window();
  const dbAfter = await db.cpuUs();
  const done = await ctx.services.evaluations.getRun(workspaceId, run.id);
  if (done.status !== 'completed' || done.progress.done !== CASES) throw new Error(`the run ended ${done.status} with ${done.progress.done}/${CASES} cases: ${done.error ?? ''}`);
  const latencies = (await ctx.db.kysely.selectFrom('eval_results').select('latency_ms').where('run_id', '=', run.id).execute()).map((r) => r.latency_ms);
  const seconds = measured.elapsedMs / 1000;
  const s = done.summary!;
  return metricRow({
    name: labelled(label, db.backend),
    metric: 'seconds',
    value: Math.round(seconds * 100) / 100,
    ...(judge ? {} : { target: { kind: 'max' as const, value: TARGET_SECONDS } }),
    operations: CASES,
    window: measured,
    latenciesMs: latencies,
    backend: db.backend.kind,
    databaseCpuUs: dbBefore === null || dbAfter === null ? null : dbAfter - dbBefore,
    notes: [
      `${Math.round(CASES / seconds)} cases/s at concurrency 4; pass rate ${s.passRate === null ? '—' : s.passRate.toFixed(3)}, judge ${s.judge}; case latency p50/p95 from each case's own answer time`,
    ],
  });
}

async function runOn(db: BackendDatabase, options: BenchOptions): Promise<MetricRow[]> {
  const fake = await startFakeModel({ cpu: options.pinning?.load });
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchboard-bench-evaluations-'));
  let ctx: AppContext | undefined;
  try {
    ctx = await createContext(
      loadConfig({ SWITCHBOARD_DATA_DIR: dataDir, LOG_LEVEL: 'silent', SWITCHBOARD_RATE_LIMIT: '0', OPENAI_API_KEY: 'sk-bench-not-a-real-key', OPENAI_BASE_URL: fake.baseUrl, ...db.env }),
    );
    if (ctx.llm.provider !== 'openai') throw new Error(`expected the openai model client, got ${ctx.llm.provider}`);
    const { workspace } = await ctx.services.auth.createWorkspace('bench');
    const persona = await ctx.services.personas.create(systemActor(workspace.id), { name: 'Help-centre assistant', instructions: 'Answer from the help-centre articles.', traits: [], tools: [] });
    process.stdout.write(`  ${db.backend.label}: ${SOURCES} articles... `);
    for (const source of chatSources(SOURCES)) await ctx.services.knowledge.create(systemActor(workspace.id), source);
    await ctx.services.knowledge.idle();
    process.stdout.write('ready; runs... ');
    const rows = [
      await runOnce(ctx, workspace.id, persona.id, false, `evaluation run, ${CASES.toLocaleString('en-US')} cases`, db),
      await runOnce(ctx, workspace.id, persona.id, true, `evaluation run, ${CASES.toLocaleString('en-US')} cases, model as judge`, db),
    ];
    process.stdout.write('done\n');
    return rows;
  } finally {
    await ctx?.close();
    await fake.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

export async function run(options: BenchOptions): Promise<BenchRow[]> {
  const out: MetricRow[] = [];
  for (const backend of options.backends) out.push(...(await withBackendDatabase(backend, (db) => runOn(db, options))));
  console.log(`\n${metricTable(out)}`);
  return out;
}
