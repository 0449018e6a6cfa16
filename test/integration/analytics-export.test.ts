// POST /business/analytics/export: the answers, conversations and metrics datasets in CSV (read back by a real CSV parser), JSON
// and NDJSON; formula neutralising, quoting, file names, batches beyond one read, validation.
// The messages dataset (the text): analytics-export-messages.test.ts.
import { systemActor } from '../../src/core/auth/actor.js';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANSWER_COLUMNS, CONVERSATION_COLUMNS } from '../../src/business/analytics/analytics.service.js';
import { manualClock } from '../../src/lib/clock.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { createPersona, recordInteraction, workspaceOf } from '../helpers/factories.js';
import { expectProblem } from '../helpers/problem.js';

const TRICKY_USER = 'ann "the"\nuser, 2';

describe.each(testBackends())('analytics export on $kind', (backend) => {
  let t: TestApp;
  let persona: string;
  const sessions: string[] = [];

  const exportFile = (body: Record<string, unknown>) => t.request({ method: 'POST', url: '/business/analytics/export', body });

  beforeAll(async () => {
    t = await createTestApp({ backend, overrides: { clock: manualClock(new Date('2026-03-10T12:00:00.000Z')) } });
    persona = (await createPersona(t)).id;
    for (const [message, userId] of [['=SUM(A1:A2)', TRICKY_USER], ['plain question', 'bob'], ['to be deleted', 'carl']]) {
      const res = await t.request({ method: 'POST', url: '/query', body: { personaId: persona, message, userId } });
      expect(res.statusCode, res.body).toBe(200);
      sessions.push(res.json().sessionId);
    }
    expect((await t.request({ method: 'POST', url: `/sessions/${sessions[0]}/feedback`, body: { rating: 4 } })).statusCode).toBe(201);
    expect((await t.request({ method: 'DELETE', url: `/sessions/${sessions[2]}` })).statusCode).toBe(204);
  });
  afterAll(async () => t.close());

  it('exports answers as CSV with a header, neutralised formulas and quoted cells that round-trip', async () => {
    const res = await exportFile({ timeframe: '7d', dataset: 'answers', format: 'csv' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toBe('text/csv; charset=utf-8');
    expect(res.headers['content-disposition']).toBe('attachment; filename="switchboard-answers-2026-03-10.csv"');
    expect(res.headers['x-request-id']).toBeTruthy();
    expect(res.body.split('\r\n', 1)[0]).toBe(ANSWER_COLUMNS.join(','));
    const rows = parse(res.body, { columns: true }) as Array<Record<string, string>>;
    expect(rows).toHaveLength(3);
    expect(rows.map((r) => r.userId)).toEqual([TRICKY_USER, 'bob', 'carl']);
    expect(rows.map((r) => r.sessionId)).toEqual([sessions[0], sessions[1], '']);
    expect(rows[0]).toMatchObject({ personaId: persona, model: 'offline', error: '', rating: '4', toolCalls: '0', startedAt: '2026-03-10T12:00:00.000Z' });
  });

  it('exports conversations (sessions that still exist) with their numbers', async () => {
    const csv = await exportFile({ timeframe: '1d', dataset: 'conversations', format: 'csv' });
    expect(csv.headers['content-disposition']).toBe('attachment; filename="switchboard-conversations-2026-03-10.csv"');
    const rows = parse(csv.body, { columns: true }) as Array<Record<string, string>>;
    expect(Object.keys(rows[0]!)).toEqual(CONVERSATION_COLUMNS);
    expect(rows.map((r) => r.sessionId)).toEqual([sessions[0], sessions[1]].sort());
    const first = rows.find((r) => r.sessionId === sessions[0])!;
    expect(first).toMatchObject({ title: "'=SUM(A1:A2)", userId: TRICKY_USER, messageCount: '2', answers: '1', errors: '0', averageRating: '4' });

    const json = await exportFile({ timeframe: '1d', dataset: 'conversations', format: 'json' });
    expect(json.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(json.headers['content-disposition']).toBe('attachment; filename="switchboard-conversations-2026-03-10.json"');
    const objects = json.json() as Array<Record<string, unknown>>;
    expect(objects.find((o) => o.sessionId === sessions[0])).toMatchObject({ title: '=SUM(A1:A2)', answers: 1, averageRating: 4 });
  });

  it('exports NDJSON one object a line, and the metric series', async () => {
    const res = await exportFile({ timeframe: '7d', dataset: 'answers', format: 'ndjson' });
    expect(res.headers['content-type']).toBe('application/x-ndjson; charset=utf-8');
    expect(res.headers['content-disposition']).toBe('attachment; filename="switchboard-answers-2026-03-10.ndjson"');
    const lines = res.body.trimEnd().split('\n').map((l) => JSON.parse(l));
    expect(lines).toHaveLength(3);
    expect(Object.keys(lines[0])).toEqual(ANSWER_COLUMNS);

    const metrics = (await exportFile({ timeframe: '24h', dataset: 'metrics', format: 'json' })).json() as Array<Record<string, unknown>>;
    expect(metrics).toHaveLength(25);
    expect(Object.keys(metrics[0]!)).toEqual(['start', 'conversations', 'satisfaction', 'response_time']);
    expect(metrics.at(-1)).toMatchObject({ start: '2026-03-10T12:00:00.000Z', conversations: 3, satisfaction: 4 });
    expect(metrics[0]).toMatchObject({ conversations: 0, satisfaction: null, response_time: null });
    const some = parse((await exportFile({ timeframe: '3d', dataset: 'metrics', metrics: 'conversations', format: 'csv' })).body, { columns: true });
    expect(some).toEqual([
      { start: '2026-03-07T00:00:00.000Z', conversations: '0' },
      { start: '2026-03-08T00:00:00.000Z', conversations: '0' },
      { start: '2026-03-09T00:00:00.000Z', conversations: '0' },
      { start: '2026-03-10T00:00:00.000Z', conversations: '3' },
    ]);
  });

  it('reads large exports in batches without losing or repeating rows at equal times', async () => {
    const ws = await workspaceOf(t);
    const { workspace } = await t.ctx.services.auth.createWorkspace('bulk');
    for (let i = 0; i < 2_345; i++) {
      // Runs of 7 rows share a started_at, so batch edges fall inside runs.
      await recordInteraction(t, { workspace_id: workspace.id, persona_id: 'per_bulk', started_at: new Date(Date.parse('2026-03-09T00:00:00.000Z') + Math.floor(i / 7)).toISOString(), latency_ms: i });
    }
    const bulk = await t.ctx.services.analytics.export(systemActor(workspace.id), { timeframe: { label: '7d', ms: 7 * 86_400_000 }, metrics: [], dataset: 'answers', format: 'json' });
    const latencies: number[] = [];
    for await (const batch of bulk.batches) latencies.push(...batch.map((r) => r.latencyMs as number));
    expect(latencies).toEqual(Array.from({ length: 2_345 }, (_, i) => i));
    // The admin workspace's export is untouched by the other workspace's rows.
    expect(ws).not.toBe(workspace.id);
    expect((await exportFile({ timeframe: '7d', dataset: 'answers', format: 'json' })).json()).toHaveLength(3);
  });

  it('documents the five datasets in the OpenAPI document', async () => {
    const doc = (await t.request({ method: 'GET', url: '/openapi.json' })).json();
    const dataset = doc.paths['/business/analytics/export'].post.requestBody.content['application/json'].schema.properties.dataset;
    expect(dataset.enum).toEqual(['conversations', 'messages', 'answers', 'handoffs', 'metrics']);
    expect(dataset.description).toMatch(/messages: the conversations’ text.*answers: one row per answer.*handoffs: one row per handoff/s);
  });

  it('refuses bad bodies naming the field', async () => {
    expectProblem(await exportFile({ timeframe: '7d', dataset: 'sessions', format: 'csv' }), 400, 'validation_failed', 'dataset');
    expectProblem(await exportFile({ timeframe: '7d', dataset: 'messages', format: 'xml' }), 400, 'validation_failed', 'format');
    expectProblem(await exportFile({ timeframe: '0d', dataset: 'messages', format: 'csv' }), 400, 'validation_failed', 'timeframe');
    expectProblem(await exportFile({ timeframe: '7d', dataset: 'metrics', metrics: 'nps', format: 'csv' }), 400, 'validation_failed', 'metrics');
    expectProblem(await exportFile({ timeframe: '7d', dataset: 'messages', format: 'csv', personaId: persona }), 400, 'validation_failed', 'personaId');
    expectProblem(await t.request({ method: 'POST', url: '/business/analytics/export?x=1', body: { timeframe: '7d', dataset: 'messages', format: 'csv' } }), 400, 'validation_failed', 'x');
  });
});
