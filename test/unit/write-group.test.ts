// The context's write group (issue 18): the answer path's and the channel inbox's writes of one
// event-loop turn share one transaction, each settling after the commit; a write that throws fails alone.
import path from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createChannelStore } from '../../src/business/channels/channels.store.js';
import { createChatStore } from '../../src/core/chat/chat.store.js';
import { type Db, migrate, openDatabase } from '../../src/db/database.js';
import { createSqliteHotWrites } from '../../src/db/sqlite/hot-writes.js';
import { createWriteGroup, type WriteGroup } from '../../src/db/write-group.js';
import { tempDir } from '../helpers/app.js';

const NOW = '2026-11-25T00:00:00.000Z';

describe('write group', () => {
  let db: Db;
  /** A second connection: it sees a write only once its transaction has committed. */
  let reader: SqliteDatabase.Database;
  let groups = 0;
  let writes: WriteGroup;

  beforeAll(async () => {
    const filename = path.join(tempDir(), 'writes.db');
    db = openDatabase({ filename, durability: 'normal' });
    await migrate(db);
    reader = new SqliteDatabase(filename, { readonly: true });
    db.sqlite.prepare("INSERT INTO workspaces (id, name, created_at) VALUES ('wsp_1', 'w', ?)").run(NOW);
    db.sqlite
      .prepare("INSERT INTO channels (id, workspace_id, type, name, persona_id, ab_test_id, settings, secrets, created_at, updated_at) VALUES ('chn_1', 'wsp_1', 'webhook', 'c', 'per_1', NULL, '{}', 'x', ?, ?)")
      .run(NOW, NOW);
    writes = createWriteGroup(db.sqlite, { onWrite: () => groups++ });
  });
  afterAll(async () => {
    reader?.close();
    await db?.close();
  });

  const inboxRow = (externalId: string) => ({ channel_id: 'chn_1', external_id: externalId, conversation_id: 'c', payload: '{}', status: 'pending' as const, received_at: NOW });
  const count = (sql: string) => db.sqlite.prepare(sql).pluck().get() as number;
  const committed = (id: string) => reader.prepare('SELECT count(*) FROM workspaces WHERE id = ?').pluck().get(id) === 1;

  it('commits the channel inbox and the answer path of one turn together, settling each after the commit', async () => {
    const hot = createSqliteHotWrites(db, writes);
    const channels = createChannelStore(db, hot.channels);
    const chat = createChatStore(db, hot.chat);
    const before = groups;
    const stored = [
      channels.receive(inboxRow('ev-1')),
      chat.recordInteraction({ workspace_id: 'wsp_1', session_id: null, message_id: null, persona_id: 'per_1', ab_test_id: null, variant: null, channel_id: 'chn_1', user_id: null, model: 'm', started_at: NOW, latency_ms: 5, ttft_ms: null, prompt_tokens: 0, completion_tokens: 0, tool_calls: 0, error: null, metadata: null, new_session: 0, persona_version: 1 }),
      channels.receive(inboxRow('ev-1')), // the same delivery again: not stored twice
      channels.setSession('chn_1', 'c', 'ses_1'),
    ];
    expect(count('SELECT count(*) FROM channel_inbox')).toBe(0); // nothing before the group's turn
    const [seq, , again] = await Promise.all(stored);
    expect(groups - before).toBe(1);
    expect(typeof seq).toBe('number');
    expect(again).toBeNull();
    expect([count('SELECT count(*) FROM channel_inbox'), count('SELECT count(*) FROM interactions'), count('SELECT count(*) FROM channel_conversations')]).toEqual([1, 1, 1]);
    expect(await channels.claim(seq as number, { status: 'pending', claimedBy: null }, 'local')).toBe(true);
    expect(await channels.claim(seq as number, { status: 'pending', claimedBy: null }, 'local')).toBe(false);
    expect(groups - before).toBe(3); // one group per turn
  });

  it('runs the writes of one turn in one transaction, committed once', async () => {
    const before = groups;
    const seen: boolean[] = [];
    const insert = (id: string) => db.sqlite.prepare("INSERT INTO workspaces (id, name, created_at) VALUES (?, ?, ?)").run(id, id, NOW).changes;
    await Promise.all([
      writes.run(() => insert('wsp_a')),
      writes.run(() => insert('wsp_b')),
      // Another connection does not see the first write yet: it is not committed before the last.
      writes.run(() => seen.push(committed('wsp_a'), committed('wsp_b'))),
    ]);
    expect(seen).toEqual([false, false]);
    expect([committed('wsp_a'), committed('wsp_b')]).toEqual([true, true]);
    expect(groups - before).toBe(1);
  });

  it('fails a throwing write alone; the rest of its group is committed', async () => {
    const before = groups;
    const seen: boolean[] = [];
    const results = await Promise.allSettled([
      writes.run(() => db.sqlite.prepare("INSERT INTO workspaces (id, name, created_at) VALUES ('wsp_2', 'w2', ?)").run(NOW).changes),
      writes.run(() => {
        seen.push(committed('wsp_2'));
        return db.sqlite.prepare("INSERT INTO workspaces (id, name, created_at) VALUES ('wsp_3', 'w3', ?)").run(NOW).changes;
      }),
      writes.run(() => db.sqlite.prepare("INSERT INTO workspaces (id, name, created_at) VALUES ('wsp_1', 'id taken', ?)").run(NOW).changes),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
    // The second write ran twice: first in one transaction with the others (wsp_2 not committed),
    // which the throwing write rolled back, then alone, after wsp_2 had been committed alone.
    expect(seen).toEqual([false, true]);
    expect(groups - before).toBe(1);
    expect(db.sqlite.prepare("SELECT id FROM workspaces WHERE id IN ('wsp_1', 'wsp_2', 'wsp_3') ORDER BY id").pluck().all()).toEqual(['wsp_1', 'wsp_2', 'wsp_3']);
    expect(reader.prepare("SELECT name FROM workspaces WHERE id = 'wsp_1'").pluck().get()).toBe('w'); // the failed write left nothing
  });
});
