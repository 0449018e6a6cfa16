// Human handoff, the user's side on the HTTP API (issue 29): a person's replies and the notices that
// a person joined or left reach a user who is not on a channel — as they happen on the session's
// event stream (read here by the real `eventsource` client), and with the user's next message on
// every protocol: POST /query, its native stream, the AI SDK UI message stream and the
// OpenAI-compatible endpoint (the real `openai` client).
import { EventSource } from 'eventsource';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { createPersona, createTeam } from '../helpers/factories.js';
import { testBackends } from '../helpers/postgres.js';
import { expectProblem } from '../helpers/problem.js';
import { chunksOf, listen, postJson, readSse, WAIT_MS } from './chat-helpers.js';

describe.each(testBackends())('a handoff as an API user sees it, on $kind', (backend) => {
  let t: TestApp;
  let origin: string;

  beforeAll(async () => {
    t = await createTestApp({ backend });
    origin = await listen(t);
  });
  afterAll(async () => t?.close());

  const post = (url: string, body: unknown = {}) => t.request({ method: 'POST', url, body });
  const setUp = async (member: string) => {
    const team = await createTeam(t, { name: 'Care', members: [member] });
    return createPersona(t, { name: 'Care desk', teamId: team.id });
  };
  const ok = async (res: Promise<{ statusCode: number; body: string; json: () => any }>, status = 200) => {
    const r = await res;
    expect(r.statusCode, r.body).toBe(status);
    return r.json();
  };

  /**
   * Follows a session's events with the `eventsource` client until `count` messages arrived.
   * `opened` resolves once the server answered (its starting point is set by then).
   */
  function follow(sessionId: string, count: number, lastEventId?: string) {
    let opened!: () => void;
    const open = new Promise<void>((resolve) => (opened = resolve));
    const done = new Promise<Array<{ id: string; message: Record<string, string> }>>((resolve, reject) => {
      const got: Array<{ id: string; message: Record<string, string> }> = [];
      const es = new EventSource(`${origin}/sessions/${sessionId}/events`, {
        fetch: (input, init) =>
          fetch(input, { ...init, headers: { ...init.headers, authorization: `Bearer ${t.adminKey}`, ...(lastEventId ? { 'last-event-id': lastEventId } : {}) } }),
      });
      const timer = setTimeout(() => {
        es.close();
        reject(new Error(`${got.length} of ${count} messages within ${WAIT_MS} ms`));
      }, WAIT_MS);
      es.onopen = () => opened();
      es.onmessage = (m) => {
        const data = JSON.parse(m.data) as { type: string; message: Record<string, string> };
        if (data.type === 'message') got.push({ id: m.lastEventId, message: data.message });
        if (got.length < count) return;
        es.close();
        clearTimeout(timer);
        resolve(got);
      };
    });
    return { opened: open, done };
  }

  it('streams a person’s replies and the join and leave notices on GET /sessions/:id/events, from where a reconnect left off', async () => {
    const persona = await setUp('ada@example.com');
    const asked = await ok(post('/query', { personaId: persona.id, message: '/human my order' }));
    const sessionId = asked.sessionId as string;

    // Open before anything happens: it starts after the latest message.
    const following = follow(sessionId, 3);
    await following.opened;
    // Another workspace's conversations go on meanwhile: the ids here must not show them.
    const other = (await t.ctx.services.auth.createWorkspace('busy-elsewhere')).key.key;
    const elsewhere = (await createPersona(t, { name: 'Elsewhere' }, other)).id;
    const chatter = () => ok(t.request({ method: 'POST', url: '/query', body: { personaId: elsewhere, message: 'hello' }, as: other }));
    await ok(post(`/handoffs/${asked.handoff.id}/accept`, { member: 'ada@example.com' }));
    await chatter();
    await ok(post(`/handoffs/${asked.handoff.id}/messages`, { member: 'ada@example.com', text: 'Hi, Ada here. Which order?' }), 201);
    await chatter();
    await chatter();
    await ok(post(`/handoffs/${asked.handoff.id}/return`, { member: 'ada@example.com' }));
    const events = await following.done;
    expect(events.map((e) => [e.message.role, e.message.author, e.message.content])).toEqual([
      ['assistant', 'system', 'ada@example.com (a person) joined the conversation.'],
      ['assistant', 'human:ada@example.com', 'Hi, Ada here. Which order?'],
      ['assistant', 'system', 'ada@example.com (a person) left the conversation; Care desk takes over again.'],
    ]);
    // Each event's id is its message's position in the session (the question and the notice were 1 and 2).
    expect(events.map((e) => e.id)).toEqual(['3', '4', '5']);

    // A reconnect with Last-Event-ID gets what came after it, nothing before.
    const resumed = await follow(sessionId, 2, events[0]!.id).done;
    expect(resumed.map((e) => e.message.content)).toEqual([events[1]!.message.content, events[2]!.message.content]);
    // So does ?after= (a fetch reader this time).
    const res = await fetch(`${origin}/sessions/${sessionId}/events?after=${events[1]!.id}`, { headers: { authorization: `Bearer ${t.adminKey}` }, signal: AbortSignal.timeout(WAIT_MS) });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const read = await readSse(res, { stop: (e) => e.data.includes('"message"') });
    expect(chunksOf(read).map((c) => c.message?.content)).toEqual([events[2]!.message.content]);
  });

  it('refuses a session of another workspace or none (404), and a bad ?after (400 naming it)', async () => {
    const asked = await ok(post('/query', { personaId: (await setUp('bo@example.com')).id, message: 'hello' }));
    const other = (await t.ctx.services.auth.createWorkspace('elsewhere')).key.key;
    expectProblem(await t.request({ method: 'GET', url: `/sessions/${asked.sessionId}/events`, as: other }), 404, 'not_found');
    expectProblem(await t.request({ method: 'GET', url: '/sessions/ses_nope/events' }), 404, 'not_found');
    expectProblem(await t.request({ method: 'GET', url: `/sessions/${asked.sessionId}/events?after=-1` }), 400, 'validation_failed', 'after');
  });

  it('gives a person’s last reply and the notice that they left with the user’s next message after they hand back or resolve, before the persona’s answer, once: every protocol', async () => {
    const persona = await setUp('dee@example.com');
    const openai = new OpenAI({ apiKey: t.adminKey, baseURL: `${origin}/v1`, maxRetries: 0, timeout: WAIT_MS });
    /** A conversation a person took, answered and ended (`to`) before the user wrote again. */
    const handedBack = async (to: 'return' | 'resolve') => {
      const asked = await ok(post('/query', { personaId: persona.id, message: '/human where is my refund?' }));
      await ok(post(`/handoffs/${asked.handoff.id}/accept`, { member: 'dee@example.com' }));
      await ok(post(`/handoffs/${asked.handoff.id}/messages`, { member: 'dee@example.com', text: 'Your refund was sent today.' }), 201);
      await ok(post(`/handoffs/${asked.handoff.id}/${to}`, { member: 'dee@example.com' }));
      const said = [
        'dee@example.com (a person) joined the conversation.',
        'dee@example.com (a person): Your refund was sent today.',
        to === 'return' ? 'dee@example.com (a person) left the conversation; Care desk takes over again.' : 'dee@example.com (a person) closed the conversation as resolved.',
      ];
      return { sessionId: asked.sessionId as string, handoffId: asked.handoff.id as string, said: said.join('\n\n'), count: said.length, status: to === 'return' ? 'returned' : 'resolved' };
    };
    const answerOf = async (sessionId: string) => (await ok(t.request({ method: 'GET', url: `/sessions/${sessionId}` }))).messages.at(-1);

    // POST /query: what was said, then the persona's answer (stored on its own); the handoff names the messages.
    const q = await handedBack('return');
    const json = await ok(post('/query', { personaId: persona.id, sessionId: q.sessionId, message: 'Thanks!' }));
    const answer = await answerOf(q.sessionId);
    expect(answer).toMatchObject({ role: 'assistant', id: json.messageId });
    expect(answer.author).toBeUndefined();
    expect(json.response).toBe(`${q.said}\n\n${answer.content}`);
    expect(json.handoff).toMatchObject({ id: q.handoffId, status: 'returned', member: 'dee@example.com' });
    expect(json.handoff.messages.map((m: { author: string }) => m.author)).toEqual(['system', 'human:dee@example.com', 'system']);
    // Nothing twice.
    const next = await ok(post('/query', { personaId: persona.id, sessionId: q.sessionId, message: 'One more thing.' }));
    expect(next.handoff).toBeUndefined();
    expect(next.response).toBe((await answerOf(q.sessionId)).content);

    // Asking for a person again right away: what was said, then the new handoff's notice.
    const h = await handedBack('return');
    const again = await ok(post('/query', { personaId: persona.id, sessionId: h.sessionId, message: '/human one more thing' }));
    expect(again.response).toBe(`${h.said}\n\nI'm passing this conversation to a person from Care. They will reply here.`);
    expect(again.handoff).toMatchObject({ status: 'offered', member: 'dee@example.com' });
    expect(again.handoff.id).not.toBe(h.handoffId);
    expect(again.handoff.messages).toHaveLength(h.count);

    // The native stream sends it as text before the answer; its done chunk carries the handoff.
    const n = await handedBack('resolve');
    const native = chunksOf(await readSse(await postJson(origin, '/query/stream', t.adminKey, { personaId: persona.id, sessionId: n.sessionId, message: 'Thanks!' })));
    expect(native.filter((c) => c.type === 'text').map((c) => c.content).join('')).toBe(`${n.said}\n\n${(await answerOf(n.sessionId)).content}`);
    expect(native.at(-1)).toMatchObject({ type: 'done', sessionId: n.sessionId, handoff: { id: n.handoffId, status: 'resolved' } });
    expect(native.at(-1)!.handoff.messages).toHaveLength(n.count);

    // The AI SDK UI message stream likewise (the handoff in the finish chunk's metadata).
    const a = await handedBack('return');
    const ui = chunksOf(
      await readSse(await postJson(origin, `/api/ai-sdk/agents/${persona.id}/chat`, t.adminKey, { sessionId: a.sessionId, messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'Thanks!' }] }] })),
    );
    expect(ui.filter((c) => c.type === 'text-delta').map((c) => c.delta).join('')).toBe(`${a.said}\n\n${(await answerOf(a.sessionId)).content}`);
    expect(ui.find((c) => c.type === 'finish')?.messageMetadata).toMatchObject({ sessionId: a.sessionId, handoff: { id: a.handoffId, status: 'returned' } });

    // The OpenAI-compatible endpoint answers it as the assistant's content.
    const o = await handedBack('resolve');
    const completion = await openai.chat.completions.create({ model: persona.id, messages: [{ role: 'user', content: 'Thanks!' }] }, { headers: { 'x-switchboard-session-id': o.sessionId } });
    expect(completion.choices[0]!.message.content).toBe(`${o.said}\n\n${(await answerOf(o.sessionId)).content}`);
  });

  it('gives what a person said since the user’s previous message with their next one, marked as a person’s: OpenAI endpoint, /query, native and AI SDK streams', async () => {
    const persona = await setUp('cy@example.com');
    const openai = new OpenAI({ apiKey: t.adminKey, baseURL: `${origin}/v1`, maxRetries: 0, timeout: WAIT_MS });
    const first = await openai.chat.completions.create({ model: persona.id, messages: [{ role: 'user', content: '/human I was double charged' }] });
    const notice = first.choices[0]!.message.content!;
    expect(notice).toContain('passing this conversation to a person from Care');
    const [handoff] = (await ok(t.request({ method: 'GET', url: '/handoffs?status=offered,queued&member=cy@example.com' }))).data;
    expect(handoff).toMatchObject({ personaId: persona.id, status: 'offered' });
    await ok(post(`/handoffs/${handoff.id}/accept`, { member: 'cy@example.com' }));
    const say = (text: string) => ok(post(`/handoffs/${handoff.id}/messages`, { member: 'cy@example.com', text }), 201);
    await say('Hi, Cy here: I see two charges.');

    // The OpenAI client's next message (its history finds the session) returns the notice and the reply.
    const history = [
      { role: 'user' as const, content: '/human I was double charged' },
      { role: 'assistant' as const, content: notice },
    ];
    const second = await openai.chat.completions.create({ model: persona.id, messages: [...history, { role: 'user', content: 'Thanks, which one stays?' }] });
    const caughtUp = second.choices[0]!.message.content!;
    expect(caughtUp).toBe('cy@example.com (a person) joined the conversation.\n\ncy@example.com (a person): Hi, Cy here: I see two charges.');
    // Nothing new since: an empty answer, not a repeat.
    const third = await openai.chat.completions.create({
      model: persona.id,
      messages: [...history, { role: 'user', content: 'Thanks, which one stays?' }, { role: 'assistant', content: caughtUp }, { role: 'user', content: 'Hello?' }],
    });
    expect(third.choices[0]!.message.content ?? '').toBe('');
    const sessionId = (await ok(t.request({ method: 'GET', url: `/handoffs/${handoff.id}` }))).sessionId as string;

    await say('The first one stays.');
    const json = await ok(post('/query', { personaId: persona.id, sessionId, message: 'OK' }));
    expect(json.response).toBe('cy@example.com (a person): The first one stays.');
    expect(json.handoff).toMatchObject({ id: handoff.id, status: 'accepted', member: 'cy@example.com', messages: [{ author: 'human:cy@example.com', content: 'The first one stays.' }] });

    await say('The refund is on its way.');
    const native = chunksOf(await readSse(await postJson(origin, '/query/stream', t.adminKey, { personaId: persona.id, sessionId, message: 'When?' })));
    expect(native.filter((c) => c.type === 'text').map((c) => c.content).join('')).toBe('cy@example.com (a person): The refund is on its way.');
    expect(native.at(-1)).toMatchObject({ type: 'done', sessionId, handoff: { id: handoff.id, status: 'accepted', messages: [{ content: 'The refund is on its way.' }] } });

    await say('Today.');
    const ui = chunksOf(
      await readSse(
        await postJson(origin, `/api/ai-sdk/agents/${persona.id}/chat`, t.adminKey, { sessionId, messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'Great, thanks' }] }] }),
      ),
    );
    expect(ui.filter((c) => c.type === 'text-delta').map((c) => c.delta).join('')).toBe('cy@example.com (a person): Today.');
    expect(ui.find((c) => c.type === 'finish')?.messageMetadata).toMatchObject({ sessionId, handoff: { id: handoff.id, member: 'cy@example.com' } });
  });
});
