// Issue 29 through the HTTP API, on both backends: a conversation goes to an available member of the
// persona's team (`/human`, a keyword, a low rating, the API), offers lapse to the next member, nobody
// available queues it with the next opening, two accepts at once have one winner, the persona stays
// silent while a person has it, the person's replies are the conversation's, and handing back gives
// it to the persona again. Another workspace's handoff is a 404.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signature } from '../../bridges/webhook/webhook-bridge.js';
import { manualClock } from '../../src/lib/clock.js';
import { startReceiver } from '../fakes/webhook-receiver.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { LOOPBACK_ONLY } from '../helpers/mcp-tools.js';
import { createPersona, createTeam } from '../helpers/factories.js';
import { testBackends } from '../helpers/postgres.js';
import { expectProblem } from '../helpers/problem.js';
import { writeBarrier } from '../helpers/write-barrier.js';

describe.each(testBackends())('human handoff on $kind', (backend) => {
  let t: TestApp;
  // Wednesday 25 November 2026, 10:00 UTC.
  const clock = manualClock(new Date('2026-11-25T10:00:00.000Z'));

  // Two accepts at once meet between their read and their write, on either backend.
  const race = writeBarrier();

  beforeAll(async () => {
    t = await createTestApp({ backend, overrides: { clock, fetch: LOOPBACK_ONLY, writeGate: race.gate } });
  });
  afterAll(async () => t?.close());

  const post = (url: string, body: unknown = {}, as?: string) => t.request({ method: 'POST', url, body, ...(as ? { as } : {}) });
  const get = (url: string, as?: string) => t.request({ method: 'GET', url, ...(as ? { as } : {}) });
  /** A team of the given members (all available) and a persona that hands over to it. */
  const setUp = async (members: string[], handoff: Record<string, unknown> = {}) => {
    const team = await createTeam(t, { name: 'Support', members });
    const persona = await createPersona(t, { name: 'Desk', teamId: team.id, handoff });
    return { team, persona };
  };
  const ask = async (personaId: string, message: string, sessionId?: string) => {
    const res = await post('/query', { personaId, message, ...(sessionId ? { sessionId } : {}) });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  };
  const answers = async (sessionId: string) =>
    (await t.ctx.db.kysely.selectFrom('interactions').select(['model']).where('session_id', '=', sessionId).execute()).map((r) => r.model);

  it('hands over on /human: offered to an available member, the user told, the persona silent until a person answers', async () => {
    const { team, persona } = await setUp(['ada@example.com', 'bo@example.com']);
    const first = await ask(persona.id, 'Where is my parcel?');
    expect(first.handoff).toBeUndefined();

    const asked = await ask(persona.id, '/human I need to talk to someone', first.sessionId);
    expect(asked.handoff).toMatchObject({ status: 'offered', member: 'ada@example.com' });
    expect(asked.response).toBe("I'm passing this conversation to a person from Support. They will reply here.");
    const handoff = (await get(`/handoffs/${asked.handoff.id}`)).json();
    expect(handoff).toMatchObject({ sessionId: first.sessionId, personaId: persona.id, teamId: team.id, status: 'offered', trigger: 'user', reason: 'I need to talk to someone', offers: 1 });
    expect(handoff.offerUntil).toBe(new Date(clock.now().getTime() + 120_000).toISOString());

    // While it waits for a person, the persona says nothing; the message is kept for them.
    const waiting = await ask(persona.id, 'Hello? Anyone?', first.sessionId);
    expect(waiting).toMatchObject({ response: '', handoff: { id: asked.handoff.id, status: 'offered' } });
    expect(await answers(first.sessionId)).toEqual(['offline', 'handoff']);
    const conversation = (await get(`/handoffs/${asked.handoff.id}`)).json().messages;
    expect(conversation.map((m: { role: string; author: string | null; content: string }) => [m.role, m.author, m.content.slice(0, 21)])).toEqual([
      ['user', null, 'Where is my parcel?'],
      ['assistant', null, expect.any(String)],
      ['user', null, '/human I need to talk'],
      ['assistant', 'system', "I'm passing this conv"],
      ['user', null, 'Hello? Anyone?'],
    ]);

    // Two members accept at once (both read it offered before either writes): one wins, the other is told who.
    race.arm('handoff.move');
    const [x, y] = await Promise.all([post(`/handoffs/${asked.handoff.id}/accept`, { member: 'ada@example.com' }), post(`/handoffs/${asked.handoff.id}/accept`, { member: 'BO@example.com' })]);
    const codes = [x.statusCode, y.statusCode].sort();
    expect(race.state.held).toBe(2);
    expect(codes).toEqual([200, 409]);
    const winner = (x.statusCode === 200 ? x : y).json().member as string;
    const loser = x.statusCode === 200 ? y : x;
    expect(loser.json().detail).toContain(`accepted by ${winner}`);

    // Only the owner replies; the reply is the conversation's, marked as from a person.
    const other = winner === 'ada@example.com' ? 'bo@example.com' : 'ada@example.com';
    expectProblem(await post(`/handoffs/${asked.handoff.id}/messages`, { member: other, text: 'Me too' }), 409, 'conflict');
    expectProblem(await post(`/handoffs/${asked.handoff.id}/messages`, { member: 'eve@example.com', text: 'Hi' }), 400, 'validation_failed', 'member');
    const reply = await post(`/handoffs/${asked.handoff.id}/messages`, { member: winner, text: 'Hi, I am looking at your parcel now.' });
    expect(reply.statusCode, reply.body).toBe(201);
    expect(reply.json()).toMatchObject({ role: 'assistant', author: `human:${winner}`, content: 'Hi, I am looking at your parcel now.' });
    const session = (await get(`/sessions/${first.sessionId}`)).json();
    expect(session.messages.slice(-3).map((m: { author?: string; content: string }) => [m.author ?? null, m.content])).toEqual([
      [null, 'Hello? Anyone?'],
      ['system', `${winner} (a person) joined the conversation.`],
      [`human:${winner}`, 'Hi, I am looking at your parcel now.'],
    ]);
    const accepted = (await get(`/handoffs/${asked.handoff.id}`)).json();
    expect(accepted).toMatchObject({ status: 'accepted', member: winner, firstReplyAt: clock.now().toISOString() });

    // Handed back: the persona answers again.
    expectProblem(await post(`/handoffs/${asked.handoff.id}/return`, { member: other }), 409, 'conflict');
    const back = await post(`/handoffs/${asked.handoff.id}/return`, { member: winner });
    expect(back.statusCode, back.body).toBe(200);
    expect(back.json()).toMatchObject({ status: 'returned', endedBy: winner });
    const again = await ask(persona.id, 'Thanks! One more question about my parcel.', first.sessionId);
    // What was said since the user's previous message comes first, with the handoff that ended; then the persona's answer.
    const said = [`${winner} (a person) joined the conversation.`, `${winner} (a person): Hi, I am looking at your parcel now.`, `${winner} (a person) left the conversation; Desk takes over again.`];
    expect(again.handoff).toMatchObject({ id: asked.handoff.id, status: 'returned' });
    expect(again.handoff.messages.map((m: { author: string }) => m.author)).toEqual(['system', `human:${winner}`, 'system']);
    const personaAnswer = (await get(`/sessions/${first.sessionId}`)).json().messages.at(-1).content as string;
    expect(again.response).toBe([...said, personaAnswer].join('\n\n'));
    expect(personaAnswer.length).toBeGreaterThan(0);
    expect(await answers(first.sessionId)).toEqual(['offline', 'handoff', 'offline']);
    expectProblem(await post(`/handoffs/${asked.handoff.id}/resolve`, {}), 409, 'conflict');
  });

  it('sends a reply once however often a client retries it with the same Idempotency-Key; another body with that key is a 409', async () => {
    const { persona } = await setUp(['una@example.com']);
    const asked = await ask(persona.id, '/human');
    const id = asked.handoff.id as string;
    expect((await post(`/handoffs/${id}/accept`, { member: 'una@example.com' })).statusCode).toBe(200);
    const send = (text: string, key: string) => t.request({ method: 'POST', url: `/handoffs/${id}/messages`, body: { member: 'una@example.com', text }, headers: { 'idempotency-key': key } });
    const first = await send('Your refund was sent today.', 'reply-1');
    expect(first.statusCode, first.body).toBe(201);
    const again = await send('Your refund was sent today.', 'reply-1');
    expect(again.statusCode).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json()).toEqual(first.json());
    expectProblem(await send('Something else.', 'reply-1'), 409, 'conflict');
    const replies = (await get(`/sessions/${asked.sessionId}`)).json().messages.filter((m: { author?: string }) => m.author === 'human:una@example.com');
    expect(replies.map((m: { id: string; content: string }) => [m.id, m.content])).toEqual([[first.json().id, 'Your refund was sent today.']]);
  });

  it('offers a lapsed handoff to the next member, round again when everyone let it lapse, and a member off shift keeps what they accepted', async () => {
    const { team, persona } = await setUp(['cy@example.com', 'di@example.com']);
    expect((await t.request({ method: 'PUT', url: `/business/teams/${team.id}/handoff`, body: { offerSeconds: 30 } })).json().handoff).toEqual({ offerSeconds: 30, notifyUrl: null, desk: null });
    expectProblem(await t.request({ method: 'PUT', url: `/business/teams/${team.id}/handoff`, body: { offerSeconds: 5 } }), 400, 'validation_failed', 'offerSeconds');
    const asked = await ask(persona.id, '/human');
    const id = asked.handoff.id as string;
    expect(asked.handoff.member).toBe('cy@example.com');
    clock.advance(29_000);
    await t.ctx.services.handoffs.sweep();
    expect((await get(`/handoffs/${id}`)).json().member).toBe('cy@example.com');
    clock.advance(2_000);
    await t.ctx.services.handoffs.sweep();
    expect((await get(`/handoffs/${id}`)).json()).toMatchObject({ status: 'offered', member: 'di@example.com', offers: 2 });
    clock.advance(31_000);
    await t.ctx.services.handoffs.sweep();
    expect((await get(`/handoffs/${id}`)).json()).toMatchObject({ status: 'offered', member: 'cy@example.com', offers: 3 });

    // The next conversation goes to the member with fewer open handoffs.
    const second = await ask(persona.id, '/human');
    expect(second.handoff.member).toBe('di@example.com');

    // Accepted, then off shift: it stays theirs.
    expect((await post(`/handoffs/${id}/accept`, { member: 'cy@example.com' })).statusCode).toBe(200);
    await t.request({ method: 'PUT', url: `/business/teams/${team.id}/availability`, body: { members: [{ email: 'cy@example.com', status: 'offline' }] } });
    clock.advance(300_000);
    await t.ctx.services.handoffs.sweep();
    expect((await get(`/handoffs/${id}`)).json()).toMatchObject({ status: 'accepted', member: 'cy@example.com' });
    expect((await post(`/handoffs/${id}/messages`, { member: 'cy@example.com', text: 'Still here.' })).statusCode).toBe(201);
  });

  it('queues a handoff when nobody is available, tells the user when the team is next available, and offers it once someone is', async () => {
    const team = await createTeam(t, { name: 'Night desk', members: ['eli@example.com'] });
    // Weekdays 09:00–17:00 in Berlin; it is Wednesday 18:00 there (17:00 UTC).
    clock.set(new Date('2026-11-25T17:00:00.000Z'));
    await t.request({ method: 'PUT', url: `/business/teams/${team.id}/availability`, body: { timezone: 'Europe/Berlin', weekly: ['mon', 'tue', 'wed', 'thu', 'fri'].map((day) => ({ day, start: '09:00', end: '17:00' })) } });
    const persona = await createPersona(t, { name: 'After hours', teamId: team.id });
    const asked = await ask(persona.id, '/human');
    expect(asked.handoff).toMatchObject({ status: 'queued', member: null });
    expect(asked.response).toBe('Nobody from Night desk is available right now. The team is next available at 2026-11-26T08:00:00.000Z; your conversation waits in their queue and a person will reply here.');
    expect((await get(`/handoffs/${asked.handoff.id}`)).json()).toMatchObject({ status: 'queued', nextAvailableAt: '2026-11-26T08:00:00.000Z' });
    expect((await get('/handoffs?status=queued')).json().data.find((h: { id: string }) => h.id === asked.handoff.id)).toMatchObject({ nextAvailableAt: '2026-11-26T08:00:00.000Z' });
    await t.ctx.services.handoffs.sweep();
    expect((await get(`/handoffs/${asked.handoff.id}`)).json().status).toBe('queued');
    // A queued handoff may be taken from the queue by a member at any time, off hours too.
    const waiting = await ask(persona.id, '/human my order is late');
    expect(waiting.handoff).toMatchObject({ status: 'queued', member: null });
    const taken = await post(`/handoffs/${waiting.handoff.id}/accept`, { member: 'ELI@example.com' });
    expect(taken.statusCode, taken.body).toBe(200);
    expect(taken.json()).toMatchObject({ status: 'accepted', member: 'eli@example.com', offers: 0, offerUntil: null, nextAvailableAt: null, acceptedAt: clock.now().toISOString() });
    expect((await get(`/sessions/${waiting.sessionId}`)).json().messages.at(-1)).toMatchObject({ author: 'system', content: 'eli@example.com (a person) joined the conversation.' });
    expect((await post(`/handoffs/${waiting.handoff.id}/messages`, { member: 'eli@example.com', text: 'Looking now.' })).statusCode).toBe(201);
    clock.set(new Date('2026-11-26T08:00:30.000Z'));
    await t.ctx.services.handoffs.sweep();
    expect((await get(`/handoffs/${asked.handoff.id}`)).json()).toMatchObject({ status: 'offered', member: 'eli@example.com' });
    clock.set(new Date('2026-11-25T10:00:00.000Z'));
  });

  it('hands over on a keyword, on a low rating, and through the API; a persona without a team answers /human itself', async () => {
    const { persona } = await setUp(['fay@example.com'], { keywords: ['Speak to a Manager'], lowRating: true });
    const keyword = await ask(persona.id, 'I want to speak to a manager now');
    expect(keyword.handoff).toMatchObject({ status: 'offered' });
    expect((await get(`/handoffs/${keyword.handoff.id}`)).json()).toMatchObject({ trigger: 'rule', reason: 'The message contains "Speak to a Manager".' });

    const rated = await ask(persona.id, 'What are your opening hours?');
    expect((await post(`/sessions/${rated.sessionId}/feedback`, { rating: 2 })).statusCode).toBe(201);
    const fromRating = (await get('/handoffs?limit=100')).json().data.find((h: { sessionId: string }) => h.sessionId === rated.sessionId);
    expect(fromRating).toMatchObject({ sessionId: rated.sessionId, trigger: 'rule', reason: 'An answer was rated 2/5.' });

    const plain = await ask(persona.id, 'Hello');
    const opened = await post(`/sessions/${plain.sessionId}/handoff`, { reason: 'VIP customer' });
    expect(opened.statusCode, opened.body).toBe(201);
    expect(opened.json()).toMatchObject({ trigger: 'api', reason: 'VIP customer', status: 'offered' });
    const same = await post(`/sessions/${plain.sessionId}/handoff`, {});
    expect(same.statusCode).toBe(200);
    expect(same.json().id).toBe(opened.json().id);

    const loner = await createPersona(t, { name: 'Alone' });
    const answered = await ask(loner.id, '/human please');
    expect(answered.handoff).toBeUndefined();
    expectProblem(await post(`/sessions/${answered.sessionId}/handoff`, {}), 409, 'conflict');
  });

  it('hands over when the persona calls its handoff tool, only when its rules offer it', async () => {
    const { persona } = await setUp(['ivy@example.com'], { tool: true });
    // The offline model calls a tool it is offered when the message says `/tool <name> {json}`.
    const called = await ask(persona.id, '/tool handoff.request {"reason":"The customer wants a refund above my limit."}');
    expect(called.toolCalls.map((c: { name: string }) => c.name)).toEqual(['handoff.request']);
    expect(called.handoff).toMatchObject({ status: 'offered', member: 'ivy@example.com' });
    expect((await get(`/handoffs/${called.handoff.id}`)).json()).toMatchObject({ trigger: 'tool', reason: 'The customer wants a refund above my limit.' });
    // The persona's answer, then the notice.
    const messages = (await get(`/sessions/${called.sessionId}`)).json().messages;
    expect(messages.at(-1)).toMatchObject({ author: 'system', content: "I'm passing this conversation to a person from Support. They will reply here." });

    const { persona: plain } = await setUp(['jo@example.com']);
    const refused = await ask(plain.id, '/tool handoff.request {"reason":"x"}');
    expect(refused.handoff).toBeUndefined();
    expect(refused.toolCalls).toEqual([]);
    expect(refused.response).toContain('I cannot call handoff.request');
  });

  it('keeps a persona’s team out of its versions, checks the team exists, and hides handoffs from another workspace', async () => {
    const { team, persona } = await setUp(['gus@example.com']);
    expect(persona).toMatchObject({ teamId: team.id, handoff: { tool: false, keywords: [], lowRating: false }, version: 1 });
    const moved = await t.request({ method: 'PUT', url: `/personas/${persona.id}`, body: { teamId: null, handoff: { lowRating: true } } });
    expect(moved.json()).toMatchObject({ teamId: null, handoff: { lowRating: true }, version: 1 });
    expectProblem(await t.request({ method: 'PUT', url: `/personas/${persona.id}`, body: { teamId: 'team_nope' } }), 404, 'not_found');
    expectProblem(await post('/personas', { name: 'X', instructions: 'Y', teamId: 'team_nope' }), 404, 'not_found');
    await t.request({ method: 'PUT', url: `/personas/${persona.id}`, body: { teamId: team.id } });

    const asked = await ask(persona.id, '/human');
    const other = (await t.ctx.services.auth.createWorkspace('other-handoffs')).key.key;
    for (const res of [
      await get(`/handoffs/${asked.handoff.id}`, other),
      await post(`/handoffs/${asked.handoff.id}/accept`, { member: 'gus@example.com' }, other),
      await post(`/handoffs/${asked.handoff.id}/messages`, { member: 'gus@example.com', text: 'x' }, other),
      await post(`/handoffs/${asked.handoff.id}/return`, {}, other),
      await post(`/handoffs/${asked.handoff.id}/resolve`, {}, other),
      await post(`/sessions/${asked.sessionId}/handoff`, {}, other),
      await t.request({ method: 'PUT', url: `/business/teams/${team.id}/handoff`, body: { offerSeconds: 30 }, as: other }),
    ]) {
      expectProblem(res, 404, 'not_found');
    }
    expect((await get('/handoffs', other)).json().data).toEqual([]);
    // None of it moved anything here.
    expect((await get(`/handoffs/${asked.handoff.id}`)).json()).toMatchObject({ status: 'offered', endedAt: null });
    expect((await get(`/business/teams/${team.id}`)).json().handoff.offerSeconds).toBe(120);
    expectProblem(await post(`/handoffs/${asked.handoff.id}/accept`, { member: 'not-an-email' }), 400, 'validation_failed', 'member');
  });

  it('reports the handoff rate and the times to accept, to the first human reply and to resolution, per team and persona, and exports them', async () => {
    const key = (await t.ctx.services.auth.createWorkspace('handoff-figures')).key.key;
    const team = await createTeam(t, { name: 'Figures', members: ['kim@example.com'] }, key);
    const persona = await createPersona(t, { name: 'Counted', teamId: team.id }, key);
    const as = (url: string, body: unknown = {}) => post(url, body, key);
    expect((await as('/query', { personaId: persona.id, message: 'Hi' })).statusCode).toBe(200);
    const asked = (await as('/query', { personaId: persona.id, message: '/human' })).json();
    clock.advance(30_000);
    await as(`/handoffs/${asked.handoff.id}/accept`, { member: 'kim@example.com' });
    clock.advance(30_000);
    await as(`/handoffs/${asked.handoff.id}/messages`, { member: 'kim@example.com', text: 'Hello!' });
    clock.advance(60_000);
    await as(`/handoffs/${asked.handoff.id}/resolve`, { member: 'kim@example.com' });

    const report = await get('/business/analytics/handoffs?timeframe=1d', key);
    expect(report.statusCode, report.body).toBe(200);
    const ms = (p: number) => ({ avg: p, p50: p, p95: p });
    expect(report.json()).toMatchObject({
      handoffs: 1,
      conversations: 2,
      rate: 0.5,
      byStatus: { queued: 0, offered: 0, accepted: 0, resolved: 1, returned: 0 },
      acceptMs: ms(30_000),
      firstReplyMs: ms(60_000),
      resolutionMs: ms(120_000),
      byTeam: [{ teamId: team.id, handoffs: 1, firstReplyMs: ms(60_000), resolutionMs: ms(120_000) }],
      byPersona: [{ personaId: persona.id, handoffs: 1, conversations: 2, rate: 0.5 }],
    });
    const exported = await post('/business/analytics/export', { timeframe: '1d', dataset: 'handoffs', format: 'json' }, key);
    expect(exported.statusCode, exported.body).toBe(200);
    expect(exported.json()).toEqual([
      expect.objectContaining({ handoffId: asked.handoff.id, teamId: team.id, trigger: 'user', status: 'resolved', member: 'kim@example.com', endedBy: 'kim@example.com', acceptMs: 30_000, firstReplyMs: 60_000, resolutionMs: 120_000 }),
    ]);
    const csv = await post('/business/analytics/export', { timeframe: '1d', dataset: 'handoffs', format: 'csv' }, key);
    expect(csv.body.split('\r\n')[0]).toBe('createdAt,handoffId,sessionId,personaId,teamId,trigger,status,member,acceptedAt,firstReplyAt,endedAt,endedBy,acceptMs,firstReplyMs,resolutionMs');
  });

  it('hands over a webhook channel’s conversation: the notice is the reply, the persona stays silent, and the person’s messages reach the user once, retried until they do', async () => {
    const { persona } = await setUp(['lee@example.com']);
    const secret = 'webhook-secret-0123456789abcdef';
    // The first four posts are refused (429): the webhook's own retries give up, the outbox tries again later.
    const receiver = await startReceiver(4);
    const channel = (await post('/business/channels', { type: 'webhook', name: 'Site', personaId: persona.id, credentials: { secret, outboundUrl: receiver.url } })).json();
    const inbound = (message: string) => {
      const raw = JSON.stringify({ conversationId: 'visitor-7', userId: 'visitor-7', message });
      return t.app.inject({ method: 'POST', url: `/business/channels/${channel.id}/inbound`, headers: { 'content-type': 'application/json', 'x-switchboard-signature': signature(secret, raw) }, payload: raw });
    };
    const handed = await inbound('/human please');
    expect(handed.statusCode, handed.body).toBe(200);
    expect(handed.json()).toMatchObject({ reply: "I'm passing this conversation to a person from Support. They will reply here.", handoff: { status: 'offered', member: 'lee@example.com' } });
    const silent = await inbound('Are you there?');
    expect(silent.json()).toMatchObject({ reply: '', handoff: { id: handed.json().handoff.id, status: 'offered' } });
    expect((await get(`/handoffs/${handed.json().handoff.id}`)).json().messages.at(-1)).toMatchObject({ role: 'user', content: 'Are you there?' });

    try {
      const id = handed.json().handoff.id as string;
      expect((await post(`/handoffs/${id}/accept`, { member: 'lee@example.com' })).statusCode).toBe(200);
      expect(await t.ctx.services.handoffs.deliver()).toBe(0);
      expect(receiver.refused()).toBe(4);
      const pending = await t.ctx.db.kysely.selectFrom('handoff_outbox').select(['status', 'attempts', 'conversation_id']).where('handoff_id', '=', id).execute();
      expect(pending).toEqual([{ status: 'pending', attempts: 1, conversation_id: 'visitor-7' }]);
      clock.advance(5_000);
      await post(`/handoffs/${id}/messages`, { member: 'lee@example.com', text: 'Hi, Lee here. How can I help?' });
      await post(`/handoffs/${id}/return`, { member: 'lee@example.com' });
      await t.ctx.services.handoffs.deliver();
      const sent = receiver.deliveries.map((d) => JSON.parse(d.body) as { conversationId: string; message: string });
      expect(sent.map((d) => [d.conversationId, d.message])).toEqual([
        ['visitor-7', 'lee@example.com (a person) joined the conversation.'],
        ['visitor-7', 'Hi, Lee here. How can I help?'],
        ['visitor-7', 'lee@example.com (a person) left the conversation; Desk takes over again.'],
      ]);
      for (const d of receiver.deliveries) expect(d.signature).toBe(signature(secret, d.body));
      // Delivered once: another pass sends nothing again.
      expect(await t.ctx.services.handoffs.deliver()).toBe(0);
      expect(receiver.deliveries).toHaveLength(3);
    } finally {
      await receiver.close();
    }
  });

  it('tells the team by a signed webhook: offered (with the conversation), accepted, the user’s messages, ended; retried until received', async () => {
    const receiver = await startReceiver(1);
    try {
      const secret = 'team-webhook-secret-0123';
      const { team, persona } = await setUp(['max@example.com']);
      const set = await t.request({ method: 'PUT', url: `/business/teams/${team.id}/handoff`, body: { notify: { url: receiver.url, secret } } });
      expect(set.statusCode, set.body).toBe(200);
      expect(set.json().handoff).toEqual({ offerSeconds: 120, notifyUrl: receiver.url, desk: null });
      expect(set.body).not.toContain(secret);
      expectProblem(await t.request({ method: 'PUT', url: `/business/teams/${team.id}/handoff`, body: { notify: { url: 'http://10.0.0.7/hook', secret } } }), 400, 'validation_failed', 'notify.url');
      expectProblem(await t.request({ method: 'PUT', url: `/business/teams/${team.id}/handoff`, body: { notify: { url: receiver.url, secret: 'short' } } }), 400, 'validation_failed', 'notify.secret');

      const asked = await ask(persona.id, '/human about my invoice');
      // The first post is refused (429): it is tried again after its back-off.
      await t.ctx.services.handoffs.deliver();
      expect(receiver.refused()).toBe(1);
      clock.advance(5_000);
      await post(`/handoffs/${asked.handoff.id}/accept`, { member: 'max@example.com' });
      await ask(persona.id, 'Here is my invoice number: 42', asked.sessionId);
      await post(`/handoffs/${asked.handoff.id}/resolve`, { member: 'max@example.com' });
      await t.ctx.services.handoffs.deliver();
      const events = receiver.deliveries.map((d) => JSON.parse(d.body) as { event: string; handoff: { id: string; status: string }; messages?: Array<{ content: string }>; message?: { content: string } });
      expect(events.map((e) => [e.event, e.handoff.status])).toEqual([
        ['handoff.offered', 'offered'],
        ['handoff.accepted', 'accepted'],
        ['handoff.message', 'accepted'],
        ['handoff.ended', 'resolved'],
      ]);
      expect(events.every((e) => e.handoff.id === asked.handoff.id)).toBe(true);
      expect(events[0]!.messages!.map((m) => m.content)).toEqual(['/human about my invoice']);
      expect(events[2]!.message!.content).toBe('Here is my invoice number: 42');
      for (const d of receiver.deliveries) expect(d.signature).toBe(signature(secret, d.body));
      expect(await t.ctx.services.handoffs.deliver()).toBe(0);

      // Removed: nothing more is sent.
      await t.request({ method: 'PUT', url: `/business/teams/${team.id}/handoff`, body: { notify: null } });
      await ask(persona.id, '/human again');
      await t.ctx.services.handoffs.deliver();
      expect(receiver.deliveries).toHaveLength(4);
    } finally {
      await receiver.close();
    }
  });

  it('ends a handoff with the deletion of its conversation, keeping its numbers: nobody can take it after', async () => {
    const { persona } = await setUp(['hal@example.com']);
    const asked = await ask(persona.id, '/human');
    expect((await t.request({ method: 'DELETE', url: `/sessions/${asked.sessionId}` })).statusCode).toBe(204);
    // No sweep in between: the deletion ended it.
    expect((await get(`/handoffs/${asked.handoff.id}`)).json()).toMatchObject({ sessionId: null, status: 'resolved', endedBy: 'session deleted', endedAt: clock.now().toISOString(), offerUntil: null, messages: [] });
    expectProblem(await post(`/handoffs/${asked.handoff.id}/accept`, { member: 'hal@example.com' }), 409, 'conflict');
    expect((await get('/handoffs?status=queued,offered,accepted&member=hal@example.com')).json().data).toEqual([]);
  });
});
