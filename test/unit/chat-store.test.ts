// The chat store's grouped exchange writes (issue 18) on both backends (issue 25): one transaction
// per event-loop turn, each write acknowledged after the commit, and a failing write failing alone.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createChatStore, type ExchangeWrite } from '../../src/core/chat/chat.store.js';
import { isUniqueViolation } from '../../src/db/backend.js';
import { testBackends } from '../helpers/postgres.js';
import { type OpenedBackend, openTestBackend } from '../helpers/sql-backend.js';

const NOW = '2026-11-25T00:00:00.000Z';

function exchange(sessionId: string, messageId: string, isNew = true): ExchangeWrite {
  return {
    session: { id: sessionId, workspace_id: 'wsp_1', persona_id: 'per_1', ab_test_id: null, variant: null, channel_id: null, user_id: null, title: 'q', message_count: 0, created_at: NOW, last_message_at: NOW },
    isNew,
    messages: [
      { id: `${messageId}_q`, session_id: sessionId, role: 'user', content: 'question', tool_calls: null, tool_call_id: null, created_at: NOW },
      { id: messageId, session_id: sessionId, role: 'assistant', content: 'answer', tool_calls: null, tool_call_id: null, created_at: NOW },
    ],
    interaction: { workspace_id: 'wsp_1', session_id: sessionId, message_id: messageId, persona_id: 'per_1', ab_test_id: null, variant: null, channel_id: null, user_id: null, model: 'm', started_at: NOW, latency_ms: 1, ttft_ms: 1, prompt_tokens: 1, completion_tokens: 1, tool_calls: 0, error: null, metadata: null, new_session: isNew ? 1 : 0, persona_version: 1 },
    tools: [{ name: 'search.query', isError: false }],
  };
}

