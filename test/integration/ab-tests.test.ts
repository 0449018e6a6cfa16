// API.md §8 A/B tests over HTTP and MCP: the draft → running → completed life, routing of
// questions (sticky, following the split), results and the significance rule, the persona-delete 409.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assignVariant } from '../../src/business/ab-tests/ab-tests.service.js';
import { moments, welchTest } from '../../src/business/ab-tests/stats.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { createAbTest, createPersona } from '../helpers/factories.js';
import { callError, callOk, connectInMemory } from '../helpers/mcp.js';
import { expectProblem } from '../helpers/problem.js';

describe.each(testBackends())('A/B tests on $kind', (backend) => {
  let t: TestApp;
  let a: string;
  let b: string;
  /** The test decided over HTTP below, read again over MCP. */
  let decided: string;

  const ask = (body: Record<string, unknown>, as?: string) => t.request({ method: 'POST', url: '/query', body: { message: 'How do refunds work?', ...body }, ...(as ? { as } : {}) });
  const put = (id: string, action: 'start' | 'stop', as?: string) => t.request({ method: 'PUT', url: `/business/ab-tests/${id}/${action}`, ...(as ? { as } : {}) });
  const results = async (id: string) => {
    const res = await t.request({ method: 'GET', url: `/business/ab-tests/${id}/results` });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  };

  beforeAll(async () => {
    t = await createTestApp({ backend });
    a = (await createPersona(t, { name: 'Formal' })).id;
    b = (await createPersona(t, { name: 'Casual' })).id;
  });
  afterAll(async () => t?.close());

  it('creates a draft with defaults, answers 201 with Location, and refuses bad bodies', async () => {
    const res = await t.request({ method: 'POST', url: '/business/ab-tests', body: { name: 'Tone', personaA: a, personaB: b } });
    expect(res.statusCode, res.body).toBe(201);
    const test = res.json();
    expect(res.headers.location).toBe(`/business/ab-tests/${test.id}`);
    expect(test).toMatchObject({ name: 'Tone', personaA: a, personaB: b, trafficSplit: 0.5, status: 'draft', startedAt: null, endedAt: null });
    expect(test.id).toMatch(/^abt_/);
    expect((await t.request({ method: 'GET', url: `/business/ab-tests/${test.id}` })).json()).toEqual(test);
    expect((await t.request({ method: 'GET', url: '/business/ab-tests?status=draft' })).json().data.map((x: { id: string }) => x.id)).toContain(test.id);

    const post = (body: Record<string, unknown>) => t.request({ method: 'POST', url: '/business/ab-tests', body });
    expectProblem(await post({ name: 'Same', personaA: a, personaB: a }), 400, 'validation_failed', 'personaB');
    expectProblem(await post({ name: 'Split', personaA: a, personaB: b, trafficSplit: 1.5 }), 400, 'validation_failed', 'trafficSplit');
    expectProblem(await post({ name: 'Extra', personaA: a, personaB: b, status: 'running' }), 400, 'validation_failed', 'status');
    expectProblem(await post({ name: 'Ghost', personaA: a, personaB: 'per_ghost' }), 404, 'not_found');
    expectProblem(await t.request({ method: 'GET', url: '/business/ab-tests?status=paused' }), 400, 'validation_failed', 'status');
  });

  it('moves draft → running → completed, and answers 409 to every other move', async () => {
    const test = await createAbTest(t, { personaA: a, personaB: b });
    expectProblem(await put(test.id, 'stop'), 409, 'conflict');
    const started = await put(test.id, 'start');
    expect(started.statusCode, started.body).toBe(200);
    expect(started.json()).toMatchObject({ status: 'running', endedAt: null });
    expect(started.json().startedAt).toEqual(expect.any(String));
    expect(expectProblem(await put(test.id, 'start'), 409, 'conflict').detail).toContain('is running');
    const stopped = await put(test.id, 'stop');
    expect(stopped.json()).toMatchObject({ status: 'completed' });
    expect(stopped.json().endedAt).toEqual(expect.any(String));
    expectProblem(await put(test.id, 'stop'), 409, 'conflict');
    expectProblem(await put(test.id, 'start'), 409, 'conflict');
    expectProblem(await put('abt_nope', 'start'), 404, 'not_found');
  });

  it('routes only while running: a draft or completed test answers 409', async () => {
    const test = await createAbTest(t, { personaA: a, personaB: b });
    expect(expectProblem(await ask({ abTestId: test.id }), 409, 'conflict').detail).toContain('draft');
    await put(test.id, 'start');
    const answer = await ask({ abTestId: test.id, userId: 'u-1' });
    expect(answer.statusCode, answer.body).toBe(200);
    const body = answer.json();
    expect(body.abTestId).toBe(test.id);
    expect(body.personaId).toBe(body.variant === 'A' ? a : b);
    const session = (await t.request({ method: 'GET', url: `/sessions/${body.sessionId}` })).json();
    expect(session).toMatchObject({ abTestId: test.id, variant: body.variant, personaId: body.personaId });
    await put(test.id, 'stop');
    expectProblem(await ask({ abTestId: test.id, userId: 'u-1' }), 409, 'conflict');
  });

  it('keeps a user, and a session, on one variant', async () => {
    const test = await createAbTest(t, { personaA: a, personaB: b });
    await put(test.id, 'start');
    for (const user of ['ada', 'grace', 'linus', 'barbara']) {
      const first = (await ask({ abTestId: test.id, userId: user })).json();
      expect(first.variant).toBe(assignVariant(test.id, user, 0.5));
      for (let i = 0; i < 3; i++) {
        const again = (await ask({ abTestId: test.id, userId: user })).json();
        expect([again.variant, again.personaId]).toEqual([first.variant, first.personaId]);
      }
    }
    // Without a user the session is the key: continuing it keeps its variant.
    const anon = (await ask({ abTestId: test.id })).json();
    for (let i = 0; i < 3; i++) {
      const next = (await ask({ abTestId: test.id, sessionId: anon.sessionId })).json();
      expect([next.sessionId, next.variant, next.personaId]).toEqual([anon.sessionId, anon.variant, anon.personaId]);
    }
    const other = await createAbTest(t, { personaA: a, personaB: b });
    await put(other.id, 'start');
    expectProblem(await ask({ abTestId: other.id, sessionId: anon.sessionId }), 409, 'conflict');
    await put(test.id, 'stop');
    await put(other.id, 'stop');
  });

  it('follows trafficSplit over 1,000 users (within 4 standard deviations)', async () => {
    const workspaceId = (await t.ctx.services.auth.authenticate(t.adminKey))!.workspaceId;
    for (const split of [0.5, 0.2, 0.9]) {
      const test = await createAbTest(t, { personaA: a, personaB: b, trafficSplit: split });
      await put(test.id, 'start');
      let toA = 0;
      for (let u = 0; u < 1000; u++) {
        const routed = await t.ctx.services.abTests.route(workspaceId, test.id, { key: `user-${u}` });
        if (routed.variant === 'A') toA++;
        expect(routed.personaId).toBe(routed.variant === 'A' ? a : b);
      }
      const sd = Math.sqrt(1000 * split * (1 - split));
      expect(Math.abs(toA - 1000 * split), `split ${split}: ${toA} of 1000 to A`).toBeLessThan(4 * sd);
      await put(test.id, 'stop');
    }
    // The extremes send everyone one way.
    expect(Array.from({ length: 200 }, (_, u) => assignVariant('abt_x', `u${u}`, 1)).every((v) => v === 'A')).toBe(true);
    expect(Array.from({ length: 200 }, (_, u) => assignVariant('abt_x', `u${u}`, 0)).every((v) => v === 'B')).toBe(true);
  });

  it('reports each variant and decides with Welch’s t-test on the ratings', async () => {
    const test = await createAbTest(t, { name: 'Decide', personaA: a, personaB: b });
    decided = test.id;
    const empty = await results(test.id);
    expect(empty.significance).toEqual({ metric: 'satisfaction', pValue: null, significant: false, winner: null });
    expect(empty.variants.A).toMatchObject({ personaId: a, conversations: 0, messages: 0, satisfaction: { average: null, count: 0, ci95: [null, null] }, responseTime: { avgMs: null, p50Ms: null } });

    await put(test.id, 'start');
    const ratings: Record<'A' | 'B', number[]> = { A: [], B: [] };
    const sessions: Record<'A' | 'B', Set<string>> = { A: new Set(), B: new Set() };
    const answers = { A: 0, B: 0 };
    // A's users are happier. Stop rating once each side has what the step needs.
    const rateUntil = async (perSide: number) => {
      for (let u = 0; ratings.A.length < perSide || ratings.B.length < perSide; u++) {
        const answer = (await ask({ abTestId: test.id, userId: `rater-${perSide}-${u}` })).json();
        const v = answer.variant as 'A' | 'B';
        answers[v]++;
        sessions[v].add(answer.sessionId);
        if (ratings[v].length >= perSide) continue;
        const rating = v === 'A' ? [5, 4, 5, 5, 3][ratings.A.length % 5]! : [2, 3, 1, 3, 4][ratings.B.length % 5]!;
        const fb = await t.request({ method: 'POST', url: `/sessions/${answer.sessionId}/feedback`, body: { rating } });
        expect(fb.statusCode, fb.body).toBe(201);
        ratings[v].push(rating);
      }
    };

    // API.md §8's thresholds, each side of each: a p-value from 2 ratings per variant, a winner from 10.
    await rateUntil(1);
    expect((await results(test.id)).significance).toEqual({ metric: 'satisfaction', pValue: null, significant: false, winner: null });

    await rateUntil(2);
    const two = await results(test.id);
    expect(two.significance.pValue).toBeCloseTo(welchTest(moments(ratings.A), moments(ratings.B))!.pValue, 12);
    expect(two.significance.winner).toBeNull();

    await rateUntil(4);
    const early = await results(test.id);
    const expected = welchTest(moments(ratings.A), moments(ratings.B))!;
    expect(early.significance.pValue).toBeCloseTo(expected.pValue, 12);
    expect(early.significance.significant).toBe(expected.pValue < 0.05);
    expect(early.significance.winner).toBeNull(); // fewer than 10 ratings each

    await rateUntil(9);
    const nine = await results(test.id);
    expect(welchTest(moments(ratings.A), moments(ratings.B))!.pValue).toBeLessThan(0.05);
    expect(nine.significance).toMatchObject({ significant: true, winner: null }); // significant, but 9 ratings each

    await rateUntil(10);
    expect((await results(test.id)).significance).toMatchObject({ significant: true, winner: 'A' });

    await rateUntil(12);
    const final = await results(test.id);
    const welch = welchTest(moments(ratings.A), moments(ratings.B))!;
    expect(final.significance.pValue).toBeCloseTo(welch.pValue, 12);
    expect(welch.pValue).toBeLessThan(0.05);
    expect(final.significance).toMatchObject({ significant: true, winner: 'A' });
    for (const v of ['A', 'B'] as const) {
      const m = moments(ratings[v]);
      expect(final.variants[v].satisfaction.count).toBe(ratings[v].length);
      expect(final.variants[v].satisfaction.average).toBeCloseTo(m.mean, 12);
      const [lo, hi] = final.variants[v].satisfaction.ci95;
      expect(lo).toBeLessThan(m.mean);
      expect(hi).toBeGreaterThan(m.mean);
      expect(final.variants[v].conversations).toBe(sessions[v].size);
      expect(final.variants[v].messages).toBe(answers[v]);
      expect(final.variants[v].responseTime.avgMs).toEqual(expect.any(Number));
      expect(final.variants[v].responseTime.p50Ms).toEqual(expect.any(Number));
    }
    // A deleted session keeps its numbers.
    const deleted = [...sessions.A][0]!;
    expect((await t.request({ method: 'DELETE', url: `/sessions/${deleted}` })).statusCode).toBe(204);
    expectProblem(await t.request({ method: 'GET', url: `/sessions/${deleted}` }), 404, 'not_found');
    const afterDelete = (await results(test.id)).variants.A;
    expect(afterDelete).toMatchObject({ conversations: sessions.A.size, messages: answers.A });
    expect(afterDelete.satisfaction.count).toBe(ratings.A.length);
    await put(test.id, 'stop');
    expect((await results(test.id)).status).toBe('completed');
  });

  it('refuses to delete a persona while a running test uses it (409), and allows it after the test stops', async () => {
    const c = (await createPersona(t, { name: 'Doomed' })).id;
    const test = await createAbTest(t, { personaA: a, personaB: c });
    await put(test.id, 'start');
    expect(expectProblem(await t.request({ method: 'DELETE', url: `/personas/${c}` }), 409, 'conflict').detail).toContain(test.id);
    expectProblem(await t.request({ method: 'DELETE', url: '/personas/per_nope' }), 404, 'not_found');
    await put(test.id, 'stop');
    expect((await t.request({ method: 'DELETE', url: `/personas/${c}` })).statusCode).toBe(204);
    // A draft whose persona is gone cannot start.
    const d = (await createPersona(t, { name: 'Gone' })).id;
    const draft = await createAbTest(t, { personaA: a, personaB: d });
    await t.request({ method: 'DELETE', url: `/personas/${d}` });
    expect(expectProblem(await put(draft.id, 'start'), 409, 'conflict').detail).toContain(d);
  });

  it('routes the chat route when its agentId is a test id', async () => {
    const test = await createAbTest(t, { personaA: a, personaB: b });
    await put(test.id, 'start');
    const res = await t.request({ method: 'POST', url: `/api/ai-sdk/agents/${test.id}/chat`, body: { messages: [{ role: 'user', content: 'Hello' }], stream: false, userId: 'chat-user' } });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ abTestId: test.id, variant: assignVariant(test.id, 'chat-user', 0.5) });
    await put(test.id, 'stop');
  });

  it('keeps every route to its workspace: a foreign start or stop changes nothing', async () => {
    const test = await createAbTest(t, { personaA: a, personaB: b });
    const other = await t.ctx.services.auth.createWorkspace('ab-other');
    const key = other.key.key;
    const ownersView = async () => {
      const res = await t.request({ method: 'GET', url: `/business/ab-tests/${test.id}` });
      expect(res.statusCode, res.body).toBe(200);
      return res.json();
    };
    expectProblem(await t.request({ method: 'GET', url: `/business/ab-tests/${test.id}`, as: key }), 404, 'not_found');
    expectProblem(await t.request({ method: 'GET', url: `/business/ab-tests/${test.id}/results`, as: key }), 404, 'not_found');
    expectProblem(await put(test.id, 'start', key), 404, 'not_found');
    // Re-read as the owner: still the draft it was, so the owner's own start succeeds.
    expect(await ownersView()).toEqual(test);
    expect((await t.request({ method: 'GET', url: '/business/ab-tests', as: key })).json().data).toEqual([]);
    expectProblem(await t.request({ method: 'POST', url: '/business/ab-tests', as: key, body: { name: 'Steal', personaA: a, personaB: b } }), 404, 'not_found');
    const started = await put(test.id, 'start');
    expect(started.statusCode, started.body).toBe(200);
    expect(started.json()).toMatchObject({ id: test.id, status: 'running', endedAt: null });
    const running = await ownersView();
    expect(running).toEqual(started.json());
    expectProblem(await ask({ abTestId: test.id }, key), 404, 'not_found');
    expectProblem(await put(test.id, 'stop', key), 404, 'not_found');
    expect(await ownersView()).toEqual(running);
    const stopped = await put(test.id, 'stop');
    expect(stopped.statusCode, stopped.body).toBe(200);
    expect(stopped.json().status).toBe('completed');
  });

  it('is reached over MCP: create, start, ask, results (tool and resource), stop', async () => {
    const client = await connectInMemory(t);
    try {
      const test = await callOk(client, 'create_ab_test', { name: 'Over MCP', personaA: a, personaB: b, trafficSplit: 0.5 });
      expect(test.status).toBe('draft');
      expect((await callOk(client, 'start_ab_test', { id: test.id })).status).toBe('running');
      expect(await callError(client, 'start_ab_test', { id: test.id })).toContain('Conflict: A/B test');
      const answer = (await ask({ abTestId: test.id, userId: 'mcp-user' })).json();
      await t.request({ method: 'POST', url: `/sessions/${answer.sessionId}/feedback`, body: { rating: 4 } });
      const res = await callOk(client, 'get_ab_test_results', { id: test.id });
      expect(res).toEqual(await results(test.id));
      expect(res.variants[answer.variant].satisfaction).toMatchObject({ average: 4, count: 1 });
      const resource = await client.readResource({ uri: `switchboard://ab-tests/${test.id}/results` });
      expect(JSON.parse((resource.contents[0] as { text: string }).text)).toEqual(res);
      expect((await client.listResources()).resources.map((r) => r.uri)).toContain(`switchboard://ab-tests/${test.id}/results`);
      expect((await callOk(client, 'stop_ab_test', { id: test.id })).status).toBe('completed');
      expect(await callError(client, 'get_ab_test_results', { id: 'abt_nope' })).toBe('Not found: A/B test abt_nope not found.');
      // The decided test reads the same over MCP: a winner with its p-value.
      const verdict = await callOk(client, 'get_ab_test_results', { id: decided });
      expect(verdict.significance).toMatchObject({ metric: 'satisfaction', significant: true, winner: 'A' });
      expect(verdict.significance.pValue).toBeLessThan(0.05);
    } finally {
      await client.close();
    }
  });
});
