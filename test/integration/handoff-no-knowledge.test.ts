// Issue 29, the `handoff.noKnowledge` rule through the HTTP API, on both backends: after N answers in
// a row in one session for which the knowledge had nothing, the conversation goes to the persona's
// team (trigger `rule`); the answer that reaches N is still the user's. An answer with sources, or a
// handoff (its notices), starts the count again; no rule, or no team, never hands over. Bad values
// are a 400 naming the field.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../../src/lib/clock.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { addSource, createPersona, createTeam } from '../helpers/factories.js';
import { testBackends } from '../helpers/postgres.js';
import { expectProblem } from '../helpers/problem.js';

/** Questions the knowledge has nothing for, and one it answers. */
const NOTHING = ['zeppelin xylophone', 'quasar marmalade', 'nebula accordion', 'jukebox quiz', 'kazoo'];
const KNOWN = 'How long do refunds take?';

describe.each(testBackends())('handoff when no knowledge is found on $kind', (backend) => {
  let t: TestApp;
  // Wednesday 25 November 2026, 10:00 UTC: the teams' members are available.
  const clock = manualClock(new Date('2026-11-25T10:00:00.000Z'));

  beforeAll(async () => {
    t = await createTestApp({ backend, overrides: { clock } });
    await addSource(t, { kind: 'text', name: 'Refund policy', content: 'Refunds are issued within 14 days of purchase. Contact the billing team to start one.' });
    await t.ctx.services.knowledge.idle();
  });
  afterAll(async () => t?.close());

  const post = (url: string, body: unknown = {}) => t.request({ method: 'POST', url, body });
  const get = (url: string) => t.request({ method: 'GET', url });
  /** A team of one available member and a persona that hands over to it by `handoff`. */
  const setUp = async (member: string, handoff: Record<string, unknown>) => {
    const team = await createTeam(t, { name: 'Support', members: [member] });
    return createPersona(t, { name: 'Desk', teamId: team.id, handoff });
  };
  const ask = async (personaId: string, message: string, sessionId?: string) => {
    const res = await post('/query', { personaId, message, ...(sessionId ? { sessionId } : {}) });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  };
  /** Asks a question the knowledge has nothing for, checking the answer says so. */
  const askNothing = async (personaId: string, n: number, sessionId?: string) => {
    const answer = await ask(personaId, NOTHING[n]!, sessionId);
    expect(answer.sources).toEqual([]);
    expect(answer.response).toMatch(/found nothing/);
    return answer;
  };
  /** Every handoff of the session, oldest first. */
  const handoffsOf = async (sessionId: string) => {
    const res = await get('/handoffs?limit=100');
    expect(res.statusCode, res.body).toBe(200);
    return (res.json().data as Array<{ id: string; sessionId: string; createdAt: string }>).filter((h) => h.sessionId === sessionId).reverse();
  };
  /** The `sources` count stored with each answer of the session, oldest first. */
  const storedSources = async (sessionId: string) =>
    (await t.ctx.db.kysely.selectFrom('interactions').select(['sources']).where('session_id', '=', sessionId).orderBy('seq').execute()).map((r) => r.sources);

  it('hands over after N answers in a row found nothing; the last answer is still delivered, then the notice', async () => {
    const persona = await setUp('ada@example.com', { noKnowledge: 2 });
    expect(persona.handoff).toEqual({ tool: false, keywords: [], lowRating: false, noKnowledge: 2 });

    const first = await askNothing(persona.id, 0);
    expect(first.handoff).toBeUndefined();
    expect(await handoffsOf(first.sessionId)).toEqual([]);

    const second = await askNothing(persona.id, 1, first.sessionId);
    expect(second.handoff).toMatchObject({ status: 'offered', member: 'ada@example.com' });
    const handoff = (await get(`/handoffs/${second.handoff.id}`)).json();
    expect(handoff).toMatchObject({ sessionId: first.sessionId, personaId: persona.id, trigger: 'rule', reason: 'No knowledge was found for 2 questions in a row.', status: 'offered' });
    expect((await handoffsOf(first.sessionId)).map((h) => h.id)).toEqual([second.handoff.id]);
    expect(await storedSources(first.sessionId)).toEqual([0, 0]);

    // The persona's answer is the conversation's, followed by the notice.
    const messages = (await get(`/sessions/${first.sessionId}`)).json().messages as Array<{ id: string; role: string; author?: string | null; content: string }>;
    expect(messages.slice(-2).map((m) => [m.role, m.author ?? null, m.content])).toEqual([
      ['assistant', null, second.response],
      ['assistant', 'system', "I'm passing this conversation to a person from Support. They will reply here."],
    ]);
    expect(messages.at(-2)!.id).toBe(second.messageId);

    // A person has it now: the persona stays silent. The notice came after that answer, so the user's next message returns it, once.
    const notice = "I'm passing this conversation to a person from Support. They will reply here.";
    const waiting = await ask(persona.id, NOTHING[2]!, first.sessionId);
    expect(waiting).toMatchObject({ response: notice, handoff: { id: second.handoff.id, messages: [{ author: 'system', content: notice }] } });
    const still = await ask(persona.id, 'Hello?', first.sessionId);
    expect(still).toMatchObject({ response: '', handoff: { id: second.handoff.id } });
  });

  it('starts the count again after an answer with sources, and after a handoff ends', async () => {
    const persona = await setUp('bo@example.com', { noKnowledge: 2 });
    const first = await askNothing(persona.id, 0);
    const known = await ask(persona.id, KNOWN, first.sessionId);
    expect(known.sources.length).toBeGreaterThan(0);
    expect(known.handoff).toBeUndefined();
    const third = await askNothing(persona.id, 1, first.sessionId);
    expect(third.handoff).toBeUndefined();
    expect(await handoffsOf(first.sessionId)).toEqual([]);
    expect(await storedSources(first.sessionId)).toEqual([0, known.sources.length, 0]);

    const fourth = await askNothing(persona.id, 2, first.sessionId);
    expect(fourth.handoff).toMatchObject({ status: 'offered' });

    // Handed back to the persona: its earlier answers no longer count.
    const back = await post(`/handoffs/${fourth.handoff.id}/return`, {});
    expect(back.statusCode, back.body).toBe(200);
    const after = await askNothing(persona.id, 3, first.sessionId);
    // No new handoff: the answer names the ended one only to bring the notices the user has not had (the handover followed the answer that reached N).
    expect(after.handoff).toMatchObject({ id: fourth.handoff.id, status: 'returned' });
    expect(after.handoff.messages.map((m: { content: string }) => m.content)).toEqual([
      "I'm passing this conversation to a person from Support. They will reply here.",
      'The team left the conversation; Desk takes over again.',
    ]);
    expect((await handoffsOf(first.sessionId)).map((h) => h.id)).toEqual([fourth.handoff.id]);
    const again = await askNothing(persona.id, 4, first.sessionId);
    expect(again.handoff).toMatchObject({ status: 'offered' });
    expect(again.handoff.id).not.toBe(fourth.handoff.id);
    expect((await handoffsOf(first.sessionId)).map((h) => h.id).sort()).toEqual([fourth.handoff.id, again.handoff.id].sort());
  });

  it('hands over on the first answer with noKnowledge 1, and counts per session', async () => {
    const persona = await setUp('cy@example.com', { noKnowledge: 1 });
    const known = await ask(persona.id, KNOWN);
    expect(known.handoff).toBeUndefined();
    const nothing = await askNothing(persona.id, 0, known.sessionId);
    expect(nothing.handoff).toMatchObject({ status: 'offered' });
    expect((await get(`/handoffs/${nothing.handoff.id}`)).json()).toMatchObject({ trigger: 'rule', reason: 'No knowledge was found for the question.' });

    // Another session of the same persona has its own count.
    const other = await setUp('di@example.com', { noKnowledge: 2 });
    const a = await askNothing(other.id, 0);
    const b = await askNothing(other.id, 1);
    expect([a.handoff, b.handoff]).toEqual([undefined, undefined]);
    expect(a.sessionId).not.toBe(b.sessionId);
  });

  it('never hands over without the rule (absent or null) or without a team', async () => {
    const absent = await setUp('eli@example.com', { lowRating: true });
    expect(absent.handoff.noKnowledge).toBeNull();
    const off = await setUp('fay@example.com', { noKnowledge: null });
    expect(off.handoff.noKnowledge).toBeNull();
    const loner = await createPersona(t, { name: 'Alone', handoff: { noKnowledge: 1 } });
    expect(loner).toMatchObject({ teamId: null, handoff: { noKnowledge: 1 } });

    for (const persona of [absent, off, loner]) {
      const first = await askNothing(persona.id, 0);
      for (let n = 1; n < 4; n++) expect((await askNothing(persona.id, n, first.sessionId)).handoff).toBeUndefined();
      expect(first.handoff).toBeUndefined();
      expect(await handoffsOf(first.sessionId)).toEqual([]);
      expect(await storedSources(first.sessionId)).toEqual([0, 0, 0, 0]);
    }
  });

  it('keeps the rule on the persona: null by default, set and cleared by PUT, bad values a 400 naming handoff.noKnowledge', async () => {
    const bare = await createPersona(t, { name: 'Bare' });
    expect(bare.handoff).toEqual({ tool: false, keywords: [], lowRating: false, noKnowledge: null });
    expect((await get(`/personas/${bare.id}`)).json().handoff).toEqual({ tool: false, keywords: [], lowRating: false, noKnowledge: null });

    const set = await t.request({ method: 'PUT', url: `/personas/${bare.id}`, body: { handoff: { noKnowledge: 20 } } });
    expect(set.statusCode, set.body).toBe(200);
    expect(set.json()).toMatchObject({ handoff: { noKnowledge: 20 }, version: 1 });
    expect((await get(`/personas/${bare.id}`)).json().handoff).toEqual({ tool: false, keywords: [], lowRating: false, noKnowledge: 20 });
    const cleared = await t.request({ method: 'PUT', url: `/personas/${bare.id}`, body: { handoff: { noKnowledge: null } } });
    expect(cleared.json().handoff.noKnowledge).toBeNull();

    for (const bad of [0, 21, 2.5, 'x', -1, true]) {
      expectProblem(await post('/personas', { name: 'X', instructions: 'Y', handoff: { noKnowledge: bad } }), 400, 'validation_failed', 'handoff.noKnowledge');
      expectProblem(await t.request({ method: 'PUT', url: `/personas/${bare.id}`, body: { handoff: { noKnowledge: bad } } }), 400, 'validation_failed', 'handoff.noKnowledge');
    }
    expect((await get(`/personas/${bare.id}`)).json().handoff.noKnowledge).toBeNull();
  });
});
