import fs from 'node:fs';
import path from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { migrate, openDatabase } from '../../src/db/database.js';
import { tempDir } from '../helpers/app.js';

describe('openDatabase', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
  });
  const file = () => {
    const d = tempDir();
    dirs.push(d);
    return path.join(d, 'nested', 'switchboard.db');
  };

  it('uses WAL, foreign keys, sqlite-vec, and synchronous NORMAL or FULL by durability', async () => {
    for (const [durability, level] of [['normal', 1], ['full', 2]] as const) {
      const db = openDatabase({ filename: file(), durability });
      try {
        expect(db.sqlite.pragma('journal_mode', { simple: true })).toBe('wal');
        expect(db.sqlite.pragma('foreign_keys', { simple: true })).toBe(1);
        expect(db.sqlite.pragma('synchronous', { simple: true })).toBe(level);
        expect(db.sqlite.prepare('SELECT vec_version() AS v').get()).toMatchObject({ v: expect.stringMatching(/^v0\./) });
      } finally {
        await db.close();
      }
    }
  });

  it('applies migrations once', async () => {
    const db = openDatabase({ filename: file(), durability: 'normal' });
    try {
      expect(await migrate(db)).toEqual(['001-initial', '002-knowledge', '003-knowledge-keys', '004-conversations', '005-tool-hub', '006-conversation-starts', '007-teams', '008-ab-tests', '009-analytics', '010-channels', '011-oauth', '012-openai-threads', '013-message-times', '014-postgres-keyword-index', '015-change-signals', '016-postgres-postings-keys', '017-rate-windows', '018-source-leases', '019-shared-sessions', '020-leases', '021-idempotency-owner', '022-tool-server-oauth', '023-mcp-tasks', '024-mcp-events', '025-mcp-replies', '026-persona-versions', '027-ab-test-versions', '028-evaluations', '029-handoffs', '030-handoff-outbox', '031-handoff-notifications', '032-handoff-desks', '033-interaction-sources', '034-tool-server-registration', '035-people', '036-oidc']);
      expect(await migrate(db)).toEqual([]);
    } finally {
      await db.close();
    }
  });

  it('counts writes by this connection in localChanges and commits by another one in dataVersion', async () => {
    const filename = file();
    const db = openDatabase({ filename, durability: 'normal' });
    try {
      await migrate(db);
      const changes0 = db.localChanges();
      const version0 = db.dataVersion();
      expect([db.localChanges(), db.dataVersion()]).toEqual([changes0, version0]);
      await db.kysely.insertInto('workspaces').values({ id: 'wsp_a', name: 'a', created_at: '2026-01-01T00:00:00.000Z' }).execute();
      const changes1 = db.localChanges();
      expect(changes1).toBeGreaterThan(changes0);
      expect(db.dataVersion()).toBe(version0);
      const other = new SqliteDatabase(filename);
      other.prepare("INSERT INTO workspaces (id, name, created_at) VALUES ('wsp_b', 'b', '2026-01-01T00:00:00.000Z')").run();
      other.close();
      expect(db.dataVersion()).not.toBe(version0);
      expect(db.localChanges()).toBe(changes1);
    } finally {
      await db.close();
    }
  });
});
