// API.md §8 analytics from real answers (POST /query with the offline model) and feedback: totals,
// a deleted session still counted, performance figures, workspace isolation and the MCP tool.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../../src/lib/clock.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { createPersona, recordInteraction, workspaceOf } from '../helpers/factories.js';
import { callError, callOk, connectInMemory } from '../helpers/mcp.js';
import { expectProblem } from '../helpers/problem.js';
import { seedSupport, TOOL_MESSAGE } from './chat-helpers.js';

interface Answer {
  sessionId: string;
  messageId: string;
  latencyMs: number;
  usage: { promptTokens: number; completionTokens: number };
  toolCalls: Array<{ name: string }>;
}

const nearestRank = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.max(1, Math.ceil(q * values.length)) - 1];

describe.each(testBackends())('analytics from recorded answers on $kind', (backend) => {
  let t: TestApp;
  let support: string;
  let ada: string;
  let otherKey: string;
  const answers: Answer[] = [];

  async function ask(body: Record<string, unknown>): Promise<Answer> {
    const res = await t.request({ method: 'POST', url: '/query', body });
    expect(res.statusCode, res.body).toBe(200);
    const answer = res.json() as Answer;
    answers.push(answer);
    return answer;
  }
  const get = async (url: string, as?: string) => {
    const res = await t.request({ method: 'GET', url, ...(as ? { as } : {}) });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  };

  beforeAll(async () => {
    t = await createTestApp({ backend, overrides: { clock: manualClock(new Date('2026-03-10T12:00:00.000Z')) } });
    support = await seedSupport(t);
    ada = (await createPersona(t, { name: 'Ada' })).id;
    otherKey = (await t.ctx.services.auth.createWorkspace('other')).key.key;

    const s1 = await ask({ personaId: support, message: 'How long do refunds take?', userId: 'u1' });
    await ask({ personaId: support, message: 'And exceptions?', sessionId: s1.sessionId });
    const s2 = await ask({ personaId: support, message: TOOL_MESSAGE, enableMCPTools: true });
    // A call with arguments the tool refuses is recorded as failed (same session, no new conversation).
    await ask({ personaId: support, message: '/tool knowledge.search {"nope":1}', enableMCPTools: true, sessionId: s2.sessionId });
    const s3 = await ask({ personaId: ada, message: 'hello' });
    for (const [answer, rating] of [[s1, 5], [s2, 2], [s3, 4]] as const) {
      const res = await t.request({ method: 'POST', url: `/sessions/${answer.sessionId}/feedback`, body: { rating } });
      expect(res.statusCode, res.body).toBe(201);
    }
    // A failed answer: numbers only (the offline model cannot fail, so it is written directly).
    await recordInteraction(t, { workspace_id: await workspaceOf(t), persona_id: support, started_at: '2026-03-10T11:00:00.000Z', latency_ms: 9_999, error: 'upstream_error' });
    // Deleting a session removes its content, never its numbers.
    expect((await t.request({ method: 'DELETE', url: `/sessions/${s3.sessionId}` })).statusCode).toBe(204);
  });
  afterAll(async () => t.close());

  it('counts conversations, ratings and response times as recorded, the deleted session included', async () => {
    const body = await get('/business/analytics');
    const latencies = answers.map((a) => a.latencyMs);
    expect(body.timeframe).toBe('7d');
    expect(body.to).toBe('2026-03-10T12:00:00.000Z');
    expect(body.from).toBe('2026-03-03T12:00:00.000Z');
    expect(body.metrics.conversations.total).toBe(3);
    expect(body.metrics.conversations.series).toHaveLength(8);
    expect(body.metrics.conversations.series.at(-1)).toEqual({ start: '2026-03-10T00:00:00.000Z', value: 3 });
    expect(body.metrics.conversations.series.slice(0, 7).every((p: { value: number }) => p.value === 0)).toBe(true);
    expect(body.metrics.satisfaction).toMatchObject({ average: 3.67, count: 3 });
    expect(body.metrics.satisfaction.series[0].value).toBeNull();
    expect(body.metrics.satisfaction.series.at(-1).value).toBe(3.67);
    expect(body.metrics.response_time).toMatchObject({
      avgMs: Math.round(latencies.reduce((a, b) => a + b, 0) / latencies.length),
      p50Ms: nearestRank(latencies, 0.5),
      p95Ms: nearestRank(latencies, 0.95),
    });
    expect(body.metrics.response_time.p95Ms).toBeLessThan(9_999);

    const only = await get('/business/analytics?metrics=satisfaction,conversations');
    expect(Object.keys(only.metrics)).toEqual(['conversations', 'satisfaction']);
    expect(only.metrics.conversations.total).toBe(3);
  });

  it('filters by persona', async () => {
    const body = await get(`/business/analytics?personaId=${ada}`);
    expect(body.metrics.conversations.total).toBe(1);
    expect(body.metrics.satisfaction).toMatchObject({ average: 4, count: 1 });
    expect(body.metrics.response_time.p50Ms).toBe(answers[4]!.latencyMs);
  });

  it('reports conversations by persona with the recent sessions that still exist', async () => {
    const body = await get('/business/analytics/conversations?timeframe=24h');
    expect(body.total).toBe(3);
    expect(body.series).toHaveLength(25);
    expect(body.series.find((p: { start: string }) => p.start === '2026-03-10T12:00:00.000Z').value).toBe(3);
    expect(body.byPersona).toEqual([
      { personaId: support, count: 2 },
      { personaId: ada, count: 1 },
    ]);
    expect(body.byChannel).toEqual([]);
    expect(body.recent.map((s: { id: string }) => s.id).sort()).toEqual([answers[0]!.sessionId, answers[2]!.sessionId].sort());
    expect(body.recent.find((s: { id: string }) => s.id === answers[0]!.sessionId)).toMatchObject({ personaId: support, userId: 'u1', messageCount: 4 });
  });

  it('reports latency, tokens, errors and tool calls', async () => {
    const body = await get('/business/analytics/performance');
    const latencies = answers.map((a) => a.latencyMs);
    const ttfts = ((await t.ctx.db.prepare<Record<string, unknown>>('SELECT ttft_ms FROM interactions WHERE error IS NULL AND ttft_ms IS NOT NULL').all()).map((r) => Object.values(r)[0]) as number[]);
    expect(body.latency).toEqual({ p50Ms: nearestRank(latencies, 0.5), p95Ms: nearestRank(latencies, 0.95), p99Ms: nearestRank(latencies, 0.99) });
    expect(body.firstTokenMs).toEqual({ p50Ms: ttfts.length ? nearestRank(ttfts, 0.5) : null, p95Ms: ttfts.length ? nearestRank(ttfts, 0.95) : null });
    expect(body.tokens).toEqual({
      prompt: answers.reduce((a, x) => a + x.usage.promptTokens, 0),
      completion: answers.reduce((a, x) => a + x.usage.completionTokens, 0),
    });
    expect(body.tokens.prompt).toBeGreaterThan(0);
    expect(body.errors).toEqual({ count: 1, rate: 0.1667 });
    expect(answers[2]!.toolCalls.map((c) => c.name)).toEqual(['knowledge.search']);
    expect(body.tools).toEqual({
      calls: 2,
      failures: 1,
      byTool: [{ name: 'knowledge.search', calls: 2, failures: 1 }],
    });
    const adaOnly = await get(`/business/analytics/performance?personaId=${ada}`);
    expect(adaOnly.tools.calls).toBe(0);
    expect(adaOnly.errors).toEqual({ count: 0, rate: 0 });
  });

  it('keeps every route to its workspace', async () => {
    const overview = await get('/business/analytics', otherKey);
    expect(overview.metrics.conversations.total).toBe(0);
    expect(overview.metrics.satisfaction).toMatchObject({ average: null, count: 0 });
    expect(overview.metrics.response_time).toMatchObject({ avgMs: null, p50Ms: null, p95Ms: null });
    expect(overview.metrics.response_time.series.every((p: { value: null }) => p.value === null)).toBe(true);
    const conversations = await get('/business/analytics/conversations', otherKey);
    expect(conversations).toMatchObject({ total: 0, byPersona: [], byChannel: [], recent: [] });
    const performance = await get('/business/analytics/performance', otherKey);
    expect(performance).toMatchObject({ latency: { p50Ms: null }, tokens: { prompt: 0, completion: 0 }, errors: { count: 0, rate: 0 }, tools: { calls: 0, byTool: [] } });
    for (const url of ['/business/analytics', '/business/analytics/conversations', '/business/analytics/performance']) {
      expectProblem(await t.request({ method: 'GET', url: `${url}?personaId=${support}`, as: otherKey }), 404, 'not_found');
    }
    const exported = await t.request({ method: 'POST', url: '/business/analytics/export', as: otherKey, body: { timeframe: '7d', dataset: 'messages', format: 'json' } });
    expect(exported.json()).toEqual([]);
  });

  it('answers the same through the get_analytics MCP tool', async () => {
    const client = await connectInMemory(t);
    try {
      expect(await callOk(client, 'get_analytics', { timeframe: '7d' })).toEqual(await get('/business/analytics?timeframe=7d'));
      expect(await callOk(client, 'get_analytics', { personaId: ada, metrics: 'conversations' })).toEqual(await get(`/business/analytics?personaId=${ada}&metrics=conversations`));
      expect(await callError(client, 'get_analytics', { timeframe: '0d' })).toMatch(/timeframe/);
      expect(await callError(client, 'get_analytics', { personaId: 'per_nope' })).toMatch(/not found/i);
      expect(await callError(client, 'get_analytics', { channelId: 'chn_nope' })).toMatch(/not found/i);
    } finally {
      await client.close();
    }
    const other = await connectInMemory(t, otherKey);
    try {
      expect(await callError(other, 'get_analytics', { personaId: support })).toMatch(/not found/i);
      expect((await callOk(other, 'get_analytics', {})).metrics.conversations.total).toBe(0);
    } finally {
      await other.close();
    }
  });
});
