// The context's write group (issue 18): the answer path's and the channel inbox's writes of one
// event-loop turn share one transaction, each settling after the commit; a write that throws fails alone.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createChannelStore } from '../../src/business/channels/channels.store.js';
import { createChatStore } from '../../src/core/chat/chat.store.js';
import { type Db, migrate, openDatabase } from '../../src/db/database.js';
import { createWriteGroup, type WriteGroup } from '../../src/db/write-group.js';
import { tempDir } from '../helpers/app.js';

const NOW = '2026-11-25T00:00:00.000Z';

describe('write group', () => {
  let db: Db;
  let groups = 0;
  let writes: WriteGroup;

  beforeAll(async () => {
    db = openDatabase({ filename: path.join(tempDir(), 'writes.db'), durability: 'normal' });
    await migrate(db);
    db.sqlite.prepare("INSERT INTO workspaces (id, name, created_at) VALUES ('wsp_1', 'w', ?)").run(NOW);
    db.sqlite
      .prepare("INSERT INTO channels (id, workspace_id, type, name, persona_id, ab_test_id, settings, secrets, created_at, updated_at) VALUES ('chn_1', 'wsp_1', 'webhook', 'c', 'per_1', NULL, '{}', 'x', ?, ?)")
      .run(NOW, NOW);
    writes = createWriteGroup(db.sqlite, { onWrite: () => groups++ });
  });
  afterAll(async () => db?.close());

  const inboxRow = (externalId: string) => ({ channel_id: 'chn_1', external_id: externalId, conversation_id: 'c', payload: '{}', status: 'pending' as const, received_at: NOW });
  const count = (sql: string) => db.sqlite.prepare(sql).pluck().get() as number;

  it('commits the channel inbox and the answer path of one turn together, settling each after the commit', async () => {
    const channels = createChannelStore(db, writes);
    const chat = createChatStore(db, writes);
    const before = groups;
    const stored = [
      channels.receive(inboxRow('ev-1')),
      chat.recordInteraction({ workspace_id: 'wsp_1', session_id: null, message_id: null, persona_id: 'per_1', ab_test_id: null, variant: null, channel_id: 'chn_1', user_id: null, model: 'm', started_at: NOW, latency_ms: 5, ttft_ms: null, prompt_tokens: 0, completion_tokens: 0, tool_calls: 0, error: null, metadata: null, new_session: 0 }),
      channels.receive(inboxRow('ev-1')), // the same delivery again: not stored twice
      channels.setSession('chn_1', 'c', 'ses_1'),
    ];
    expect(count('SELECT count(*) FROM channel_inbox')).toBe(0); // nothing before the group's turn
    const [seq, , again] = await Promise.all(stored);
    expect(groups - before).toBe(1);
    expect(typeof seq).toBe('number');
    expect(again).toBeNull();
    expect([count('SELECT count(*) FROM channel_inbox'), count('SELECT count(*) FROM interactions'), count('SELECT count(*) FROM channel_conversations')]).toEqual([1, 1, 1]);
    expect(await channels.claim(seq as number, 'pending')).toBe(true);
    expect(await channels.claim(seq as number, 'pending')).toBe(false);
    expect(groups - before).toBe(3); // one group per turn
  });

  it('fails a throwing write alone; the rest of its group is committed', async () => {
    const results = await Promise.allSettled([
      writes.run(() => db.sqlite.prepare("INSERT INTO workspaces (id, name, created_at) VALUES ('wsp_2', 'w2', ?)").run(NOW).changes),
      writes.run(() => db.sqlite.prepare("INSERT INTO workspaces (id, name, created_at) VALUES ('wsp_1', 'id taken', ?)").run(NOW).changes),
      writes.run(() => db.sqlite.prepare("INSERT INTO workspaces (id, name, created_at) VALUES ('wsp_3', 'w3', ?)").run(NOW).changes),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(db.sqlite.prepare("SELECT id FROM workspaces WHERE id LIKE 'wsp_%' ORDER BY id").pluck().all()).toEqual(['wsp_1', 'wsp_2', 'wsp_3']);
  });
});
