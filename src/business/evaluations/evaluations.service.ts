/**
 * Datasets and evaluation runs (issue 28): a persona version answers every case of a dataset in the
 * background, each answer is scored (scorers.ts, and the model as judge where a case has a rubric),
 * and two runs over one dataset are compared case by case (paired.ts).
 *
 * A run is leased like a knowledge source: the instance that takes it renews its lease while it
 * works; a run whose lease lapses (its instance died) is taken over by another instance, or by the
 * same one after a restart, and resumes with the cases that have no result yet (results are kept
 * once per case). Cancelling marks the run; the instance running it sees that within a second and
 * stops starting cases. Answers are not sessions: nothing a run does shows in analytics.
 */
import type { PersonaRef, PersonaService } from '../../core/personas/personas.service.js';
import type { Actor } from '../../core/auth/actor.js';
import { type AuditEntry, auditRow } from '../../core/audit/audit.js';
import { formatPersonaRef, parsePersonaRef } from '../../core/personas/personas.service.js';
import type { Agent } from '../../core/chat/agent.js';
import type { SessionService } from '../../core/chat/sessions.service.js';
import type { DatasetCaseRow, DatasetRow, EvalResultRow, EvalRunRow } from '../../db/schema.js';
import { AppError, ConflictError, NotFoundError, ValidationError } from '../../errors.js';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import type { Logger } from 'pino';
import { mapPage, type Page, type PageRequest } from '../../lib/pagination.js';
import type { ChatMessage, LlmClient } from '../../llm/llm-client.js';
import { nearestRankPercentiles } from '../analytics/analytics.buckets.js';
import { canonicalCase, caseInput, casesToCsv, casesToJsonl, type EvalCase, evalCaseSchema, parseCasesCsv, parseCasesJsonl } from './cases.js';
import type {
  CaseFromSessionInput,
  Comparison,
  CreateDatasetInput,
  CreateRunInput,
  Dataset,
  DatasetCase,
  EvalResult,
  EvalRun,
  RunSummary,
} from './evaluations.schemas.js';
import { MAX_DATASET_CASES } from './evaluations.schemas.js';
import type { EvaluationStore } from './evaluations.store.js';
import { judgeMessages, parseJudgeReply } from './judge.js';
import { comparePaired } from './paired.js';
import { MEASUREMENT_SCORERS, meanScore, overallPass, type Score, scoreAnswer } from './scorers.js';

export function toDataset(row: DatasetRow): Dataset {
  return { id: row.id, name: row.name, description: row.description, caseCount: row.case_count, createdAt: row.created_at, updatedAt: row.updated_at };
}

export function toDatasetCase(row: DatasetCaseRow): DatasetCase {
  return { id: row.id, datasetId: row.dataset_id, position: row.position, case: JSON.parse(row.body) as EvalCase, sessionId: row.session_id, createdAt: row.created_at };
}

export function toEvalRun(row: EvalRunRow): EvalRun {
  return {
    id: row.id,
    datasetId: row.dataset_id,
    personaId: row.persona_id,
    personaVersion: row.persona_version,
    status: row.status,
    progress: { done: row.done, total: row.total },
    concurrency: row.concurrency,
    judge: row.judge === 1,
    summary: row.summary === null ? null : (JSON.parse(row.summary) as RunSummary),
    error: row.error,
    createdBy: row.created_by,
    createdAt: row.created_at,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
  };
}

/** What a case asked: its input, or its conversation's last user turn. */
function questionOf(body: string): string {
  const turns = caseInput(JSON.parse(body) as EvalCase).messages;
  return turns[turns.length - 1]!.content.slice(0, QUESTION_MAX);
}

function toEvalResult(row: EvalResultRow, input: string | null): EvalResult {
  return {
    caseId: row.case_id,
    position: row.position,
    input,
    passed: row.passed === null ? null : row.passed === 1,
    score: row.score,
    answer: row.answer,
    sources: JSON.parse(row.sources) as EvalResult['sources'],
    scores: JSON.parse(row.scores) as Score[],
    latencyMs: row.latency_ms,
    tokens: { prompt: row.prompt_tokens, completion: row.completion_tokens },
    error: row.error,
  };
}

