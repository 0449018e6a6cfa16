// Issue 28 on A/B tests: variants that pin persona versions (`per_…@n`), results with the always-valid
// sequential test beside Welch's, guardrails that stop a test with the reason recorded, and promotion
// of the winner (the version becomes current, channels and the test's model id move to it).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { createAbTest, createChannel, createPersona, recordFeedback, recordInteraction, workspaceOf } from '../helpers/factories.js';
import { testBackends } from '../helpers/postgres.js';
import { expectProblem } from '../helpers/problem.js';

describe.each(testBackends())('A/B tests between versions on $kind', (backend) => {
  let t: TestApp;
  let ws: string;
  const NOW = new Date().toISOString();

  beforeAll(async () => {
    t = await createTestApp({ backend });
    ws = await workspaceOf(t);
  });
  afterAll(async () => t?.close());

  const put = (id: string, action: 'start' | 'stop') => t.request({ method: 'PUT', url: `/business/ab-tests/${id}/${action}` });
  const results = async (id: string) => {
    const res = await t.request({ method: 'GET', url: `/business/ab-tests/${id}/results` });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  };
  /** A persona at version 2: v1 "Formal.", v2 "Casual.". */
  const twoVersions = async (name: string) => {
    const p = await createPersona(t, { name, instructions: 'Formal.' });
    expect((await t.request({ method: 'PUT', url: `/personas/${p.id}`, body: { instructions: 'Casual.' } })).json().version).toBe(2);
    return p.id;
  };
  /** `n` ratings of `variant` written at once, as feedback rows (the order they are read in is the order written). */
  const rate = async (testId: string, personaId: string, variant: 'A' | 'B', ratings: number[]) => {
    for (const rating of ratings) await recordFeedback(t, { workspace_id: ws, persona_id: personaId, ab_test_id: testId, variant, rating, created_at: NOW });
  };

  it('pits two versions of one persona, answers each with its version, and refuses variants that are the same', async () => {
    const p = await twoVersions('Versioned');
    const test = await createAbTest(t, { personaA: `${p}@1`, personaB: `${p}@2` });
    expect(test).toMatchObject({ personaA: `${p}@1`, personaB: `${p}@2`, guardrails: {}, stopReason: null, promoted: null });
    expect((await put(test.id, 'start')).statusCode).toBe(200);
    const byVariant = new Map<string, number>();
    for (let i = 0; byVariant.size < 2 && i < 40; i++) {
      const res = await t.request({ method: 'POST', url: '/query', body: { abTestId: test.id, userId: `u${i}`, message: 'Hello' } });
      expect(res.statusCode, res.body).toBe(200);
      const row = await t.ctx.db.kysely.selectFrom('interactions').select('persona_version').where('message_id', '=', res.json().messageId).executeTakeFirstOrThrow();
      byVariant.set(res.json().variant, row.persona_version!);
    }
    expect(Object.fromEntries(byVariant)).toEqual({ A: 1, B: 2 });
    expect((await results(test.id)).variants.A.personaId).toBe(`${p}@1`);

    expectProblem(await t.request({ method: 'POST', url: '/business/ab-tests', body: { name: 'Same', personaA: `${p}@2`, personaB: `${p}@2` } }), 400, 'validation_failed', 'personaB');
    // The current version is 2: pinning it against "whatever is current" pits a version against itself.
    expectProblem(await t.request({ method: 'POST', url: '/business/ab-tests', body: { name: 'Same', personaA: p, personaB: `${p}@2` } }), 400, 'validation_failed', 'personaB');
    expectProblem(await t.request({ method: 'POST', url: '/business/ab-tests', body: { name: 'Ghost', personaA: `${p}@1`, personaB: `${p}@9` } }), 404, 'not_found');
    expectProblem(await t.request({ method: 'POST', url: '/business/ab-tests', body: { name: 'Bad', personaA: `${p}@1`, personaB: p, guardrails: { maxErrorRate: 2 } } }), 400, 'validation_failed', 'guardrails.maxErrorRate');
  });

  it('reports the sequential test beside Welch’s: nothing before 10 ratings each, then a winner and its interval over time', async () => {
    const p = await twoVersions('Sequential');
    const test = await createAbTest(t, { personaA: `${p}@1`, personaB: `${p}@2` });
    await put(test.id, 'start');
    await rate(test.id, p, 'A', [2, 3, 2, 3, 2]);
    await rate(test.id, p, 'B', [5, 4, 5, 4, 5]);
    const early = await results(test.id);
    expect(early.significance.pValue).not.toBeNull(); // Welch's answers from 2 ratings
    expect(early.sequential).toMatchObject({ method: 'msprt', alpha: 0.05, difference: null, pValue: null, interval: null, significant: false, winner: null });

    await rate(test.id, p, 'A', [2, 3, 2, 3, 2, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3]);
    await rate(test.id, p, 'B', [5, 4, 5, 4, 5, 5, 4, 5, 4, 5, 5, 4, 5, 4, 5]);
    const decided = await results(test.id);
    expect(decided.sequential.significant).toBe(true);
    expect(decided.sequential.winner).toBe('B');
    expect(decided.sequential.difference).toBeCloseTo(4.6 - 2.45, 5);
    const [lo, hi] = decided.sequential.interval;
    expect(lo).toBeGreaterThan(0);
    expect(hi).toBeGreaterThan(decided.sequential.difference);
    expect(decided.sequential.pValue).toBeLessThan(0.05);
    expect(decided.sequential.series).toEqual([{ at: `${NOW.slice(0, 10)}T23:59:59.999Z`, ratings: 40, pValue: decided.sequential.pValue, interval: decided.sequential.interval }]);
    expect(decided.guardrails).toEqual([]);
  });

  it('stops a test whose B breaks a guardrail with sequential evidence, at a results read and in the sweep, with the reason', async () => {
    const a = await createPersona(t, { name: 'Steady' });
    const b = await createPersona(t, { name: 'Grumpy' });
    const unhappy = await createAbTest(t, { personaA: a.id, personaB: b.id, guardrails: { minSatisfaction: 3.5 } });
    await put(unhappy.id, 'start');
    await rate(unhappy.id, b.id, 'B', [2, 1, 2, 1, 2]);
    const few = await results(unhappy.id);
    expect(few.status).toBe('running'); // five ratings are no evidence yet
    expect(few.guardrails).toEqual([{ guardrail: 'minSatisfaction', limit: 3.5, observed: 1.6, interval: null, breached: false }]);
    await rate(unhappy.id, b.id, 'B', [1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1]);
    const stopped = await results(unhappy.id);
    expect(stopped.status).toBe('completed');
    expect(stopped.guardrails[0]).toMatchObject({ guardrail: 'minSatisfaction', breached: true });
    expect(stopped.guardrails[0].interval[1]).toBeLessThan(3.5);
    const record = (await t.request({ method: 'GET', url: `/business/ab-tests/${unhappy.id}` })).json();
    expect(record.stopReason).toMatch(/^guardrail minSatisfaction: B's average rating is at most [\d.]+ .*below the floor 3\.5$/);
    expect(record.endedAt).not.toBeNull();

    // Failures, seen by the sweep without anyone reading the results.
    const failing = await createAbTest(t, { personaA: a.id, personaB: b.id, guardrails: { maxErrorRate: 0.1, maxP95LatencyMs: 60_000 } });
    await put(failing.id, 'start');
    for (let i = 0; i < 40; i++) {
      await recordInteraction(t, { workspace_id: ws, persona_id: b.id, ab_test_id: failing.id, variant: 'B', started_at: NOW, error: i % 2 === 0 ? 'upstream_error' : null });
      await recordInteraction(t, { workspace_id: ws, persona_id: a.id, ab_test_id: failing.id, variant: 'A', started_at: NOW, error: 'upstream_error' });
    }
    expect(await t.ctx.services.abTests.enforceGuardrails()).toBe(1);
    const swept = (await t.request({ method: 'GET', url: `/business/ab-tests/${failing.id}` })).json();
    expect(swept.status).toBe('completed');
    expect(swept.stopReason).toMatch(/^guardrail maxErrorRate: /);
    // A stopped test is not swept again.
    expect(await t.ctx.services.abTests.enforceGuardrails()).toBe(0);
    const manual = await createAbTest(t, { personaA: a.id, personaB: b.id });
    await put(manual.id, 'start');
    expect((await put(manual.id, 'stop')).json().stopReason).toBe('manual');
  });

  it('holds only B to the limits: A failing every answer stops nothing while B keeps them', async () => {
    const a = await createPersona(t, { name: 'Failing A' });
    const b = await createPersona(t, { name: 'Healthy B' });
    const test = await createAbTest(t, { personaA: a.id, personaB: b.id, guardrails: { maxErrorRate: 0.1 } });
    await put(test.id, 'start');
    for (let i = 0; i < 40; i++) {
      await recordInteraction(t, { workspace_id: ws, persona_id: a.id, ab_test_id: test.id, variant: 'A', started_at: NOW, error: 'upstream_error' });
      await recordInteraction(t, { workspace_id: ws, persona_id: b.id, ab_test_id: test.id, variant: 'B', started_at: NOW, error: null });
    }
    expect(await t.ctx.services.abTests.enforceGuardrails()).toBe(0);
    const read = await results(test.id);
    expect(read.status).toBe('running');
    // B's error rate is 0, its interval starting at 0, not below it.
    expect(read.guardrails).toEqual([{ guardrail: 'maxErrorRate', limit: 0.1, observed: 0, interval: [0, expect.any(Number)], breached: false }]);
    expect(read.guardrails[0].interval[1]).toBeLessThan(0.1);
  });

  it('reports guardrail intervals within the metric’s range: an error rate within 0–1, an average rating within 1–5', async () => {
    const a = await createPersona(t, { name: 'Fine A' });
    const b = await createPersona(t, { name: 'Down B' });
    const test = await createAbTest(t, { personaA: a.id, personaB: b.id, guardrails: { maxErrorRate: 0.5, minSatisfaction: 3 } });
    await put(test.id, 'start');
    for (let i = 0; i < 10; i++) {
      await recordInteraction(t, { workspace_id: ws, persona_id: b.id, ab_test_id: test.id, variant: 'B', started_at: NOW, error: 'upstream_error' });
    }
    await rate(test.id, b.id, 'B', Array.from({ length: 10 }, () => 1));
    // Every answer failed and every rating is 1: the raw sequences reach past 1 and below 1.
    const read = await results(test.id);
    expect(read.status).toBe('completed');
    expect(read.guardrails).toEqual([
      { guardrail: 'maxErrorRate', limit: 0.5, observed: 1, interval: [expect.any(Number), 1], breached: true },
      { guardrail: 'minSatisfaction', limit: 3, observed: 1, interval: [1, expect.any(Number)], breached: true },
    ]);
    const record = (await t.request({ method: 'GET', url: `/business/ab-tests/${test.id}` })).json();
    expect(record.stopReason).toMatch(/^guardrail maxErrorRate: B's error rate is at least [\d.]+ \(95 % confidence sequence [\d.]+–1\), above the limit 0\.5$/);
  });

  it('promotes the winner: its version becomes current, channels and the test’s model id move to it, once', async () => {
    const p = await twoVersions('Promoted');
    const test = await createAbTest(t, { personaA: `${p}@1`, personaB: p });
    const channel = await createChannel(t, { type: 'webhook', abTestId: test.id, credentials: { secret: 'webhook-secret-0123456789abcdef' } });
    await put(test.id, 'start');
    expectProblem(await t.request({ method: 'POST', url: `/business/ab-tests/${test.id}/promote`, body: {} }), 409, 'conflict');
    await rate(test.id, p, 'A', Array.from({ length: 20 }, (_, i) => 4 + (i % 2)));
    await rate(test.id, p, 'B', Array.from({ length: 20 }, (_, i) => 1 + (i % 2)));
    await put(test.id, 'stop');

    const promoted = await t.request({ method: 'POST', url: `/business/ab-tests/${test.id}/promote`, body: {} });
    expect(promoted.statusCode, promoted.body).toBe(200);
    expect(promoted.json()).toMatchObject({ status: 'completed', promoted: 'A' });
    // Version 1 ("Formal.") is current again, as version 3.
    expect((await t.request({ method: 'GET', url: `/personas/${p}` })).json()).toMatchObject({ version: 3, instructions: 'Formal.' });
    expect((await t.request({ method: 'GET', url: `/business/channels/${channel.id}` })).json()).toMatchObject({ personaId: p, abTestId: null });
    // New conversations through the test go to the winner; its OpenAI model id still answers.
    const asked = await t.request({ method: 'POST', url: '/query', body: { abTestId: test.id, userId: 'after-promotion', message: 'Hi' } });
    expect(asked.statusCode, asked.body).toBe(200);
    expect(asked.json().variant).toBe('A');
    expect((await t.request({ method: 'GET', url: `/v1/models/${test.id}` })).statusCode).toBe(200);
    expect((await t.request({ method: 'GET', url: '/v1/models' })).json().data.map((m: { id: string }) => m.id)).toContain(test.id);

    expectProblem(await t.request({ method: 'POST', url: `/business/ab-tests/${test.id}/promote`, body: { variant: 'B' } }), 409, 'conflict');
    expectProblem(await t.request({ method: 'POST', url: `/business/ab-tests/${test.id}/promote`, body: { variant: 'C' } }), 400, 'validation_failed', 'variant');

    // No evidence and no variant named: 409; naming one promotes it.
    const a = await createPersona(t, { name: 'Left' });
    const b = await createPersona(t, { name: 'Right' });
    const undecided = await createAbTest(t, { personaA: a.id, personaB: b.id });
    await put(undecided.id, 'start');
    await put(undecided.id, 'stop');
    expectProblem(await t.request({ method: 'POST', url: `/business/ab-tests/${undecided.id}/promote`, body: {} }), 409, 'conflict');
    expect((await t.request({ method: 'POST', url: `/business/ab-tests/${undecided.id}/promote`, body: { variant: 'B' } })).json().promoted).toBe('B');
    const other = (await t.ctx.services.auth.createWorkspace('other-promote')).key.key;
    expectProblem(await t.request({ method: 'POST', url: `/business/ab-tests/${undecided.id}/promote`, body: {}, as: other }), 404, 'not_found');
  });
});
