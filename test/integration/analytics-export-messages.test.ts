// POST /business/analytics/export, dataset `messages` (API.md §8): the conversations' text, one
// record per user message and answer, in CSV (read back by a real CSV parser), JSON and NDJSON;
// formula neutralising that keeps the text readable; the answer's figures and rating; tool rounds,
// deleted sessions, older messages and other workspaces left out; batches beyond one read.
import { systemActor } from '../../src/core/auth/actor.js';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MESSAGE_COLUMNS } from '../../src/business/analytics/analytics.service.js';
import { manualClock } from '../../src/lib/clock.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { createAbTest, createPersona } from '../helpers/factories.js';

type Message = Record<string, unknown>;

/** Every text a spreadsheet would run, each at the start of a question; the first spans lines and holds quotes and commas. */
const FORMULAS = [
  '=HYPERLINK("http://evil.example","click"), then\r\na second line with "quotes"',
  '+1+2',
  '-2+3',
  '@SUM(A1:A3)',
  '\tindented =1+1',
  '\rcarriage return first',
];
const FORMULA_START = /^[=+\-@\t\r]/;
const TOOL_MESSAGE = '/tool knowledge.search {"query":"refunds"}';

describe.each(testBackends())('analytics export: messages on $kind', (backend) => {
  let t: TestApp;
  const clock = manualClock(new Date('2026-03-01T12:00:00.000Z'));
  let persona: string;
  let tooled: string;
  let abTest: string;
  let otherKey: string;
  /** Each exchange as /query answered it, in the order asked. */
  const asked: Array<{ message: string; userId: string | null; sessionId: string; messageId: string; response: string; personaId: string; abTestId: string | null; variant: string | null }> = [];

  const exportFile = (body: Record<string, unknown>, as?: string) =>
    t.request({ method: 'POST', url: '/business/analytics/export', body, ...(as ? { as } : {}) });
  const exportJson = async (body: Record<string, unknown> = {}, as?: string): Promise<Message[]> => {
    const res = await exportFile({ timeframe: '7d', dataset: 'messages', format: 'json', ...body }, as);
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as Message[];
  };
  async function ask(body: Record<string, unknown>, as?: string) {
    const res = await t.request({ method: 'POST', url: '/query', body, ...(as ? { as } : {}) });
    expect(res.statusCode, res.body).toBe(200);
    const a = res.json();
    clock.advance(1_000);
    return { message: body.message as string, userId: (body.userId as string | undefined) ?? null, ...a } as (typeof asked)[number];
  }

  beforeAll(async () => {
    t = await createTestApp({ backend, overrides: { clock } });
    persona = (await createPersona(t)).id;
    tooled = (await createPersona(t, { name: 'Tooled', tools: ['knowledge.*'] })).id;

    await ask({ personaId: persona, message: 'nine days ago', userId: 'old' }); // outside 7d, inside 30d
    clock.set(new Date('2026-03-10T10:00:00.000Z'));

    const first = await ask({ personaId: persona, message: FORMULAS[0], userId: 'ann' });
    asked.push(first);
    const bob = await ask({ personaId: persona, message: FORMULAS[1], userId: 'bob' });
    asked.push(bob);
    // A follow-up in the first session by another user of the same conversation (a channel thread has several).
    asked.push(await ask({ personaId: persona, sessionId: first.sessionId, message: FORMULAS[2], userId: 'cy' }));
    // No userId: the exchange keeps the session's.
    asked.push({ ...(await ask({ personaId: persona, sessionId: bob.sessionId, message: FORMULAS[3] })), userId: 'bob' });
    asked.push(await ask({ personaId: tooled, message: TOOL_MESSAGE, enableMCPTools: true, userId: 'dee' }));
    abTest = (await createAbTest(t, { personaA: persona, personaB: tooled })).id;
    expect((await t.request({ method: 'PUT', url: `/business/ab-tests/${abTest}/start` })).statusCode).toBe(200);
    asked.push(await ask({ abTestId: abTest, message: FORMULAS[4], userId: 'eve' }));
    asked.push(await ask({ personaId: persona, message: FORMULAS[5] }));

    const gone = await ask({ personaId: persona, message: 'deleted conversation', userId: 'fay' });
    expect((await t.request({ method: 'DELETE', url: `/sessions/${gone.sessionId}` })).statusCode).toBe(204);

    // Ratings: one on the first answer by its id; one on bob's session without an id, which goes to its latest answer.
    expect((await t.request({ method: 'POST', url: `/sessions/${first.sessionId}/feedback`, body: { rating: 2, messageId: first.messageId } })).statusCode).toBe(201);
    expect((await t.request({ method: 'POST', url: `/sessions/${bob.sessionId}/feedback`, body: { rating: 5 } })).statusCode).toBe(201);

    const other = await t.ctx.services.auth.createWorkspace('other');
    otherKey = other.key.key;
    const otherPersona = (await createPersona(t, {}, otherKey)).id;
    await ask({ personaId: otherPersona, message: 'the other workspace speaks', userId: 'ann' }, otherKey);
  });
  afterAll(async () => t.close());

  it('holds every user message and answer with its text, oldest first, the figures on answers only', async () => {
    const records = await exportJson();
    for (const r of records) expect(Object.keys(r)).toEqual(MESSAGE_COLUMNS);
    const expected = asked.flatMap((a) => {
      const common = { sessionId: a.sessionId, personaId: a.personaId, abTestId: a.abTestId, variant: a.variant, channelId: null };
      return [
        { ...common, role: 'user', content: a.message, userId: a.userId, latencyMs: null, promptTokens: null, completionTokens: null, rating: null },
        { ...common, role: 'assistant', messageId: a.messageId, content: a.response, userId: a.userId },
      ];
    });
    expect(records).toHaveLength(expected.length);
    records.forEach((r, i) => expect(r).toMatchObject(expected[i]!));

    // Times are the messages' own, in order; a question and its answer are written together.
    const times = records.map((r) => r.createdAt as string);
    expect(times).toEqual([...times].sort());
    expect(times[0]).toBe('2026-03-10T10:00:00.000Z');
    // Message ids are the stored ones (GET /sessions/:id), never repeated.
    const session = (await t.request({ method: 'GET', url: `/sessions/${asked[0]!.sessionId}` })).json();
    expect(records.filter((r) => r.sessionId === asked[0]!.sessionId).map((r) => r.messageId)).toEqual(session.messages.map((m: { id: string }) => m.id));
    expect(new Set(records.map((r) => r.messageId)).size).toBe(records.length);

    const answers = records.filter((r) => r.role === 'assistant');
    for (const a of answers) {
      expect(a.latencyMs).toEqual(expect.any(Number));
      expect(a.promptTokens).toEqual(expect.any(Number));
      expect(a.completionTokens).toEqual(expect.any(Number));
    }
    expect(answers.map((a) => a.rating)).toEqual([2, null, null, 5, null, null, null]);
    // The A/B test's exchange carries its test and variant.
    expect(records.filter((r) => r.abTestId === abTest)).toHaveLength(2);
    expect(records.find((r) => r.abTestId === abTest)!.variant).toMatch(/^[AB]$/);
  });

  it('leaves out tool rounds, deleted sessions, older messages and other workspaces', async () => {
    const records = await exportJson();
    const toolSession = records.filter((r) => r.sessionId === asked[4]!.sessionId);
    expect(toolSession.map((r) => r.role)).toEqual(['user', 'assistant']);
    expect(toolSession[1]!.content).toContain('knowledge.search');
    const stored = (await t.request({ method: 'GET', url: `/sessions/${asked[4]!.sessionId}` })).json();
    expect(stored.messages.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);

    const texts = records.map((r) => r.content);
    expect(texts).not.toContain('deleted conversation');
    expect(texts).not.toContain('nine days ago');
    expect(texts).not.toContain('the other workspace speaks');
    expect((await exportJson({ timeframe: '30d' })).filter((r) => r.role === 'user').map((r) => r.content)).toEqual(['nine days ago', ...asked.map((a) => a.message)]);

    const theirs = await exportJson({}, otherKey);
    expect(theirs.map((r) => [r.role, r.content === 'the other workspace speaks' || r.role === 'assistant'])).toEqual([['user', true], ['assistant', true]]);
    expect(theirs.every((r) => !records.some((mine) => mine.messageId === r.messageId || mine.sessionId === r.sessionId))).toBe(true);
  });

  it('writes CSV with one header row, formula-like cells neutralised and every text readable, RFC 4180 quoted', async () => {
    const json = await exportJson();
    const res = await exportFile({ timeframe: '7d', dataset: 'messages', format: 'csv' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toBe('text/csv; charset=utf-8');
    expect(res.headers['content-disposition']).toBe('attachment; filename="switchboard-messages-2026-03-10.csv"');
    expect(res.body.split('\r\n', 1)[0]).toBe(MESSAGE_COLUMNS.join(','));
    const rows = parse(res.body, { columns: true }) as Array<Record<string, string>>;
    expect(rows).toHaveLength(json.length);
    // No cell starts with what a spreadsheet would run.
    for (const row of rows) for (const cell of Object.values(row)) expect(cell).not.toMatch(FORMULA_START);
    // The questions read as asked, behind one apostrophe; line breaks, quotes and commas intact.
    const questions = rows.filter((r) => r.role === 'user').map((r) => r.content);
    expect(questions).toEqual(asked.map((a) => (FORMULA_START.test(a.message) ? `'${a.message}` : a.message)));
    expect(questions[0]).toBe(`'${FORMULAS[0]}`);
    // Every other cell is the JSON value as text; null is an empty cell, on user messages the answer's columns.
    rows.forEach((row, i) => {
      for (const column of MESSAGE_COLUMNS) {
        const value = json[i]![column];
        const text = value === null ? '' : String(value);
        expect(row[column]).toBe(FORMULA_START.test(text) && typeof value === 'string' ? `'${text}` : text);
      }
    });
    expect(rows[0]).toMatchObject({ role: 'user', latencyMs: '', promptTokens: '', completionTokens: '', rating: '' });
    expect(rows[1]).toMatchObject({ role: 'assistant', rating: '2' });
  });

  it('writes NDJSON one record a line, the same records as JSON', async () => {
    const json = await exportJson();
    const res = await exportFile({ timeframe: '7d', dataset: 'messages', format: 'ndjson' });
    expect(res.headers['content-type']).toBe('application/x-ndjson; charset=utf-8');
    expect(res.headers['content-disposition']).toBe('attachment; filename="switchboard-messages-2026-03-10.ndjson"');
    const lines = res.body.split('\n');
    expect(lines.pop()).toBe('');
    expect(lines.map((l) => JSON.parse(l))).toEqual(json);
  });

  it('reads more than one batch without losing or repeating a message at equal times', async () => {
    // The clock stands still: every message below has the same createdAt, so a batch ends inside a run of equal times.
    const { workspace, key } = await t.ctx.services.auth.createWorkspace('bulk');
    const bulkPersona = (await createPersona(t, {}, key.key)).id;
    const sessions: string[] = [];
    const answerOf = new Map<string, string>();
    const send = async (i: number, sessionId?: string) => {
      const res = await t.request({ method: 'POST', url: '/query', as: key.key, body: { personaId: bulkPersona, message: `question ${i}`, userId: `u${i}`, ...(sessionId ? { sessionId } : {}) } });
      expect(res.statusCode, res.body).toBe(200);
      answerOf.set(`question ${i}`, res.json().messageId);
      return res.json().sessionId as string;
    };
    for (let i = 0; i < 10; i++) sessions.push(await send(i));
    // The rest as follow-ups in those sessions, 30 at a time: each session has exchanges of several users.
    for (let i = 10; i < 520; i += 30) await Promise.all(Array.from({ length: Math.min(30, 520 - i) }, (_, k) => send(i + k, sessions[(i + k) % 10])));

    const batches: number[] = [];
    const records: Message[] = [];
    const file = await t.ctx.services.analytics.export(systemActor(workspace.id), { timeframe: { label: '1d', ms: 86_400_000 }, metrics: [], dataset: 'messages', format: 'json' });
    for await (const batch of file.batches) {
      batches.push(batch.length);
      records.push(...batch);
    }
    expect(batches).toEqual([1_000, 40]);
    expect(new Set(records.map((r) => r.createdAt)).size).toBe(1);
    expect(new Set(records.map((r) => r.messageId)).size).toBe(1_040);
    // Question, then its answer (the one /query returned), with the user of that exchange on both.
    for (let at = 0; at < records.length; at += 2) {
      const [question, answer] = [records[at]!, records[at + 1]!];
      const i = Number(/^question (\d+)$/.exec(question.content as string)![1]);
      expect([question.role, question.userId, answer.role, answer.messageId, answer.userId, answer.sessionId]).toEqual(['user', `u${i}`, 'assistant', answerOf.get(`question ${i}`), `u${i}`, question.sessionId]);
    }
    expect(records.filter((r) => r.role === 'user').map((r) => r.content).sort()).toEqual(Array.from({ length: 520 }, (_, i) => `question ${i}`).sort());
  });
});