describe.each(testBackends())('chat store on $kind: grouped exchange writes', (which) => {
  let opened: OpenedBackend;
  let groups = 0;
  const scalar = async (query: ReturnType<typeof sql<{ n: unknown }>>) => (await query.execute(opened.backend.kysely)).rows[0]?.n;
  const count = (table: string) => scalar(sql<{ n: number }>`SELECT count(*) AS n FROM ${sql.table(table)}`);

  beforeAll(async () => {
    opened = await openTestBackend(which);
    await opened.backend.kysely.insertInto('workspaces').values({ id: 'wsp_1', name: 'w', created_at: NOW }).execute();
  });
  afterAll(() => opened?.close());

  it('writes the exchanges asked for in one turn in one transaction, and acknowledges each after the commit', async () => {
    const store = createChatStore(opened.backend, opened.hotWrites(() => groups++).chat);
    const before = groups;
    const saved = [store.saveExchange(exchange('ses_a', 'msg_a')), store.saveExchange(exchange('ses_b', 'msg_b')), store.saveExchange(exchange('ses_c', 'msg_c'))];
    expect(await Promise.all(saved)).toEqual([true, true, true]);
    expect(groups - before).toBe(1); // one group
    expect([await count('sessions'), await count('messages'), await count('interactions'), await count('interaction_tools')]).toEqual([3, 6, 3, 3]);
    // the messages of an exchange keep their order
    const order = await opened.backend.kysely.selectFrom('messages').select('id').where('session_id', '=', 'ses_a').orderBy('seq').execute();
    expect(order.map((m) => m.id)).toEqual(['msg_a_q', 'msg_a']);
  });

  it('fails a bad write alone: the rest of its group is stored', async () => {
    const store = createChatStore(opened.backend, opened.hotWrites().chat);
    const results = await Promise.allSettled([
      store.saveExchange(exchange('ses_d', 'msg_d')),
      store.saveExchange(exchange('ses_e', 'msg_a')), // message id taken: UNIQUE violation
      store.saveExchange(exchange('ses_f', 'msg_f')),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(isUniqueViolation((results[1] as PromiseRejectedResult).reason)).toBe(true);
    const sessions = await opened.backend.kysely.selectFrom('sessions').select('id').orderBy('id').execute();
    expect(sessions.map((r) => r.id)).toEqual(['ses_a', 'ses_b', 'ses_c', 'ses_d', 'ses_f']);
    // Nothing of the failed exchange was kept: no half-written session, message or interaction.
    expect(await scalar(sql<{ n: number }>`SELECT count(*) AS n FROM messages WHERE session_id = 'ses_e'`)).toBe(0);
    expect(await scalar(sql<{ n: number }>`SELECT count(*) AS n FROM interactions WHERE session_id = 'ses_e'`)).toBe(0);
  });

  it('answers false, writing nothing, for an existing session deleted meanwhile', async () => {
    const store = createChatStore(opened.backend, opened.hotWrites().chat);
    const toolsBefore = Number(await count('interaction_tools'));
    const results = await Promise.all([store.saveExchange(exchange('ses_gone', 'msg_g', false)), store.saveExchange(exchange('ses_a', 'msg_h', false))]);
    expect(results).toEqual([false, true]);
    expect(await scalar(sql<{ n: number }>`SELECT count(*) AS n FROM messages WHERE id = 'msg_g'`)).toBe(0);
    expect(await scalar(sql<{ n: number }>`SELECT count(*) AS n FROM interactions WHERE message_id = 'msg_g'`)).toBe(0);
    expect(await scalar(sql<{ n: number }>`SELECT count(*) AS n FROM sessions WHERE id = 'ses_gone'`)).toBe(0);
    expect(await count('interaction_tools')).toBe(toolsBefore + 1); // ses_a's call only
    expect(await scalar(sql<{ n: number }>`SELECT message_count AS n FROM sessions WHERE id = 'ses_a'`)).toBe(4);
    expect(await store.history('ses_a', 3)).toEqual([
      { role: 'assistant', content: 'answer' },
      { role: 'user', content: 'question' },
      { role: 'assistant', content: 'answer' },
    ]);
  });

  it('deletes a session of its own workspace only, keeping the numbers of its answers', async () => {
    const store = createChatStore(opened.backend, opened.hotWrites().chat);
    await opened.backend.kysely.insertInto('workspaces').values({ id: 'wsp_2', name: 'other', created_at: NOW }).execute();
    expect(await store.deleteSession('wsp_2', 'ses_b', NOW)).toBe(false);
    expect(await store.findSession('wsp_2', 'ses_b')).toBeUndefined();
    expect((await store.findSession('wsp_1', 'ses_b'))?.id).toBe('ses_b');
    expect(await store.deleteSession('wsp_1', 'ses_b', NOW)).toBe(true);
    expect(await store.findSession('wsp_1', 'ses_b')).toBeUndefined();
    expect(await scalar(sql<{ n: number }>`SELECT count(*) AS n FROM messages WHERE session_id = 'ses_b'`)).toBe(0);
    expect(await scalar(sql<{ n: number }>`SELECT count(*) AS n FROM interactions WHERE message_id = 'msg_b' OR (session_id IS NULL AND latency_ms = 1)`)).toBe(1);
  });

  it('writes a group as if one exchange after another: a follow-up to a session the group creates, two to one session, a gone one', async () => {
    const store = createChatStore(opened.backend, opened.hotWrites().chat);
    const later = (e: ExchangeWrite, at: string, userId: string | null): ExchangeWrite => ({
      ...e,
      session: { ...e.session, last_message_at: at, user_id: userId },
      messages: e.messages.map((m) => ({ ...m, created_at: at })),
    });
    const results = await Promise.all([
      store.saveExchange(exchange('ses_g1', 'msg_g1')),
      store.saveExchange(later(exchange('ses_g1', 'msg_g2', false), '2026-11-25T00:00:01.000Z', 'u_first')),
      store.saveExchange(later(exchange('ses_g1', 'msg_g3', false), '2026-11-25T00:00:02.000Z', 'u_second')),
      store.saveExchange(exchange('ses_missing', 'msg_g4', false)),
      store.recordInteraction({ ...exchange('x', 'y').interaction, session_id: null, message_id: null, error: 'cancelled' }),
    ]);
    expect(results).toEqual([true, true, true, false, undefined]);
    const session = await store.findSession('wsp_1', 'ses_g1');
    expect(session).toMatchObject({ message_count: 6, last_message_at: '2026-11-25T00:00:02.000Z', user_id: 'u_first' });
    const order = await opened.backend.kysely.selectFrom('messages').select('id').where('session_id', '=', 'ses_g1').orderBy('seq').execute();
    expect(order.map((m) => m.id)).toEqual(['msg_g1_q', 'msg_g1', 'msg_g2_q', 'msg_g2', 'msg_g3_q', 'msg_g3']);
    expect(await scalar(sql<{ n: number }>`SELECT count(*) AS n FROM messages WHERE id = 'msg_g4'`)).toBe(0);
    expect(await scalar(sql<{ n: number }>`SELECT count(*) AS n FROM interactions WHERE session_id = 'ses_g1'`)).toBe(3);
    expect(await scalar(sql<{ n: number }>`SELECT count(*) AS n FROM interactions WHERE error = 'cancelled'`)).toBe(1);
  });
});
