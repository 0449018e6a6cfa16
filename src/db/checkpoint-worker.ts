/**
 * The WAL checkpoint thread (wal-checkpointer.ts starts it): its own connection to the database
 * file, running a PASSIVE checkpoint every `intervalMs`. PASSIVE copies what no reader still needs
 * into the database and never blocks a writer or a reader.
 */
import SqliteDatabase from 'better-sqlite3';
import { workerData } from 'node:worker_threads';

const { filename, intervalMs, durability } = workerData as { filename: string; intervalMs: number; durability: 'normal' | 'full' };
const sqlite = new SqliteDatabase(filename, { fileMustExist: true });
sqlite.pragma(`synchronous = ${durability === 'full' ? 'FULL' : 'NORMAL'}`);
sqlite.pragma('busy_timeout = 5000');
const checkpoint = sqlite.prepare('PRAGMA wal_checkpoint(PASSIVE)');
setInterval(() => checkpoint.run(), intervalMs);
