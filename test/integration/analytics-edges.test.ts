// API.md §8 analytics windows at exact instants (fixed clock, rows written directly), and the
// validation of every query: bad timeframes and metrics, unknown parameters, unknown ids.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../../src/lib/clock.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { createPersona, recordFeedback, recordInteraction, workspaceOf } from '../helpers/factories.js';
import { expectProblem } from '../helpers/problem.js';

const NOW = '2026-03-10T15:30:00.000Z';
const at = (offsetMs: number) => new Date(Date.parse(NOW) + offsetMs).toISOString();
const H = 3_600_000;

describe.each(testBackends())('analytics windows and buckets on $kind', (backend) => {
  let t: TestApp;
  let ws: string;
  let persona: string;

  beforeAll(async () => {
    t = await createTestApp({ backend, overrides: { clock: manualClock(new Date(NOW)) } });
    ws = await workspaceOf(t);
    persona = (await createPersona(t)).id;
    const open = (started_at: string, latency_ms = 100) => recordInteraction(t, { workspace_id: ws, persona_id: persona, started_at, latency_ms, new_session: 1 });
    await open(at(-47 * H)); // exactly `from` of 47h: counted
    await open(at(-47 * H - 1)); // 1 ms before: not counted by 47h, counted by 48h
    await open(at(0), 300); // exactly now: counted
    await open(at(-2 * H), 200);
    await recordInteraction(t, { workspace_id: ws, persona_id: persona, started_at: at(-2 * H), latency_ms: 50_000, error: 'cancelled' });
    await recordFeedback(t, { workspace_id: ws, persona_id: persona, rating: 5, created_at: at(-47 * H) });
    await recordFeedback(t, { workspace_id: ws, persona_id: persona, rating: 2, created_at: at(-2 * H) });
    await recordFeedback(t, { workspace_id: ws, persona_id: persona, rating: 3, created_at: at(-2 * H + 1) });
  });
  afterAll(async () => t.close());

  const overview = async (query: string) => {
    const res = await t.request({ method: 'GET', url: `/business/analytics?${query}` });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  };

  it('47h: hourly, from the instant now − 47h inclusive to now inclusive, empty hours present', async () => {
    const body = await overview('timeframe=47h');
    expect(body.from).toBe('2026-03-08T16:30:00.000Z');
    const conv = body.metrics.conversations;
    expect(conv.total).toBe(3);
    expect(conv.series).toHaveLength(48);
    expect(conv.series[0]).toEqual({ start: '2026-03-08T16:00:00.000Z', value: 1 });
    expect(conv.series.at(-3)).toEqual({ start: '2026-03-10T13:00:00.000Z', value: 1 });
    expect(conv.series.at(-1)).toEqual({ start: '2026-03-10T15:00:00.000Z', value: 1 });
    expect(conv.series.filter((p: { value: number }) => p.value === 0)).toHaveLength(45);
    const sat = body.metrics.satisfaction;
    expect(sat).toMatchObject({ average: 3.33, count: 3 });
    expect(sat.series[0].value).toBe(5);
    expect(sat.series.at(-3).value).toBe(2.5);
    expect(sat.series[1].value).toBeNull();
    const rt = body.metrics.response_time;
    expect(rt).toMatchObject({ avgMs: 200, p50Ms: 200, p95Ms: 300 });
    expect(rt.series[1].value).toBeNull();
    expect(rt.series.at(-3).value).toBe(200);
  });

  it('48h: still hourly, and takes the answer 1 ms earlier', async () => {
    const conv = (await overview('timeframe=48h&metrics=conversations')).metrics.conversations;
    expect(conv.total).toBe(4);
    expect(conv.series).toHaveLength(49);
    expect(conv.series[0]).toEqual({ start: '2026-03-08T15:00:00.000Z', value: 0 });
    expect(conv.series[1]).toEqual({ start: '2026-03-08T16:00:00.000Z', value: 2 });
  });

  it('49h and 3d: daily buckets aligned to UTC midnight', async () => {
    const d49 = (await overview('timeframe=49h&metrics=conversations')).metrics.conversations;
    expect(d49.series).toEqual([
      { start: '2026-03-08T00:00:00.000Z', value: 2 },
      { start: '2026-03-09T00:00:00.000Z', value: 0 },
      { start: '2026-03-10T00:00:00.000Z', value: 2 },
    ]);
    const d3 = await overview('timeframe=3d');
    expect(d3.metrics.conversations.series.map((p: { start: string }) => p.start)).toEqual([
      '2026-03-07T00:00:00.000Z',
      '2026-03-08T00:00:00.000Z',
      '2026-03-09T00:00:00.000Z',
      '2026-03-10T00:00:00.000Z',
    ]);
    expect(d3.metrics.satisfaction.series.map((p: { value: number | null }) => p.value)).toEqual([null, 5, null, 2.5]);
    expect((await overview('timeframe=1w')).metrics.conversations.series).toHaveLength(8);
  });

  it('refuses bad timeframes, metrics and parameters naming the field', async () => {
    const bad = (url: string, field: string) => t.request({ method: 'GET', url }).then((res) => expectProblem(res, 400, 'validation_failed', field));
    for (const tf of ['7x', '0d', '367d', '53w', '8785h', 'week']) await bad(`/business/analytics?timeframe=${tf}`, 'timeframe');
    await bad('/business/analytics?metrics=conversations,revenue', 'metrics');
    await bad('/business/analytics?metrics=', 'metrics');
    await bad('/business/analytics?foo=1', 'foo');
    await bad('/business/analytics/conversations?metrics=conversations', 'metrics');
    await bad('/business/analytics/performance?timeframe=0h', 'timeframe');
    expect((await t.request({ method: 'GET', url: '/business/analytics?timeframe=366d' })).statusCode).toBe(200);
  });

  it('answers 404 for an unknown persona or channel on every route', async () => {
    for (const url of ['/business/analytics', '/business/analytics/conversations', '/business/analytics/performance']) {
      expectProblem(await t.request({ method: 'GET', url: `${url}?personaId=per_unknown` }), 404, 'not_found');
      expectProblem(await t.request({ method: 'GET', url: `${url}?channelId=chn_unknown` }), 404, 'not_found');
      expectProblem(await t.request({ method: 'GET', url: `${url}?personaId=${'p'.repeat(65)}` }), 404, 'not_found');
    }
  });

  it('needs the read scope and a key', async () => {
    expectProblem(await t.request({ method: 'GET', url: '/business/analytics', as: null }), 401, 'unauthorized');
    const noRead = await t.request({ method: 'POST', url: '/auth/api-keys', body: { name: 'w', scopes: ['write'] } });
    const key = noRead.json().key as string;
    // `write` implies `read` (API.md §1), so a write key reads analytics and exports.
    expect((await t.request({ method: 'GET', url: '/business/analytics', as: key })).statusCode).toBe(200);
    const readKey = (await t.request({ method: 'POST', url: '/auth/api-keys', body: { name: 'r', scopes: ['read'] } })).json().key as string;
    const exported = await t.request({ method: 'POST', url: '/business/analytics/export', as: readKey, body: { timeframe: '1d', dataset: 'metrics', format: 'json' } });
    expect(exported.statusCode, exported.body).toBe(200);
  });
});

