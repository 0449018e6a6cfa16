// API.md §5 sessions: list filters, detail, feedback feeding the interaction record, deletion that
// keeps only numbers, and isolation between workspaces.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { expectProblem } from '../helpers/problem.js';

describe.each(testBackends())('sessions on $kind', (backend) => {
  let t: TestApp;
  let ada: string;
  let bob: string;
  let bKey: string;

  async function persona(name: string, as?: string): Promise<string> {
    const res = await t.request({ method: 'POST', url: '/personas', body: { name, instructions: 'Be brief.' }, ...(as ? { as } : {}) });
    return res.json().id;
  }
  async function ask(personaId: string, message: string, extra: Record<string, unknown> = {}, as?: string) {
    const res = await t.request({ method: 'POST', url: '/query', body: { personaId, message, ...extra }, ...(as ? { as } : {}) });
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as { sessionId: string; messageId: string };
  }

  beforeAll(async () => {
    t = await createTestApp({ backend });
    ada = await persona('Ada');
    bob = await persona('Bob');
    bKey = (await t.ctx.services.auth.createWorkspace('b')).key.key;
  });
  afterAll(async () => t.close());

  it('lists newest first with persona and user filters, paginated', async () => {
    const s1 = await ask(ada, 'one', { userId: 'u1' });
    const s2 = await ask(bob, 'two', { userId: 'u2' });
    const s3 = await ask(ada, 'three', { userId: 'u2' });
    const ids = (url: string) => t.request({ method: 'GET', url }).then((r) => r.json().data.map((s: { id: string }) => s.id));
    expect(await ids('/sessions')).toEqual([s3.sessionId, s2.sessionId, s1.sessionId]);
    expect(await ids(`/sessions?personaId=${ada}`)).toEqual([s3.sessionId, s1.sessionId]);
    expect(await ids('/sessions?userId=u2')).toEqual([s3.sessionId, s2.sessionId]);
    expect(await ids(`/sessions?personaId=${ada}&userId=u1`)).toEqual([s1.sessionId]);
    const page = (await t.request({ method: 'GET', url: '/sessions?limit=2' })).json();
    expect(page.data).toHaveLength(2);
    const rest = (await t.request({ method: 'GET', url: `/sessions?limit=2&cursor=${page.nextCursor}` })).json();
    expect(rest.data.map((s: { id: string }) => s.id)).toEqual([s1.sessionId]);
    expectProblem(await t.request({ method: 'GET', url: '/sessions?color=red' }), 400, 'validation_failed', 'color');
  });

  it('answers 404 for a persona or channel filter that names nothing of the workspace', async () => {
    const other = await persona('Other', bKey);
    for (const url of ['/sessions?personaId=per_none', `/sessions?personaId=${other}`, '/sessions?personaId=', `/sessions?personaId=${'p'.repeat(65)}`]) {
      expectProblem(await t.request({ method: 'GET', url }), 404, 'not_found');
    }
    expect((await t.request({ method: 'GET', url: `/sessions?personaId=${other}`, as: bKey })).statusCode).toBe(200);
    // No channels exist yet (API.md §9 lands later), so every channel id is unknown.
    expectProblem(await t.request({ method: 'GET', url: '/sessions?channelId=chn_none' }), 404, 'not_found');
    expectProblem(await t.request({ method: 'GET', url: `/sessions?personaId=${ada}&channelId=chn_none` }), 404, 'not_found');
  });

  it('takes feedback on the latest answer or a named one, and feeds the interaction record', async () => {
    const a = await ask(ada, 'first');
    const b = await ask(ada, 'second', { sessionId: a.sessionId });
    const latest = await t.request({ method: 'POST', url: `/sessions/${a.sessionId}/feedback`, body: { rating: 5, comment: 'great' } });
    expect(latest.statusCode, latest.body).toBe(201);
    expect(latest.headers.location).toBe(`/sessions/${a.sessionId}`);
    expect(latest.json()).toMatchObject({ sessionId: a.sessionId, messageId: b.messageId, rating: 5, comment: 'great' });
    const named = await t.request({ method: 'POST', url: `/sessions/${a.sessionId}/feedback`, body: { rating: 2, messageId: a.messageId } });
    expect(named.json().messageId).toBe(a.messageId);
    const rating = async (id: string) => ((await t.ctx.db.prepare('SELECT rating FROM interactions WHERE message_id = ?').first(id)) as { rating: number }).rating;
    expect(await rating(b.messageId)).toBe(5);
    expect(await rating(a.messageId)).toBe(2);

    expectProblem(await t.request({ method: 'POST', url: `/sessions/${a.sessionId}/feedback`, body: { rating: 6 } }), 400, 'validation_failed', 'rating');
    expectProblem(await t.request({ method: 'POST', url: `/sessions/${a.sessionId}/feedback`, body: { rating: 3.5 } }), 400, 'validation_failed', 'rating');
    expectProblem(await t.request({ method: 'POST', url: `/sessions/${a.sessionId}/feedback`, body: { rating: 3, messageId: 'msg_nope' } }), 404, 'not_found');
    // A user message is not an answer.
    const userMessage = (await t.request({ method: 'GET', url: `/sessions/${a.sessionId}` })).json().messages[0].id;
    expectProblem(await t.request({ method: 'POST', url: `/sessions/${a.sessionId}/feedback`, body: { rating: 3, messageId: userMessage } }), 404, 'not_found');
    expectProblem(await t.request({ method: 'POST', url: '/sessions/ses_nope/feedback', body: { rating: 3 } }), 404, 'not_found');
  });

  it('deletes a session and its messages; analytics keep the numbers only', async () => {
    const a = await ask(ada, 'secret question', { metadata: { ticket: 'T-1' } });
    await t.request({ method: 'POST', url: `/sessions/${a.sessionId}/feedback`, body: { rating: 4, comment: 'private words' } });
    const del = await t.request({ method: 'DELETE', url: `/sessions/${a.sessionId}` });
    expect(del.statusCode).toBe(204);
    expectProblem(await t.request({ method: 'GET', url: `/sessions/${a.sessionId}` }), 404, 'not_found');
    expectProblem(await t.request({ method: 'DELETE', url: `/sessions/${a.sessionId}` }), 404, 'not_found');
    const messages = (await t.ctx.db.prepare('SELECT count(*) AS n FROM messages WHERE session_id = ?').first(a.sessionId)) as { n: number };
    expect(messages.n).toBe(0);
    const kept = (await t.ctx.db.prepare("SELECT * FROM interactions WHERE persona_id = ? AND session_id IS NULL AND rating = 4").all(ada)) as Record<string, unknown>[];
    expect(kept).toHaveLength(1);
    expect(kept[0]).toMatchObject({ message_id: null, metadata: null });
    expect(kept[0]!.latency_ms).toEqual(expect.any(Number));
    const feedback = (await t.ctx.db.prepare('SELECT * FROM feedback WHERE rating = 4').all()) as Record<string, unknown>[];
    expect(feedback).toEqual([expect.objectContaining({ session_id: null, message_id: null, comment: null, persona_id: ada })]);
    // Continuing a deleted session is a 404.
    expectProblem(await t.request({ method: 'POST', url: '/query', body: { personaId: ada, message: 'again', sessionId: a.sessionId } }), 404, 'not_found');
  });

  it('keeps workspaces apart: another workspace’s session and persona are 404 everywhere', async () => {
    const a = await ask(ada, 'workspace A question');
    const bPersona = await persona('B persona', bKey);
    const list = (await t.request({ method: 'GET', url: '/sessions', as: bKey })).json();
    expect(list.data).toEqual([]);
    expectProblem(await t.request({ method: 'GET', url: `/sessions/${a.sessionId}`, as: bKey }), 404, 'not_found');
    expectProblem(await t.request({ method: 'POST', url: `/sessions/${a.sessionId}/feedback`, body: { rating: 1 }, as: bKey }), 404, 'not_found');
    expectProblem(await t.request({ method: 'DELETE', url: `/sessions/${a.sessionId}`, as: bKey }), 404, 'not_found');
    expectProblem(await t.request({ method: 'POST', url: '/query', body: { personaId: ada, message: 'hi' }, as: bKey }), 404, 'not_found');
    // B's own persona cannot write into A's session: 404, not 409, so it learns nothing of it.
    expectProblem(await t.request({ method: 'POST', url: '/query', body: { personaId: bPersona, message: 'hi', sessionId: a.sessionId }, as: bKey }), 404, 'not_found');
    expectProblem(await t.request({ method: 'POST', url: `/query/stream`, body: { personaId: ada, message: 'hi' }, as: bKey }), 404, 'not_found');
    expectProblem(await t.request({ method: 'POST', url: `/api/ai-sdk/agents/${ada}/chat`, body: { messages: [{ role: 'user', content: 'hi' }] }, as: bKey }), 404, 'not_found');
    expect((await t.request({ method: 'GET', url: `/sessions/${a.sessionId}` })).statusCode).toBe(200);
  });

  it('needs the write scope to ask and read scope to list', async () => {
    const created = await t.request({ method: 'POST', url: '/auth/api-keys', body: { name: 'reader', scopes: ['read'] } });
    expect(created.statusCode, created.body).toBe(201);
    const reader = created.json().key;
    expect((await t.request({ method: 'GET', url: '/sessions', as: reader })).statusCode).toBe(200);
    expectProblem(await t.request({ method: 'POST', url: '/query', body: { personaId: ada, message: 'hi' }, as: reader }), 403, 'forbidden');
    expectProblem(await t.request({ method: 'GET', url: `/api/ai-sdk/agents/${ada}/chat?message=hi`, as: reader }), 403, 'forbidden');
    expectProblem(await t.request({ method: 'GET', url: '/sessions', as: null }), 401, 'unauthorized');
  });
});
