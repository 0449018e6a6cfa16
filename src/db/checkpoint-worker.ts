/**
 * The WAL checkpoint thread (wal-checkpointer.ts starts it): its own connection to the database
 * file, with the house pragmas, running a PASSIVE checkpoint every `intervalMs`. PASSIVE copies
 * what no reader still needs into the database and never blocks a writer or a reader.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { openDatabase, type OpenDatabaseOptions } from './database.js';

const { intervalMs, ...options } = workerData as OpenDatabaseOptions & { intervalMs: number };
const checkpoint = openDatabase(options).sqlite.prepare('PRAGMA wal_checkpoint(PASSIVE)');
setInterval(() => checkpoint.run(), intervalMs);
// Loaded: stopping the thread is safe from now on (wal-checkpointer.ts waits for this).
parentPort?.postMessage('loaded');