describe.each(testBackends())('analytics times of any size on $kind', (backend) => {
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp({ backend, overrides: { clock: manualClock(new Date(NOW)) } });
  });
  afterAll(async () => t.close());

  it('reads zero, multi-digit, huge and negative times exactly (the list each report parses)', async () => {
    const ws = await workspaceOf(t);
    const persona = (await createPersona(t)).id;
    // Latencies -3 (a row written by another tool), 0, 7 and 10^12 ms; first-text times on two of them.
    const rows: Array<[number, number | null]> = [[-3, null], [0, 0], [7, null], [1e12, 5e11]];
    for (const [latency_ms, ttft_ms] of rows) await recordInteraction(t, { workspace_id: ws, persona_id: persona, started_at: at(-H), latency_ms, ttft_ms });
    const perf = await t.request({ method: 'GET', url: `/business/analytics/performance?timeframe=24h&personaId=${persona}` });
    expect(perf.statusCode, perf.body).toBe(200);
    expect(perf.json().latency).toEqual({ p50Ms: 0, p95Ms: 1e12, p99Ms: 1e12 });
    expect(perf.json().firstTokenMs).toEqual({ p50Ms: 0, p95Ms: 5e11 });
    const over = await t.request({ method: 'GET', url: `/business/analytics?timeframe=24h&metrics=response_time&personaId=${persona}` });
    expect(over.statusCode, over.body).toBe(200);
    expect(over.json().metrics.response_time).toMatchObject({ avgMs: 250_000_000_001, p50Ms: 0, p95Ms: 1e12 });
  });
});
