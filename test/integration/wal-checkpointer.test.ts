// WAL checkpoints on a thread of their own (src/db/wal-checkpointer.ts, issue 18): the log stays
// bounded while the main connection no longer checkpoints in its commits, and the main connection
// takes checkpoints back when the thread stops.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { BACKSTOP_CHECKPOINT_PAGES, createWalCheckpointer, DEFAULT_CHECKPOINT_PAGES } from '../../src/db/wal-checkpointer.js';
import { createTestApp } from '../helpers/app.js';
import { createPersona } from '../helpers/factories.js';

describe('the WAL checkpoint thread', () => {
  it('keeps the log bounded while the main connection never checkpoints, and hands checkpoints back when it stops', async () => {
    const t = await createTestApp();
    const file = path.join(t.dataDir, 'switchboard.db');
    const sqlite = t.ctx.sqlite().sqlite;
    const checkpointer = createWalCheckpointer(t.ctx.sqlite(), { filename: file, durability: 'normal', intervalMs: 20 }, pino({ level: 'silent' }))!;
    try {
      sqlite.exec('CREATE TABLE scratch (v BLOB)');
      const insert = sqlite.prepare('INSERT INTO scratch (v) VALUES (randomblob(4000))');
      const round = sqlite.transaction(() => {
        for (let i = 0; i < 250; i++) insert.run(); // ~1 MB of log
      });
      const rounds = async (n: number) => {
        for (let i = 0; i < n; i++) {
          round();
          await new Promise((r) => setTimeout(r, 80));
        }
        return fs.statSync(`${file}-wal`).size;
      };
      // Neither the main connection nor a thread checkpoints: every round adds to the log.
      sqlite.pragma('wal_autocheckpoint = 0');
      const unchecked = await rounds(3);
      expect(unchecked).toBeGreaterThan(3_000_000);

      checkpointer.start();
      expect(checkpointer.running).toBe(true);
      // The main connection's own checkpoints are now only a backstop.
      expect(sqlite.pragma('wal_autocheckpoint', { simple: true })).toBe(BACKSTOP_CHECKPOINT_PAGES);
      sqlite.pragma('wal_autocheckpoint = 0');
      // The thread checkpoints: the log stops growing, rounds reuse it. However long the thread takes
      // to start (a loaded machine), four rounds in a row must leave it no longer; without the
      // thread every round grows it by ~1 MB.
      let size = fs.statSync(`${file}-wal`).size;
      let steady = 0;
      for (let i = 0; i < 50 && steady < 4; i++) {
        const next = await rounds(1);
        steady = next <= size ? steady + 1 : 0;
        size = next;
      }
      expect(steady).toBe(4);

      await checkpointer.close();
      expect(checkpointer.running).toBe(false);
      expect(sqlite.pragma('wal_autocheckpoint', { simple: true })).toBe(DEFAULT_CHECKPOINT_PAGES);
    } finally {
      await checkpointer.close();
      await t.close();
    }
  });

  it('starts with the first stored answer of an app on more than one core', async () => {
    const t = await createTestApp();
    try {
      expect(t.ctx.sqlite().sqlite.pragma('wal_autocheckpoint', { simple: true })).toBe(DEFAULT_CHECKPOINT_PAGES);
      const persona = await createPersona(t);
      const res = await t.request({ method: 'POST', url: '/query', body: { personaId: persona.id, message: 'hello' } });
      expect(res.statusCode, res.body).toBe(200);
      expect(t.ctx.sqlite().sqlite.pragma('wal_autocheckpoint', { simple: true })).toBe(os.availableParallelism() > 1 ? BACKSTOP_CHECKPOINT_PAGES : DEFAULT_CHECKPOINT_PAGES);
    } finally {
      await t.close();
    }
  });
});
