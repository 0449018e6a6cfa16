// The chat store's grouped exchange writes (issue 18): one transaction per event-loop turn, each
// write acknowledged after the commit, and a failing write failing alone.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createChatStore, type ExchangeWrite } from '../../src/core/chat/chat.store.js';
import { type Db, migrate, openDatabase } from '../../src/db/database.js';
import { createWriteGroup } from '../../src/db/write-group.js';
import { tempDir } from '../helpers/app.js';

const NOW = '2026-11-25T00:00:00.000Z';

function exchange(sessionId: string, messageId: string, isNew = true): ExchangeWrite {
  return {
    session: { id: sessionId, workspace_id: 'wsp_1', persona_id: 'per_1', ab_test_id: null, variant: null, channel_id: null, user_id: null, title: 'q', message_count: 0, created_at: NOW, last_message_at: NOW },
    isNew,
    messages: [
      { id: `${messageId}_q`, session_id: sessionId, role: 'user', content: 'question', tool_calls: null, tool_call_id: null, created_at: NOW },
      { id: messageId, session_id: sessionId, role: 'assistant', content: 'answer', tool_calls: null, tool_call_id: null, created_at: NOW },
    ],
    interaction: { workspace_id: 'wsp_1', session_id: sessionId, message_id: messageId, persona_id: 'per_1', ab_test_id: null, variant: null, channel_id: null, user_id: null, model: 'm', started_at: NOW, latency_ms: 1, ttft_ms: 1, prompt_tokens: 1, completion_tokens: 1, tool_calls: 0, error: null, metadata: null, new_session: isNew ? 1 : 0 },
  };
}

describe('chat store: grouped exchange writes', () => {
  let db: Db;
  let writes = 0;
  const count = (table: string) => db.sqlite.prepare(`SELECT count(*) FROM ${table}`).pluck().get() as number;

  beforeAll(async () => {
    db = openDatabase({ filename: path.join(tempDir(), 'chat.db'), durability: 'normal' });
    await migrate(db);
    db.sqlite.prepare("INSERT INTO workspaces (id, name, created_at) VALUES ('wsp_1', 'w', ?)").run(NOW);
  });
  afterAll(async () => db?.close());

  it('writes the exchanges asked for in one turn in one transaction, and acknowledges each after the commit', async () => {
    const store = createChatStore(db, createWriteGroup(db.sqlite, { onWrite: () => writes++ }));
    const before = writes;
    const saved = [store.saveExchange(exchange('ses_a', 'msg_a')), store.saveExchange(exchange('ses_b', 'msg_b')), store.saveExchange(exchange('ses_c', 'msg_c'))];
    // Nothing is written (or acknowledged) before the group's turn comes.
    expect(count('sessions')).toBe(0);
    expect(await Promise.all(saved)).toEqual([true, true, true]);
    expect(writes - before).toBe(1); // one group
    expect([count('sessions'), count('messages'), count('interactions')]).toEqual([3, 6, 3]);
  });

  it('fails a bad write alone: the rest of its group is stored', async () => {
    const store = createChatStore(db, createWriteGroup(db.sqlite));
    const results = await Promise.allSettled([
      store.saveExchange(exchange('ses_d', 'msg_d')),
      store.saveExchange(exchange('ses_e', 'msg_a')), // message id taken: UNIQUE violation
      store.saveExchange(exchange('ses_f', 'msg_f')),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(String((results[1] as PromiseRejectedResult).reason)).toMatch(/UNIQUE/);
    const sessions = db.sqlite.prepare('SELECT id FROM sessions ORDER BY id').pluck().all();
    expect(sessions).toEqual(['ses_a', 'ses_b', 'ses_c', 'ses_d', 'ses_f']);
    // Nothing of the failed exchange was kept: no half-written session, message or interaction.
    expect(db.sqlite.prepare("SELECT count(*) FROM messages WHERE session_id = 'ses_e'").pluck().get()).toBe(0);
    expect(db.sqlite.prepare("SELECT count(*) FROM interactions WHERE session_id = 'ses_e'").pluck().get()).toBe(0);
  });

  it('answers false, writing nothing, for an existing session deleted meanwhile', async () => {
    const store = createChatStore(db, createWriteGroup(db.sqlite));
    const results = await Promise.all([store.saveExchange(exchange('ses_gone', 'msg_g', false)), store.saveExchange(exchange('ses_a', 'msg_h', false))]);
    expect(results).toEqual([false, true]);
    expect(db.sqlite.prepare("SELECT count(*) FROM messages WHERE id = 'msg_g'").pluck().get()).toBe(0);
    expect(db.sqlite.prepare("SELECT message_count FROM sessions WHERE id = 'ses_a'").pluck().get()).toBe(4);
  });
});