/** A judge's 1–5 grade passes from 4 up: (4 − 1) / 4. */
const JUDGE_PASS = 0.75;
/** Runs an instance works on at once; more wait their turn (queued). */
const RUNS_AT_ONCE = 2;
/** How often a running run re-reads its status (a cancel from another instance) and records progress. */
const CHECK_MS = 1_000;
/** Times a run may be taken up before it is failed: one that keeps stopping its instance must not loop. */
const MAX_ATTEMPTS = 5;
const CLAIM_BATCH = 10;
/** A case's question as results and comparisons show it. */
const QUESTION_MAX = 500;
/** A case's answer is cut at this many characters when kept (the scores saw all of it). */
const ANSWER_MAX = 32_000;

export interface EvaluationServiceDeps {
  store: EvaluationStore;
  personas: PersonaService;
  sessions: SessionService;
  agent: Agent;
  llm: LlmClient;
  clock: Clock;
  ids: IdGenerator;
  logger: Logger;
  /** `shared`: other instances use the database too (PostgreSQL), so only lapsed leases are taken over. */
  leases: { owner: string; ms: number; shared: boolean };
}

export function createEvaluationService(deps: EvaluationServiceDeps) {
  const { store, personas, clock, ids, leases, logger } = deps;
  const now = () => clock.now().toISOString();
  const leaseUntil = () => new Date(clock.now().getTime() + leases.ms).toISOString();
  /** Runs this instance is working on, by id: aborting one stops starting its cases; `stopped` settles when its work has. */
  const active = new Map<string, { abort: AbortController; stopped: Promise<void> }>();
  const waiting: string[] = [];
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  const idleWaiters: Array<() => void> = [];

  async function findDataset(workspaceId: string, id: string): Promise<DatasetRow> {
    const row = await store.findDataset(workspaceId, id);
    if (!row) throw new NotFoundError('Dataset', id);
    return row;
  }

  async function findRun(workspaceId: string, id: string): Promise<EvalRunRow> {
    const row = await store.findRun(workspaceId, id);
    if (!row) throw new NotFoundError('Evaluation run', id);
    return row;
  }

  const caseRows = (workspaceId: string, datasetId: string, cases: EvalCase[], first: number, at: string, sessionId: string | null = null): DatasetCaseRow[] =>
    cases.map((c, i) => ({
      id: ids('dsc'),
      workspace_id: workspaceId,
      dataset_id: datasetId,
      position: first + i,
      body: JSON.stringify(canonicalCase(c)),
      session_id: sessionId,
      created_at: at,
    }));

  /** `event`: the append's audit event, written in its transaction. */
  async function append(actor: Actor, datasetId: string, cases: EvalCase[], event: AuditEntry, sessionId: string | null = null): Promise<DatasetCaseRow[]> {
    const workspaceId = actor.workspaceId;
    for (let attempt = 1; ; attempt++) {
      try {
        const at = now();
        const make = (first: number) => caseRows(workspaceId, datasetId, cases, first, at, sessionId);
        // A case added: the event names it (its id is made with the rows).
        const audit = (rows: DatasetCaseRow[]) =>
          auditRow(ids, clock, actor, event.target.id === null ? { ...event, target: { type: event.target.type, id: rows[0]?.id ?? null } } : event);
        const rows = await store.appendCases(workspaceId, datasetId, make, MAX_DATASET_CASES, at, audit);
        if (rows === null) throw new NotFoundError('Dataset', datasetId);
        if (rows === false) throw new ConflictError(`Dataset ${datasetId} would hold more than ${MAX_DATASET_CASES.toLocaleString('en-US')} cases; split it.`);
        return rows;
      } catch (err) {
        // Two appends took the same positions: the unique index refused one, which tries again after the other.
        if (attempt < 5 && !(err instanceof AppError) && /unique|duplicate/i.test(String((err as Error).message))) continue;
        throw err;
      }
    }
  }

  /** What the judge makes of one answer (null score when the model could not grade it). */
  async function judge(c: EvalCase, answer: string, signal: AbortSignal): Promise<Score> {
    try {
      let text = '';
      for await (const event of deps.llm.stream({ model: deps.llm.defaultModel, messages: judgeMessages(c, answer) as ChatMessage[], temperature: 0, stream: false, signal })) {
        if (event.type === 'text') text += event.text;
      }
      const verdict = parseJudgeReply(text);
      if (!verdict) return { scorer: 'llm_judge', value: null, passed: null, detail: 'the judge’s reply could not be read as a grade' };
      return { scorer: 'llm_judge', value: verdict.score, passed: verdict.score >= JUDGE_PASS, detail: verdict.reason };
    } catch (err) {
      if (signal.aborted) throw err;
      return { scorer: 'llm_judge', value: null, passed: null, detail: `the judge failed: ${err instanceof AppError ? err.message : 'unexpected error'}` };
    }
  }

  /** Answers and scores one case; the model's failure is the case's result, not the run's. */
  async function runCase(run: EvalRunRow, persona: Awaited<ReturnType<PersonaService['getAt']>>, row: DatasetCaseRow, signal: AbortSignal): Promise<void> {
    const c = JSON.parse(row.body) as EvalCase;
    const turns = caseInput(c).messages;
    const last = turns[turns.length - 1]!;
    const t0 = performance.now();
    let text = '';
    let sources: { sourceId: string; sourceName: string }[] = [];
    let usage = { promptTokens: 0, completionTokens: 0 };
    let error: string | null = null;
    try {
      const outcome = await deps.agent.run(
        { workspaceId: run.workspace_id, persona, history: turns.slice(0, -1), message: last.content, enableTools: false, signal, streamed: false },
        () => {},
      );
      text = outcome.content;
      sources = outcome.sources.map((s) => ({ sourceId: s.sourceId, sourceName: s.sourceName }));
      usage = outcome.usage;
    } catch (err) {
      if (signal.aborted) throw err;
      error = err instanceof AppError ? `${err.code}: ${err.message}` : 'internal: the answer failed unexpectedly';
    }
    const latencyMs = Math.round(performance.now() - t0);
    const scores = scoreAnswer(c, { text, sources, latencyMs, promptTokens: usage.promptTokens, completionTokens: usage.completionTokens, error });
    if (c.rubric !== undefined && run.judge === 1 && error === null) {
      scores.push(
        deps.llm.provider === 'offline'
          ? { scorer: 'llm_judge', value: null, passed: null, detail: 'skipped: the offline model cannot grade; configure a model (SWITCHBOARD_MODEL / OPENAI_*)' }
          : await judge(c, text, signal),
      );
    }
    const passed = overallPass(scores);
    await store.insertResult({
      run_id: run.id,
      case_id: row.id,
      position: row.position,
      passed: passed === null ? null : passed ? 1 : 0,
      score: meanScore(scores),
      answer: text.length > ANSWER_MAX ? text.slice(0, ANSWER_MAX) : text,
      sources: JSON.stringify(sources),
      scores: JSON.stringify(scores),
      latency_ms: latencyMs,
      prompt_tokens: usage.promptTokens,
      completion_tokens: usage.completionTokens,
      error,
      created_at: now(),
    });
  }

  function summarize(results: EvalResultRow[], judgeOn: boolean, offline: boolean): RunSummary {
    const byScorer = new Map<string, { cases: number; sum: number; passed: number; checks: boolean }>();
    let judged = false;
    for (const r of results) {
      for (const s of JSON.parse(r.scores) as Score[]) {
        if (s.scorer === 'llm_judge') judged = true;
        if (s.value === null) continue;
        const e = byScorer.get(s.scorer) ?? { cases: 0, sum: 0, passed: 0, checks: false };
        e.cases++;
        e.sum += s.value;
        if (s.passed !== null) e.checks = true;
        if (s.passed === true) e.passed++;
        byScorer.set(s.scorer, e);
      }
    }
    const checked = results.filter((r) => r.passed !== null);
    const passed = checked.filter((r) => r.passed === 1).length;
    const scored = results.filter((r) => r.score !== null);
    const [p50, p95] = nearestRankPercentiles(
      results.filter((r) => r.error === null).map((r) => r.latency_ms),
      [0.5, 0.95],
    );
    return {
      cases: results.length,
      passed,
      failed: checked.length - passed,
      errors: results.filter((r) => r.error !== null).length,
      passRate: checked.length > 0 ? passed / checked.length : null,
      meanScore: scored.length > 0 ? scored.reduce((a, r) => a + r.score!, 0) / scored.length : null,
      latencyMs: { p50: p50 ?? null, p95: p95 ?? null },
      tokens: { prompt: results.reduce((a, r) => a + r.prompt_tokens, 0), completion: results.reduce((a, r) => a + r.completion_tokens, 0) },
      scorers: [...byScorer.entries()]
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([scorer, e]) => ({ scorer, cases: e.cases, mean: e.sum / e.cases, passed: e.checks && !MEASUREMENT_SCORERS.has(scorer) ? e.passed : null })),
      judge: !judgeOn || !judged ? 'off' : offline ? 'skipped' : 'used',
    };
  }

  /** Works through a run this instance holds the lease of, to its end, a cancel, or this instance's close. */
  async function work(runId: string, abort: AbortController): Promise<void> {
    const run = await store.runById(runId);
    if (!run || (run.status !== 'queued' && run.status !== 'running') || run.lease_owner !== leases.owner) return;
    if (run.attempts > MAX_ATTEMPTS) {
      await store.updateRun(run.id, leases.owner, { status: 'failed', error: `The run was interrupted ${run.attempts - 1} times; start it again.`, finished_at: now() });
      return;
    }
    let persona;
    try {
      persona = await personas.getAt(run.workspace_id, run.persona_id, run.persona_version);
    } catch {
      await store.updateRun(run.id, leases.owner, { status: 'failed', error: `Persona ${run.persona_id}@${run.persona_version} no longer exists.`, finished_at: now() });
      return;
    }
    await store.updateRun(run.id, leases.owner, { status: 'running', started_at: run.started_at ?? now() });
    const answered = await store.answeredCases(run.id);
    const todo = (await store.allCases(run.workspace_id, run.dataset_id)).filter((c) => !answered.has(c.id)).slice(0, Math.max(0, run.total - answered.size));
    let done = answered.size;
    let next = 0;
    // Progress and another instance's cancel, once a second.
    const check = setInterval(() => {
      void (async () => {
        const current = await store.runById(run.id);
        if (!current || current.status !== 'running' || current.lease_owner !== leases.owner) abort.abort();
        else await store.updateRun(run.id, leases.owner, { done });
      })().catch((err: unknown) => logger.warn({ err: (err as Error).message, runId: run.id }, 'evaluation run: status check failed'));
    }, CHECK_MS);
    check.unref();
    let failure: unknown = null;
    try {
      const worker = async () => {
        while (!abort.signal.aborted && next < todo.length) {
          const row = todo[next++]!;
          await runCase(run, persona, row, abort.signal);
          done++;
        }
      };
      await Promise.all(Array.from({ length: Math.min(run.concurrency, Math.max(1, todo.length)) }, worker));
    } catch (err) {
      // A case cut short by a cancel (or this instance closing) is no failure: it has no result and is answered again if the run resumes.
      if (!abort.signal.aborted) failure = err;
    } finally {
      clearInterval(check);
    }
    if (failure !== null) {
      logger.error({ err: failure, runId: run.id }, 'evaluation run failed');
      await store.updateRun(run.id, leases.owner, { status: 'failed', error: 'The run failed unexpectedly; see the server log.', done, finished_at: now() });
      return;
    }
    if (abort.signal.aborted) {
      // Cancelled (the row says so already), or this instance is closing: the run stays leased to lapse, or is handed over.
      const current = await store.runById(run.id);
      if (current?.status === 'cancelled') await finishCancelled(current);
      return;
    }
    const results = await store.allResults(run.id);
    await store.updateRun(run.id, leases.owner, {
      status: 'completed',
      done: results.length,
      summary: JSON.stringify(summarize(results, run.judge === 1, deps.llm.provider === 'offline')),
      finished_at: now(),
      lease_owner: null,
      lease_until: null,
    });
  }

  /** A cancelled run keeps what it answered, summarized. */
  async function finishCancelled(run: EvalRunRow): Promise<void> {
    const results = await store.allResults(run.id);
    await store.setSummary(run.id, results.length, JSON.stringify(summarize(results, run.judge === 1, deps.llm.provider === 'offline')));
  }

  /** Starts waiting runs while fewer than RUNS_AT_ONCE run here. */
  function pump(): void {
    while (!closed && active.size < RUNS_AT_ONCE && waiting.length > 0) {
      const id = waiting.shift()!;
      if (active.has(id)) continue;
      const abort = new AbortController();
      const stopped = work(id, abort).catch((err: unknown) => logger.error({ err, runId: id }, 'evaluation run failed'));
      active.set(id, { abort, stopped });
      void stopped.finally(() => {
        active.delete(id);
        pump();
        if (active.size === 0 && waiting.length === 0) for (const w of idleWaiters.splice(0)) w();
      });
    }
  }

  function enqueue(id: string): void {
    if (!waiting.includes(id) && !active.has(id)) waiting.push(id);
    pump();
  }

  /** `all`: every unfinished run, whoever held it (a start on SQLite: one process, so none is another's). */
  async function takeOverLapsed(all: boolean): Promise<number> {
    let taken = 0;
    for (;;) {
      const claimed = await store.claimLapsed(leases.owner, now(), leaseUntil(), CLAIM_BATCH, all);
      for (const id of claimed) enqueue(id);
      taken += claimed.length;
      if (claimed.length < CLAIM_BATCH) return taken;
    }
  }

  return {
    // Datasets.
    async createDataset(actor: Actor, input: CreateDatasetInput): Promise<Dataset> {
      const workspaceId = actor.workspaceId;
      const at = now();
      const row: DatasetRow = { id: ids('dst'), workspace_id: workspaceId, name: input.name, description: input.description ?? null, case_count: input.cases.length, created_at: at, updated_at: at };
      await store.insertDataset(row, caseRows(workspaceId, row.id, input.cases, 1, at), auditRow(ids, clock, actor, { action: 'dataset.create', target: { type: 'dataset', id: row.id } }));
      return toDataset(row);
    },
    listDatasets: async (workspaceId: string, page: PageRequest, nameContains?: string): Promise<Page<Dataset>> =>
      mapPage(await store.listDatasets(workspaceId, page, nameContains), toDataset),
    getDataset: async (workspaceId: string, id: string): Promise<Dataset> => toDataset(await findDataset(workspaceId, id)),
    async updateDataset(actor: Actor, id: string, input: { name?: string | undefined; description?: string | null | undefined }): Promise<Dataset> {
      const workspaceId = actor.workspaceId;
      const row = await findDataset(workspaceId, id);
      const patch: Partial<DatasetRow> = { updated_at: now() };
      if (input.name !== undefined) patch.name = input.name;
      if (input.description !== undefined) patch.description = input.description;
      const changes = (['name', 'description'] as const).filter((f) => input[f] !== undefined);
      await store.updateDataset(workspaceId, id, patch, auditRow(ids, clock, actor, { action: 'dataset.update', target: { type: 'dataset', id }, changes }));
      return toDataset({ ...row, ...patch });
    },
    async deleteDataset(actor: Actor, id: string): Promise<void> {
      const workspaceId = actor.workspaceId;
      await findDataset(workspaceId, id);
      const busy = await store.unfinishedRun(workspaceId, { datasetId: id });
      if (busy) throw new ConflictError(`Dataset ${id} is being evaluated by run ${busy.id}; cancel it first.`);
      if (!(await store.deleteDataset(workspaceId, id, auditRow(ids, clock, actor, { action: 'dataset.delete', target: { type: 'dataset', id } })))) throw new NotFoundError('Dataset', id);
    },

    // Cases.
    async addCase(actor: Actor, datasetId: string, c: EvalCase): Promise<DatasetCase> {
      return toDatasetCase((await append(actor, datasetId, [c], { action: 'dataset_case.create', target: { type: 'dataset_case', id: null } }))[0]!);
    },
    async listCases(workspaceId: string, datasetId: string, page: PageRequest): Promise<Page<DatasetCase>> {
      await findDataset(workspaceId, datasetId);
      return mapPage(await store.listCases(workspaceId, datasetId, page), toDatasetCase);
    },
    async deleteCase(actor: Actor, datasetId: string, caseId: string): Promise<void> {
      const workspaceId = actor.workspaceId;
      await findDataset(workspaceId, datasetId);
      const event = auditRow(ids, clock, actor, { action: 'dataset_case.delete', target: { type: 'dataset_case', id: caseId } });
      if (!(await store.deleteCase(workspaceId, datasetId, caseId, now(), event))) throw new NotFoundError('Case', caseId);
    },
    /** Appends every case of a JSONL or CSV file, or none when any is invalid (400 naming line and field). */
    async importCases(actor: Actor, datasetId: string, format: 'jsonl' | 'csv', content: string): Promise<{ imported: number; dataset: Dataset }> {
      const workspaceId = actor.workspaceId;
      await findDataset(workspaceId, datasetId);
      const { cases } = format === 'jsonl' ? parseCasesJsonl(content, { maxCases: MAX_DATASET_CASES }) : parseCasesCsv(content, { maxCases: MAX_DATASET_CASES });
      await append(actor, datasetId, cases, { action: 'dataset.import', target: { type: 'dataset', id: datasetId } });
      return { imported: cases.length, dataset: toDataset(await findDataset(workspaceId, datasetId)) };
    },
    async exportCases(workspaceId: string, datasetId: string, format: 'jsonl' | 'csv'): Promise<{ body: string; filename: string }> {
      const ds = await findDataset(workspaceId, datasetId);
      const cases = (await store.allCases(workspaceId, datasetId)).map((r) => JSON.parse(r.body) as EvalCase);
      return { body: format === 'jsonl' ? casesToJsonl(cases) : casesToCsv(cases), filename: `${ds.id}.${format}` };
    },
    /**
     * A real conversation as a regression case: the turns up to the answer's question become the
     * input, and the rubric says how the answer was rated (a badly rated answer becomes a case in
     * one click from the console).
     */
    async caseFromSession(actor: Actor, datasetId: string, input: CaseFromSessionInput): Promise<DatasetCase> {
      const workspaceId = actor.workspaceId;
      await findDataset(workspaceId, datasetId);
      const session = await deps.sessions.get(workspaceId, input.sessionId);
      const turns = session.messages.filter((m) => (m.role === 'user' || m.role === 'assistant') && m.toolCalls === undefined);
      const at = input.messageId === undefined ? turns.findLastIndex((m) => m.role === 'assistant') : turns.findIndex((m) => m.id === input.messageId && m.role === 'assistant');
      if (at < 0) throw input.messageId === undefined ? new ConflictError(`Session ${input.sessionId} has no answer yet.`) : new NotFoundError('Answer', input.messageId);
      const before = turns.slice(0, at).slice(-20);
      while (before.length > 0 && before[0]!.role !== 'user') before.shift();
      if (before.length === 0 || before[before.length - 1]!.role !== 'user') throw new ConflictError(`The answer ${turns[at]!.id} has no question before it.`);
      const rating = await store.answerRating(workspaceId, turns[at]!.id);
      const answer = turns[at]!.content;
      const c: EvalCase = {
        ...(before.length === 1 ? { input: before[0]!.content } : { messages: before.map((m) => ({ role: m.role as 'user' | 'assistant', content: m.content })) }),
        ...(input.expected !== undefined ? { expected: input.expected } : {}),
        ...(input.mustContain !== undefined ? { mustContain: input.mustContain } : {}),
        ...(input.mustNotContain !== undefined ? { mustNotContain: input.mustNotContain } : {}),
        rubric:
          input.rubric ??
          `A user ${rating === null ? 'saw' : `rated ${rating}/5`} this earlier answer to the same question; a good answer is correct, helpful and does better:\n${answer.slice(0, 3000)}`,
        tags: ['from-session', ...(rating === null ? [] : [`rating-${rating}`])],
      };
      const parsed = evalCaseSchema.safeParse(c);
      if (!parsed.success) throw ValidationError.field('sessionId', 'holds a conversation that does not fit a case (too long)');
      return toDatasetCase((await append(actor, datasetId, [parsed.data], { action: 'dataset_case.create', target: { type: 'dataset_case', id: null } }, input.sessionId))[0]!);
    },

    // Runs.
    /** `actor`'s id is kept as the run's `createdBy`. */
    async createRun(actor: Actor, input: CreateRunInput): Promise<EvalRun> {
      const workspaceId = actor.workspaceId;
      const ds = await findDataset(workspaceId, input.datasetId);
      const ref: PersonaRef = parsePersonaRef(input.personaId);
      const persona = await personas.getAt(workspaceId, ref.personaId, ref.version);
      if (ds.case_count === 0) throw ValidationError.field('datasetId', 'names a dataset with no cases');
      const row: EvalRunRow = {
        id: ids('evr'),
        workspace_id: workspaceId,
        dataset_id: ds.id,
        persona_id: persona.id,
        persona_version: persona.version,
        status: 'queued',
        total: ds.case_count,
        done: 0,
        concurrency: input.concurrency,
        judge: input.judge ? 1 : 0,
        summary: null,
        error: null,
        created_by: actor.id,
        created_at: now(),
        started_at: null,
        finished_at: null,
        lease_owner: leases.owner,
        lease_until: leaseUntil(),
        attempts: 1,
      };
      await store.insertRun(row, auditRow(ids, clock, actor, { action: 'eval_run.create', target: { type: 'eval_run', id: row.id } }));
      enqueue(row.id);
      return toEvalRun(row);
    },
    getRun: async (workspaceId: string, id: string): Promise<EvalRun> => toEvalRun(await findRun(workspaceId, id)),
    /** Why a persona may not be deleted now (a run is answering with it), or null. */
    async personaInUse(workspaceId: string, personaId: string): Promise<string | null> {
      const run = await store.unfinishedRun(workspaceId, { personaId });
      return run ? `Persona ${personaId} is answering evaluation run ${run.id}; cancel it first.` : null;
    },
    async listRuns(workspaceId: string, page: PageRequest, filter: Parameters<EvaluationStore['listRuns']>[2]): Promise<Page<EvalRun>> {
      if (filter.datasetId !== undefined) await findDataset(workspaceId, filter.datasetId);
      if (filter.personaId !== undefined) await personas.get(workspaceId, filter.personaId);
      return mapPage(await store.listRuns(workspaceId, page, filter), toEvalRun);
    },
    async cancelRun(actor: Actor, id: string): Promise<EvalRun> {
      const workspaceId = actor.workspaceId;
      const row = await findRun(workspaceId, id);
      const event = auditRow(ids, clock, actor, { action: 'eval_run.cancel', target: { type: 'eval_run', id }, changes: ['status'] });
      if (!(await store.cancelRun(workspaceId, id, now(), event))) throw new ConflictError(`Evaluation run ${id} is ${row.status}; only a queued or running run can be cancelled.`);
      // A run working here stops first (its case under way is cut short, keeping no result), so the
      // answer carries the summary of everything it answered; one working elsewhere may still add a case.
      const local = active.get(id);
      if (local) {
        local.abort.abort();
        await local.stopped;
      }
      await finishCancelled({ ...row, status: 'cancelled' });
      return toEvalRun(await findRun(workspaceId, id));
    },
    async results(workspaceId: string, id: string, page: PageRequest, passed?: boolean): Promise<Page<EvalResult>> {
      await findRun(workspaceId, id);
      const rows = await store.listResults(id, page, passed);
      const bodies = await store.caseBodies(workspaceId, rows.data.map((r) => r.case_id));
      return mapPage(rows, (r) => {
        const body = bodies.get(r.case_id);
        return toEvalResult(r, body === undefined ? null : questionOf(body));
      });
    },
    /** Two runs over one dataset, case by case: which version wins, by how much, and how sure. */
    async compare(workspaceId: string, aId: string, bId: string): Promise<Comparison> {
      const [a, b] = [await findRun(workspaceId, aId), await findRun(workspaceId, bId)];
      if (a.dataset_id !== b.dataset_id) throw ValidationError.field('b', `is a run over dataset ${b.dataset_id}, not ${a.dataset_id}: only runs over one dataset compare case by case`);
      const [ra, rb] = [await store.allResults(a.id), await store.allResults(b.id)];
      const bByCase = new Map(rb.map((r) => [r.case_id, r]));
      const pairs = ra.filter((r) => r.score !== null && bByCase.get(r.case_id)?.score != null).map((r) => [r, bByCase.get(r.case_id)!] as const);
      const result = comparePaired(
        pairs.map(([x]) => x.score!),
        pairs.map(([, y]) => y.score!),
      );
      const cases = new Map((await store.allCases(workspaceId, a.dataset_id)).map((c) => [c.id, c]));
      const inputOf = (caseId: string) => {
        const c = cases.get(caseId);
        return c ? questionOf(c.body) : '(case deleted)';
      };
      const changed = pairs
        .filter(([x, y]) => x.score !== y.score)
        .sort(([x1, y1], [x2, y2]) => Math.abs(y2.score! - x2.score!) - Math.abs(y1.score! - x1.score!) || x1.position - x2.position)
        .slice(0, 50)
        .map(([x, y]) => ({ caseId: x.case_id, position: x.position, a: x.score, b: y.score, input: inputOf(x.case_id) }));
      const side = (run: EvalRunRow, rows: EvalResultRow[]) => {
        const s = summarize(rows, false, true);
        return { runId: run.id, personaId: run.persona_id, personaVersion: run.persona_version, meanScore: s.meanScore, passRate: s.passRate };
      };
      const label = (run: EvalRunRow) => formatPersonaRef({ personaId: run.persona_id, version: run.persona_version });
      const pct = (x: number) => `${(x * 100).toFixed(1)} points`;
      const [lo, hi] = result.bootstrap.interval ?? [null, null];
      const verdict =
        result.n === 0
          ? 'No case was scored by both runs.'
          : result.winner === null
            ? `No clear winner over ${result.n} cases: B − A = ${pct(result.meanDifference ?? 0)}${lo !== null ? ` (95 % interval ${pct(lo)} to ${pct(hi!)})` : ''}.`
            : `${result.winner === 'B' ? `B (${label(b)})` : `A (${label(a)})`} wins over ${result.n} cases by ${pct(Math.abs(result.meanDifference ?? 0))} of mean score (95 % interval of B − A ${pct(lo!)} to ${pct(hi!)}; sign test p = ${result.signTest.pValue?.toPrecision(2)}).`;
      return {
        a: side(a, ra),
        b: side(b, rb),
        pairs: result.n,
        meanDifference: result.meanDifference,
        bootstrap: result.bootstrap,
        signTest: result.signTest,
        winner: result.winner,
        verdict,
        changed,
      };
    },

    /**
     * A server's start: takes up the runs a previous process left unfinished (on SQLite all of them;
     * on PostgreSQL those whose lease lapsed), then renews this instance's leases and takes over
     * lapsed ones three times a lease.
     */
    async start(): Promise<void> {
      await takeOverLapsed(!leases.shared);
      timer = setInterval(() => {
        void (async () => {
          await store.renewLeases(leases.owner, leaseUntil());
          await takeOverLapsed(false);
        })().catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'evaluation leases: renewal or takeover failed; retrying'));
      }, Math.max(1, Math.floor(leases.ms / 3)));
      timer.unref();
    },
    /** Resolves when this instance runs no evaluation (tests, the bench). */
    idle: (): Promise<void> => (active.size === 0 && waiting.length === 0 ? Promise.resolve() : new Promise((resolve) => idleWaiters.push(resolve))),
    /**
     * Stops starting cases; with other instances on the database, hands this one's runs over at
     * once (their leases end now). On SQLite the next start takes them up.
     */
    async close(): Promise<void> {
      closed = true;
      clearInterval(timer);
      waiting.length = 0;
      const held = active.size > 0;
      for (const { abort } of active.values()) abort.abort();
      await this.idle();
      if (held && leases.shared) await store.renewLeases(leases.owner, now());
    },
  };
}

export type EvaluationService = ReturnType<typeof createEvaluationService>;
