// Issue 28: datasets of evaluation cases (create, import and export JSONL and CSV, a session's answer
// as a case) and evaluation runs (a persona version answers every case in the background, every
// score kept, cancellable, compared case by case), on both backends, another workspace's a 404.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOpenAiChat } from '../../src/llm/openai-chat.js';
import { createOpenAi } from '../../src/llm/openai-client.js';
import { FAKE_OPENAI_KEY, startFakeOpenAi } from '../fakes/openai-server.js';
import { type AppContext, createContext } from '../../src/context.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { gatedModel } from '../helpers/gated-model.js';
import { addSource, createPersona, workspaceOf } from '../helpers/factories.js';
import { testBackends } from '../helpers/postgres.js';
import { expectProblem } from '../helpers/problem.js';

const REFUNDS = 'Refunds are paid within five working days. A refund needs the order number and the receipt.';
const SHIPPING = 'Parcels leave the warehouse every Tuesday. Shipping abroad takes two weeks.';

describe.each(testBackends())('evaluations on $kind', (backend) => {
  let t: TestApp;
  let refundsId: string;
  let other: string;

  beforeAll(async () => {
    t = await createTestApp({ backend });
    refundsId = (await addSource(t, { kind: 'text', name: 'Refund policy', content: REFUNDS })).id;
    await addSource(t, { kind: 'text', name: 'Shipping', content: SHIPPING });
    other = (await t.ctx.services.auth.createWorkspace('other-evals')).key.key;
  });
  afterAll(async () => t?.close());

  const post = (url: string, body: unknown, as?: string) => t.request({ method: 'POST', url, body, ...(as ? { as } : {}) });
  const get = (url: string, as?: string) => t.request({ method: 'GET', url, ...(as ? { as } : {}) });
  const dataset = async (cases: unknown[], name = 'Support') => {
    const res = await post('/datasets', { name, cases });
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as { id: string; caseCount: number };
  };
  /** Starts a run and waits for it to finish. */
  const run = async (body: Record<string, unknown>) => {
    const res = await post('/evaluations/runs', body);
    expect(res.statusCode, res.body).toBe(201);
    await t.ctx.services.evaluations.idle();
    const done = await get(`/evaluations/runs/${res.json().id}`);
    expect(done.statusCode).toBe(200);
    return done.json();
  };
  const allResults = async (runId: string) => (await get(`/evaluations/runs/${runId}/results?limit=100`)).json().data as Array<Record<string, any>>;

  const CASES = [
    { input: 'How long do refunds take?', mustContain: ['five working days'], expectedSources: ['Refund policy'] },
    { input: 'When do parcels leave the warehouse?', mustContain: ['Tuesday'], mustNotContain: ['cannot answer'], expectedSources: [] as string[] },
    { input: 'What does a refund need?', regex: '/order number/i', expectedSources: ['Refund policy'] },
  ].map((c) => (c.expectedSources.length === 0 ? { input: c.input, mustContain: c.mustContain, mustNotContain: c.mustNotContain } : c));

  it('creates datasets with cases, refuses a bad case naming its field, and hides them from another workspace', async () => {
    const ds = await dataset(CASES);
    expect(ds).toMatchObject({ name: 'Support', caseCount: 3, description: null });
    const cases = (await get(`/datasets/${ds.id}/cases`)).json();
    expect(cases.data.map((c: { position: number; case: { input: string } }) => [c.position, c.case.input])).toEqual([
      [1, 'How long do refunds take?'],
      [2, 'When do parcels leave the warehouse?'],
      [3, 'What does a refund need?'],
    ]);
    expectProblem(await post('/datasets', { name: 'Bad', cases: [{ input: 'x' }, { input: 'y', regex: '(' }] }), 400, 'validation_failed', 'cases.1.regex');
    expectProblem(await post('/datasets', { name: 'Bad', cases: [{ input: 'x', messages: [{ role: 'user', content: 'y' }] }] }), 400, 'validation_failed');
    expectProblem(await post(`/datasets/${ds.id}/cases`, { expected: 'no input' }), 400, 'validation_failed');
    const added = await post(`/datasets/${ds.id}/cases`, { messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello!' }, { role: 'user', content: 'Refunds?' }] });
    expect(added.statusCode, added.body).toBe(201);
    expect(added.json()).toMatchObject({ position: 4, datasetId: ds.id });
    expect((await get(`/datasets/${ds.id}`)).json().caseCount).toBe(4);
    expect((await t.request({ method: 'DELETE', url: `/datasets/${ds.id}/cases/${added.json().id}` })).statusCode).toBe(204);
    expect((await get(`/datasets/${ds.id}`)).json().caseCount).toBe(3);

    // The other workspace names its own persona: only the dataset being ours can make the run a 404.
    const theirs = await createPersona(t, { name: 'Theirs' }, other);
    for (const res of [
      await get(`/datasets/${ds.id}`, other),
      await get(`/datasets/${ds.id}/cases`, other),
      await post(`/datasets/${ds.id}/cases`, { input: 'x' }, other),
      await get(`/datasets/${ds.id}/export`, other),
      await post('/evaluations/runs', { datasetId: ds.id, personaId: theirs.id }, other),
    ]) {
      expectProblem(res, 404, 'not_found');
    }
    expect((await get('/datasets', other)).json().data).toEqual([]);
    expect((await get('/datasets?q=SUPP')).json().data.map((d: { id: string }) => d.id)).toContain(ds.id);
    expect((await get('/datasets?q=support%25')).json().data).toEqual([]);
  });

  it('imports JSONL and CSV all or nothing, and exports what it holds', async () => {
    const ds = await dataset([], 'Imported');
    const bad = await post(`/datasets/${ds.id}/import`, { format: 'jsonl', content: '{"input":"ok"}\n{"input":"x","regex":"("}\n' });
    const problem = expectProblem(bad, 400, 'validation_failed', 'cases.1.regex');
    expect(JSON.stringify(problem.errors)).toContain('line 2');
    expect((await get(`/datasets/${ds.id}`)).json().caseCount).toBe(0);

    const jsonl = `${CASES.map((c) => JSON.stringify(c)).join('\n')}\n`;
    expect((await post(`/datasets/${ds.id}/import`, { format: 'jsonl', content: jsonl })).json()).toMatchObject({ imported: 3, dataset: { caseCount: 3 } });
    const csv = 'input,mustContain,tags\n"=HYPERLINK(""x"")",a|b,sheet\nPlain question,,\n';
    expect((await post(`/datasets/${ds.id}/import`, { format: 'csv', content: csv })).json().imported).toBe(2);

    const exported = await get(`/datasets/${ds.id}/export?format=jsonl`);
    expect(exported.headers['content-disposition']).toBe(`attachment; filename="${ds.id}.jsonl"`);
    const lines = exported.body.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.slice(0, 3)).toEqual(CASES);
    expect(lines[3]).toEqual({ input: '=HYPERLINK("x")', mustContain: ['a', 'b'], tags: ['sheet'] });
    const asCsv = await get(`/datasets/${ds.id}/export?format=csv`);
    expect(asCsv.headers['content-type']).toMatch(/^text\/csv/);
    expect(asCsv.body).toContain(`"'=HYPERLINK(""x"")"`); // neutralised for spreadsheets

    // What was exported imports back to the same cases.
    const copy = await dataset([], 'Copy');
    await post(`/datasets/${copy.id}/import`, { format: 'csv', content: asCsv.body });
    const again = await get(`/datasets/${copy.id}/export?format=jsonl`);
    expect(again.body).toBe(exported.body);
    expectProblem(await post(`/datasets/${ds.id}/import`, { format: 'xml', content: 'x' }), 400, 'validation_failed', 'format');
  });

  it('runs a dataset against a persona version: every case answered, scored and kept, with a summary', async () => {
    const p = await createPersona(t, { name: 'Helpdesk' });
    const ds = await dataset(CASES);
    const finished = await run({ datasetId: ds.id, personaId: p.id });
    expect(finished).toMatchObject({ status: 'completed', personaId: p.id, personaVersion: 1, progress: { done: 3, total: 3 }, concurrency: 4, judge: true, error: null });
    expect(finished.summary).toMatchObject({ cases: 3, passed: 3, failed: 0, errors: 0, passRate: 1, judge: 'off' });
    expect(finished.summary.scorers.map((s: { scorer: string }) => s.scorer)).toEqual([
      'latency_ms',
      'must_contain',
      'must_not_contain',
      'regex',
      'retrieval_hit_at_k',
      'retrieval_mrr',
      'tokens',
    ]);
    const results = await allResults(finished.id);
    expect(results.map((r) => [r.position, r.passed])).toEqual([
      [1, true],
      [2, true],
      [3, true],
    ]);
    expect(results[0]!.answer).toContain('five working days');
    expect(results.map((r) => r.input)).toEqual(CASES.map((c) => c.input));
    expect(results[0]!.sources[0]).toEqual({ sourceId: refundsId, sourceName: 'Refund policy' });
    expect(results[0]!.scores.find((s: { scorer: string }) => s.scorer === 'retrieval_hit_at_k')).toMatchObject({ value: 1, passed: true });
    expect(results[0]!.tokens.prompt).toBeGreaterThan(0);
    // Answers of a run are not conversations: analytics and sessions do not see them.
    expect((await get('/sessions')).json().data.filter((s: { personaId: string }) => s.personaId === p.id)).toEqual([]);
    expect((await get(`/evaluations/runs?datasetId=${ds.id}`)).json().data.map((r: { id: string }) => r.id)).toEqual([finished.id]);
    expect((await get(`/evaluations/runs/${finished.id}/results?passed=false`)).json().data).toEqual([]);
    expectProblem(await post(`/evaluations/runs/${finished.id}/cancel`, {}), 409, 'conflict');
    expectProblem(await get(`/evaluations/runs/${finished.id}`, other), 404, 'not_found');
    expectProblem(await get(`/evaluations/runs/${finished.id}/results`, other), 404, 'not_found');
    expectProblem(await post('/evaluations/runs', { datasetId: ds.id, personaId: `${p.id}@7` }), 404, 'not_found');
    expectProblem(await post('/evaluations/runs', { datasetId: ds.id, personaId: p.id, concurrency: 0 }), 400, 'validation_failed', 'concurrency');
    const empty = await dataset([], 'Empty');
    expectProblem(await post('/evaluations/runs', { datasetId: empty.id, personaId: p.id }), 400, 'validation_failed', 'datasetId');
  });

  it('compares a version with its predecessor case by case and names the winner', async () => {
    const p = await createPersona(t, { name: 'Comparer' });
    // Version 2 answers in eight words: the checks that need the passage's sentence fail.
    await t.request({ method: 'PUT', url: `/personas/${p.id}`, body: { maxTokens: 8 } });
    const many = Array.from({ length: 12 }, (_, i) => ({ input: i % 2 === 0 ? 'How long do refunds take?' : 'When do parcels leave the warehouse?', mustContain: [i % 2 === 0 ? 'five working days' : 'Tuesday'] }));
    const ds = await dataset(many, 'Comparison');
    const v1 = await run({ datasetId: ds.id, personaId: `${p.id}@1`, concurrency: 2 });
    const v2 = await run({ datasetId: ds.id, personaId: p.id });
    expect([v1.personaVersion, v2.personaVersion]).toEqual([1, 2]);
    expect(v1.summary.passRate).toBe(1);
    expect(v2.summary.passRate).toBe(0);

    const cmp = await get(`/evaluations/compare?a=${v1.id}&b=${v2.id}`);
    expect(cmp.statusCode, cmp.body).toBe(200);
    const c = cmp.json();
    expect(c).toMatchObject({ pairs: 12, winner: 'A', signTest: { wins: 0, losses: 12, ties: 0 } });
    expect(c.meanDifference).toBeLessThan(0);
    expect(c.bootstrap.interval[1]).toBeLessThan(0);
    expect(c.signTest.pValue).toBeCloseTo(2 / 4096, 8); // two-sided exact: 2 · 0.5^12
    expect(c.verdict).toMatch(new RegExp(`^A \\(${p.id}@1\\) wins over 12 cases`));
    expect(c.changed).toHaveLength(12);
    expect(c.changed[0]).toMatchObject({ position: 1, a: 1, input: 'How long do refunds take?' });

    // Runs over different datasets do not pair.
    const elsewhere = await run({ datasetId: (await dataset(CASES, 'Other')).id, personaId: p.id });
    expectProblem(await get(`/evaluations/compare?a=${v1.id}&b=${elsewhere.id}`), 400, 'validation_failed', 'b');
    expectProblem(await get(`/evaluations/compare?a=${v1.id}&b=${v2.id}`, other), 404, 'not_found');
  });

  it('turns a badly rated answer into a regression case', async () => {
    const p = await createPersona(t, { name: 'Rated' });
    const asked = (await post('/query', { personaId: p.id, message: 'How long do refunds take?' })).json();
    await post(`/sessions/${asked.sessionId}/feedback`, { rating: 1 });
    const ds = await dataset([], 'Regressions');
    const made = await post(`/datasets/${ds.id}/cases/from-session`, { sessionId: asked.sessionId, mustContain: ['five working days'] });
    expect(made.statusCode, made.body).toBe(201);
    expect(made.json()).toMatchObject({ sessionId: asked.sessionId, position: 1, case: { input: 'How long do refunds take?', mustContain: ['five working days'], tags: ['from-session', 'rating-1'] } });
    expect(made.json().case.rubric).toMatch(/^A user rated 1\/5 this earlier answer/);
    expectProblem(await post(`/datasets/${ds.id}/cases/from-session`, { sessionId: asked.sessionId }, other), 404, 'not_found');
    expectProblem(await post(`/datasets/${ds.id}/cases/from-session`, { sessionId: 'ses_nope' }), 404, 'not_found');
    expectProblem(await post(`/datasets/${ds.id}/cases/from-session`, { sessionId: asked.sessionId, messageId: 'msg_nope' }), 404, 'not_found');
  });
});

/** Waits for a condition (bounded), checking every few milliseconds. */
async function until(what: string, ok: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe.each(testBackends())('evaluation runs in the background on $kind', (backend) => {
  /** Ten cases; the third makes the gated model wait until released (or the call is aborted). */
  const TEN = Array.from({ length: 10 }, (_, i) => ({ input: i === 2 ? 'Answer this one slowly.' : `Question ${i}?`, mustContain: ['Answered'] }));

  it('cancels a run: it stops starting cases and keeps, summarized, what it answered; its dataset is not deleted meanwhile', async () => {
    const gated = gatedModel();
    const t = await createTestApp({ backend, overrides: { llm: gated.llm } });
    try {
      const p = await createPersona(t, { name: 'Cancelled' });
      const ds = (await t.request({ method: 'POST', url: '/datasets', body: { name: 'Long', cases: TEN } })).json();
      const id = (await t.request({ method: 'POST', url: '/evaluations/runs', body: { datasetId: ds.id, personaId: p.id, concurrency: 1 } })).json().id;
      await until('the third case to wait', () => gated.state.waiting === 1);
      expectProblem(await t.request({ method: 'DELETE', url: `/datasets/${ds.id}` }), 409, 'conflict');
      expect(expectProblem(await t.request({ method: 'DELETE', url: `/personas/${p.id}` }), 409, 'conflict').detail).toContain(id);
      const cancelled = await t.request({ method: 'POST', url: `/evaluations/runs/${id}/cancel` });
      expect(cancelled.statusCode, cancelled.body).toBe(200);
      // The answer carries the summary of what was answered, as the next read does.
      expect(cancelled.json()).toMatchObject({ status: 'cancelled', progress: { done: 2, total: 10 }, summary: { cases: 2, passed: 2 } });
      await t.ctx.services.evaluations.idle();
      expect(gated.state.aborted).toBe(1);
      const after = (await t.request({ method: 'GET', url: `/evaluations/runs/${id}` })).json();
      expect(after).toMatchObject({ status: 'cancelled', progress: { done: 2, total: 10 }, summary: { cases: 2, passed: 2 } });
      expect((await t.request({ method: 'GET', url: `/evaluations/runs/${id}/results` })).json().data.map((r: { position: number }) => r.position)).toEqual([1, 2]);
      expectProblem(await t.request({ method: 'POST', url: `/evaluations/runs/${id}/cancel` }), 409, 'conflict');
      expect((await t.request({ method: 'DELETE', url: `/datasets/${ds.id}` })).statusCode).toBe(204);
      expectProblem(await t.request({ method: 'GET', url: `/evaluations/runs/${id}` }), 404, 'not_found');
    } finally {
      gated.state.release();
      await t.close();
    }
  });

  it('survives a restart: the next process (or instance) resumes from the cases not yet answered, each answered once', async () => {
    const gated = gatedModel();
    const t = await createTestApp({ backend, overrides: { llm: gated.llm } });
    let next: AppContext | undefined;
    try {
      const p = await createPersona(t, { name: 'Resumed' });
      const ds = (await t.request({ method: 'POST', url: '/datasets', body: { name: 'Restarted', cases: TEN } })).json();
      const id = (await t.request({ method: 'POST', url: '/evaluations/runs', body: { datasetId: ds.id, personaId: p.id, concurrency: 1 } })).json().id;
      const ws = await workspaceOf(t);
      await until('the third case to wait', () => gated.state.waiting === 1);
      // The process stops mid-run: the case under way is cut short and the run handed over.
      await t.ctx.close();
      expect(gated.state.aborted).toBe(1);

      const model = gatedModel();
      model.state.release();
      next = await createContext(t.ctx.config, { llm: model.llm });
      expect((await next.services.evaluations.getRun(ws, id)).status).toBe('running');
      await next.services.evaluations.start();
      await until('the run to finish', async () => (await next!.services.evaluations.getRun(ws, id)).status === 'completed');
      const run = await next.services.evaluations.getRun(ws, id);
      expect(run).toMatchObject({ progress: { done: 10, total: 10 }, summary: { cases: 10, passed: 10 } });
      const rows = await next.db.kysely.selectFrom('eval_results').select(['position']).where('run_id', '=', id).orderBy('position').execute();
      expect(rows.map((r) => r.position)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      // Results are kept once whatever is answered again, so what the model was asked is the proof:
      // the two answered before the restart are not asked again, the one cut short and the rest once each.
      expect(gated.state.asked).toEqual(TEN.slice(0, 3).map((c) => c.input));
      expect(model.state.asked).toEqual(TEN.slice(2).map((c) => c.input));
      expect((await next.db.kysely.selectFrom('eval_runs').select('attempts').where('id', '=', id).executeTakeFirstOrThrow()).attempts).toBe(2);
    } finally {
      gated.state.release();
      await next?.close();
      await t.close();
    }
  });
});

describe('evaluation judge with a model', () => {
  it('grades cases with a rubric through the configured model, and says so when it cannot', async () => {
    const fake = await startFakeOpenAi();
    const llm = createOpenAiChat({ client: createOpenAi({ apiKey: FAKE_OPENAI_KEY, baseUrl: fake.url, maxRetries: 0, timeoutMs: 2_000 }), defaultModel: 'gpt-test' });
    const t = await createTestApp({ overrides: { llm } });
    try {
      const p = await createPersona(t, { name: 'Judged' });
      const ds = (await t.request({ method: 'POST', url: '/datasets', body: { name: 'Rubric', cases: [{ input: 'Refunds?', rubric: 'Mentions five days.' }, { input: 'Parcels?', rubric: 'Mentions Tuesday.' }] } })).json();
      // One case at a time: its answer, then its grade (the second grade unreadable).
      fake.reply({ text: 'Five working days.' }, { text: 'Here: {"score": 5, "reason": "Says five days."}' }, { text: 'On Tuesdays.' }, { text: 'I cannot grade this.' });
      const res = await t.request({ method: 'POST', url: '/evaluations/runs', body: { datasetId: ds.id, personaId: p.id, concurrency: 1 } });
      await t.ctx.services.evaluations.idle();
      const run = (await t.request({ method: 'GET', url: `/evaluations/runs/${res.json().id}` })).json();
      expect(run.summary.judge).toBe('used');
      const results = (await t.request({ method: 'GET', url: `/evaluations/runs/${run.id}/results` })).json().data;
      expect(results[0].scores.find((s: { scorer: string }) => s.scorer === 'llm_judge')).toEqual({ scorer: 'llm_judge', value: 1, passed: true, detail: 'Says five days.' });
      expect(results[1].scores.find((s: { scorer: string }) => s.scorer === 'llm_judge')).toMatchObject({ scorer: 'llm_judge', value: null, passed: null });
      // The judge saw the answer fenced inside its prompt, at temperature 0.
      const judged = fake.requests.filter((r) => r.path === '/v1/chat/completions')[1]!.body as { messages: Array<{ content: string }>; temperature: number };
      expect(judged.temperature).toBe(0);
      expect(judged.messages.map((m) => m.content).join('\n')).toContain('Five working days.');
    } finally {
      await t.close();
      await fake.close();
    }
  });

  it('skips the judge with the offline model and says why', async () => {
    const t = await createTestApp();
    try {
      const p = await createPersona(t, { name: 'Offline judged' });
      const ds = (await t.request({ method: 'POST', url: '/datasets', body: { name: 'Rubric', cases: [{ input: 'Refunds?', rubric: 'Mentions five days.' }] } })).json();
      const res = await t.request({ method: 'POST', url: '/evaluations/runs', body: { datasetId: ds.id, personaId: p.id } });
      await t.ctx.services.evaluations.idle();
      const run = (await t.request({ method: 'GET', url: `/evaluations/runs/${res.json().id}` })).json();
      expect(run.summary.judge).toBe('skipped');
      const [result] = (await t.request({ method: 'GET', url: `/evaluations/runs/${run.id}/results` })).json().data;
      expect(result.scores.find((s: { scorer: string }) => s.scorer === 'llm_judge')).toMatchObject({ value: null, passed: null, detail: expect.stringMatching(/^skipped: the offline model cannot grade/) });
    } finally {
      await t.close();
    }
  });
});
