/**
 * Durability across kill -9 (issue 25: "kill -9 during ingestion and answers loses no acknowledged
 * write"), on each backend of the run, as test/e2e/exchange-durability.test.ts and
 * knowledge-durability.test.ts check it: the built server (`node dist/src/main.js serve`, offline
 * model, hashed embeddings) in a child process, real sockets, a real SIGKILL mid-traffic, then a
 * restart on the same data directory and database and every acknowledged write looked up. Rows,
 * each labelled with its backend (target: 0 lost):
 *  - answers: 32 clients POST /query until 150 answers are acknowledged (a complete 200), then
 *    kill -9 with the rest in flight; two rounds, restarting between. Each acknowledged answer must
 *    be in its session through the restarted server (its question once, the answer by id once) and
 *    have exactly one interaction row;
 *  - ingestion: 16 sources large enough to be queued (processed by the job queue after their 202),
 *    a URL source behind them whose page on loopback does not answer (so it is mid-processing for as
 *    long as needed), and small ones, processed inside their requests, still being sent; kill -9 once
 *    a queued source is ready, the held page was asked for and small ones were answered. The page
 *    answers the restarted server. After the restart every acknowledged source must end
 *    `ready` (resumed, never stuck or failed) with its chunks once (each position once), a keyword
 *    search for its own token must find exactly its chunks, and each index must hold one row per chunk.
 * A round whose kill did not land mid-traffic (too few answers in flight, the held source not
 * processing) fails its row: it would have proved nothing. Times are reported, not judged.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { type Kysely, sql } from 'kysely';
import { openDatabase } from '../src/db/database.js';
import { openPostgres } from '../src/db/postgres/connection.js';
import type { Database } from '../src/db/schema.js';
import { type BackendDatabase, labelled, withBackendDatabase } from './lib/backends.js';
import { ADMIN_KEY, call, type Server, startServer } from './lib/built-server.js';
import { type BenchOptions, type BenchRow, fmt } from './lib/harness.js';
import { type MetricRow, metricRow, metricTable } from './lib/in-process.js';

export const name = 'durability';
export const description = 'kill -9 of the built server during answers and during ingestion: acknowledged writes lost after the restart (target 0), on SQLite and PostgreSQL';
export const backends = ['sqlite', 'postgres'] as const;

const IN_FLIGHT = 32;
const ACKS_BEFORE_KILL = 150;
const ROUNDS = 2;
const LARGE_SOURCES = 16;
/** Paragraphs of a large source: ~170 KB, well above the size processed inside the request. */
const LARGE_PARAGRAPHS = 2_000;
const SMALL_PARAGRAPHS = 30;
/** The URL source's token (its page is held until the restart). */
const HELD = 'zkheldq';
const REQUEST_TIMEOUT_MS = 15_000;
const KILL_DEADLINE_MS = 60_000;
const RESUME_DEADLINE_MS = 180_000;

const headers = { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json' };

/** Every paragraph carries the source's own token: a keyword search for it finds only that source's chunks. */
const content = (token: string, paragraphs: number) =>
  Array.from({ length: paragraphs }, (_, p) => `Survey ${p} of ${token}: the numbat colony fed on termites along the granite ridge at dusk.`).join('\n\n');

/** The stored rows, read directly once the server is gone: the same Kysely queries on either backend. */
async function openData(dataDir: string, db: BackendDatabase): Promise<{ kysely: Kysely<Database>; kind: 'sqlite' | 'postgres'; close(): Promise<void> }> {
  if (db.backend.kind === 'sqlite') return openDatabase({ filename: path.join(dataDir, 'switchboard.db'), durability: 'normal' });
  const url = db.env.SWITCHBOARD_DATABASE_URL;
  if (!url) throw new Error('no database URL for the PostgreSQL rows');
  return openPostgres({ url, poolSize: 2 });
}

const count = async (kysely: Kysely<Database>, table: string) =>
  Number((await sql<{ n: number }>`SELECT count(*) AS n FROM ${sql.table(table)}`.execute(kysely)).rows[0]?.n ?? 0);

function judged(row: MetricRow, failures: string[]): MetricRow {
  const all = [...row.failures, ...failures];
  return { ...row, failures: all, pass: all.length === 0 };
}

interface Ack {
  sessionId: string;
  messageId: string;
  message: string;
}

/**
 * Keeps IN_FLIGHT queries running until ACKS_BEFORE_KILL are acknowledged, then SIGKILLs the server
 * with the rest in flight. A 200 whose body arrived completely (even just after the kill) is acknowledged.
 */
async function trafficThenKill(server: Server, personaId: string, round: number) {
  const acked: Ack[] = [];
  const unexpected: string[] = [];
  let next = 0;
  let killed = false;
  let inFlight = 0;
  let inFlightAtKill = 0;
  let killing: Promise<void> | undefined;
  const worker = async () => {
    while (!killed) {
      const message = `durability question r${round} ${next++}`;
      inFlight++;
      try {
        const res = await fetch(`${server.origin}/query`, { method: 'POST', headers, body: JSON.stringify({ personaId, message }), signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
        const text = await res.text();
        if (res.status !== 200) {
          if (!killed) unexpected.push(`${res.status} ${text.slice(0, 200)}`);
          continue;
        }
        const body = JSON.parse(text) as { sessionId: string; messageId: string };
        acked.push({ sessionId: body.sessionId, messageId: body.messageId, message });
        if (!killed && acked.length >= ACKS_BEFORE_KILL) {
          killed = true;
          inFlightAtKill = inFlight - 1;
          killing = server.kill();
        }
      } catch (err) {
        // Reset or refused after the kill: unacknowledged, may or may not be stored.
        if (!killed) unexpected.push(String(err));
      } finally {
        inFlight--;
      }
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  await (killing ?? server.kill());
  return { acked, sent: next, inFlightAtKill, unexpected, signal: server.child.signalCode };
}

/** The acknowledged answers missing from their sessions through the restarted server, one line each. */
async function missingAnswers(server: Server, acked: Ack[]): Promise<string[]> {
  const problems: string[] = [];
  let i = 0;
  const worker = async () => {
    while (i < acked.length) {
      const a = acked[i++]!;
      const res = await call(server.agent, server.origin, 'GET', `/sessions/${a.sessionId}`);
      if (res.status !== 200) {
        problems.push(`${a.message}: GET /sessions/${a.sessionId} → ${res.status}`);
        continue;
      }
      const session = res.json() as { messages: { id: string; role: string; content: string }[] };
      const user = session.messages.filter((m) => m.role === 'user' && m.content === a.message).length;
      const answer = session.messages.filter((m) => m.role === 'assistant' && m.id === a.messageId).length;
      if (user !== 1 || answer !== 1) problems.push(`${a.message}: ${user} questions, ${answer} answers with id ${a.messageId}`);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  return problems;
}

async function answersRow(db: BackendDatabase, options: BenchOptions): Promise<MetricRow> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchboard-bench-durability-'));
  let server: Server | null = null;
  const failures: string[] = [];
  const notes: string[] = [];
  const all: Ack[] = [];
  const lostByAnswer = new Set<string>();
  try {
    server = await startServer(dataDir, db, options.cpuProfileDir);
    const persona = await call(server.agent, server.origin, 'POST', '/personas', { name: 'Ada', instructions: 'Answer briefly.' });
    if (persona.status !== 201) throw new Error(`POST /personas: ${persona.status}`);
    const personaId = (persona.json() as { id: string }).id;
    for (let round = 1; round <= ROUNDS; round++) {
      process.stdout.write(`  ${db.backend.label}: answers round ${round}, ${IN_FLIGHT} clients until ${ACKS_BEFORE_KILL} acknowledged, then kill -9... `);
      const r = await trafficThenKill(server, personaId, round);
      server = null;
      if (r.signal !== 'SIGKILL') failures.push(`round ${round}: the server ended by ${r.signal ?? 'exit'}, not SIGKILL`);
      if (r.unexpected.length > 0) failures.push(`round ${round}: ${r.unexpected.length} queries failed before the kill (first: ${r.unexpected[0]})`);
      if (r.inFlightAtKill < IN_FLIGHT / 2) failures.push(`round ${round}: only ${r.inFlightAtKill} queries in flight at the kill`);
      all.push(...r.acked);
      const restarting = performance.now();
      server = await startServer(dataDir, db, options.cpuProfileDir);
      const restartMs = performance.now() - restarting;
      const missing = await missingAnswers(server, all);
      for (const m of missing) lostByAnswer.add(m);
      process.stdout.write(`${r.acked.length} acknowledged, ${r.sent - r.acked.length} cut off (${r.inFlightAtKill} in flight at the kill); ${missing.length} missing after a restart of ${fmt(restartMs)} ms\n`);
      notes.push(
        `round ${round}: ${fmt(r.acked.length)} acknowledged, ${fmt(r.sent - r.acked.length)} sent and cut off by the kill (${r.inFlightAtKill} in flight); restart to /health 200 in ${fmt(restartMs)} ms; ${missing.length} acknowledged answers missing from their sessions`,
      );
    }
    await server.stop();
    server = null;
    const data = await openData(dataDir, db);
    try {
      const rows = await data.kysely
        .selectFrom('interactions')
        .select((eb) => ['message_id', eb.fn.countAll<number>().as('n')])
        .where('message_id', 'is not', null)
        .groupBy('message_id')
        .execute();
      const counts = new Map(rows.map((r) => [r.message_id, Number(r.n)]));
      const wrong = all.filter((a) => counts.get(a.messageId) !== 1);
      for (const a of wrong) lostByAnswer.add(`${a.message}: ${counts.get(a.messageId) ?? 0} interaction rows`);
      notes.push(`${fmt(all.length)} acknowledged answers in all; interaction rows: ${wrong.length} acknowledged answers without exactly one`);
    } finally {
      await data.close();
    }
  } finally {
    await server?.kill();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
  if (new Set(all.map((a) => a.messageId)).size !== all.length) failures.push('an answer id was acknowledged twice');
  const lost = [...lostByAnswer];
  if (lost.length > 0) notes.push(`lost: ${lost.slice(0, 5).join('; ')}${lost.length > 5 ? '…' : ''}`);
  return judged(
    metricRow({
      name: labelled(`kill -9 during answers (${IN_FLIGHT} clients, ${ROUNDS} rounds): acknowledged answers lost`, db.backend),
      backend: db.backend.kind,
      metric: 'lost',
      value: lost.length,
      target: { kind: 'max', value: 0 },
      operations: all.length,
      notes,
    }),
    failures,
  );
}

async function ingestionRow(db: BackendDatabase, options: BenchOptions): Promise<MetricRow> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchboard-bench-durability-'));
  let server: Server | null = null;
  const failures: string[] = [];
  const notes: string[] = [];
  const lost: string[] = [];
  const acked = new Map<string, string>(); // token → source id, only for 202s received
  // A page on loopback that does not answer while `holding`: a URL source fetching it is
  // mid-processing for as long as the round wants, however fast the rest of ingestion is.
  let holding = true;
  let heldRequests = 0;
  const page = http.createServer((_req, res) => {
    if (holding) {
      heldRequests++;
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end(content(HELD, 200));
  });
  await new Promise<void>((resolve) => page.listen(0, '127.0.0.1', resolve));
  const env = { SWITCHBOARD_ALLOW_PRIVATE_URLS: '1' };
  try {
    const first = await startServer(dataDir, db, options.cpuProfileDir, env);
    server = first;
    const post = async (token: string, paragraphs: number) => {
      const res = await call(first.agent, first.origin, 'POST', '/knowledge', { kind: 'text', name: token, content: content(token, paragraphs) });
      if (res.status !== 202) throw new Error(`POST /knowledge ${token}: ${res.status}`);
      const body = res.json() as { id: string; status: string };
      acked.set(token, body.id);
      return body;
    };
    process.stdout.write(`  ${db.backend.label}: ingestion, ${LARGE_SOURCES} queued sources and small ones, kill -9 mid-ingestion... `);
    const large = Array.from({ length: LARGE_SOURCES }, (_, i) => `zkbig${i}q`);
    for (const token of large) {
      const { status } = await post(token, LARGE_PARAGRAPHS);
      if (status !== 'processing') failures.push(`${token} was ${status} when acknowledged, not queued`);
    }
    const held = await call(first.agent, first.origin, 'POST', '/knowledge', { kind: 'url', name: HELD, url: `http://127.0.0.1:${(page.address() as AddressInfo).port}/page` });
    if (held.status !== 202) throw new Error(`POST /knowledge (url): ${held.status}`);
    acked.set(HELD, (held.json() as { id: string }).id);
    let sending = true;
    const small = (async () => {
      for (let i = 0; sending; i++) await post(`zksmall${i}q`, SMALL_PARAGRAPHS).catch(() => (sending = false));
    })();
    // Kill once a queued source is done, the held page was asked for and small ones were answered.
    const status = async (token: string) => ((await call(first.agent, first.origin, 'GET', `/knowledge/${acked.get(token)}`)).json() as { status: string }).status;
    const deadline = Date.now() + KILL_DEADLINE_MS;
    let states: string[] = [];
    for (;;) {
      states = await Promise.all(large.map(status));
      if ((states.includes('ready') && heldRequests > 0 && acked.size > large.length + 4) || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    const heldState = await status(HELD);
    await first.kill();
    server = null;
    sending = false;
    await small;
    const processingAtKill = states.filter((s) => s === 'processing').length;
    if (!states.includes('ready')) failures.push(`no queued source was ready within ${KILL_DEADLINE_MS / 1000} s`);
    if (heldState !== 'processing' || heldRequests === 0) failures.push(`the held URL source was ${heldState} (its page asked for ${heldRequests} times) at the kill: it did not land mid-ingestion`);
    holding = false; // the page answers the restarted server

    const restarting = performance.now();
    server = await startServer(dataDir, db, options.cpuProfileDir, env);
    const restartMs = performance.now() - restarting;
    const second = server;
    // Resumed at start: everything ends ready within a bound; `failed` would be work lost to the kill.
    const resumeDeadline = Date.now() + RESUME_DEADLINE_MS;
    while (((await call(second.agent, second.origin, 'GET', '/knowledge?status=processing&limit=1')).json() as { data: unknown[] }).data.length > 0) {
      if (Date.now() > resumeDeadline) {
        failures.push(`sources still processing ${RESUME_DEADLINE_MS / 1000} s after the restart`);
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    const resumedMs = performance.now() - restarting;
    for (const [token, id] of acked) {
      const source = (await call(second.agent, second.origin, 'GET', `/knowledge/${id}`)).json() as { status?: string; chunkCount?: number; error?: string | null };
      if (source.status !== 'ready' || !(source.chunkCount && source.chunkCount > 0)) {
        lost.push(`${token}: ${source.status ?? 'gone'} (${source.chunkCount ?? 0} chunks${source.error ? `, ${source.error}` : ''})`);
        continue;
      }
      const hits = ((await call(second.agent, second.origin, 'GET', `/knowledge/search?mode=keyword&limit=50&q=${token}`)).json() as { data: { chunkId: string; sourceId: string }[] }).data;
      const others = hits.filter((h) => h.sourceId !== id).length;
      const distinct = new Set(hits.map((h) => h.chunkId)).size;
      if (others > 0 || distinct !== hits.length || hits.length !== Math.min(50, source.chunkCount)) {
        lost.push(`${token}: keyword search found ${hits.length} chunks (${distinct} distinct, ${others} of other sources) of ${source.chunkCount}`);
      }
    }
    await second.stop();
    server = null;
    process.stdout.write(`${acked.size} acknowledged (at the kill: the URL source ${heldState}, ${processingAtKill} of ${LARGE_SOURCES} queued still processing); ${lost.length} lost or wrong after the restart\n`);
    notes.push(
      `${fmt(acked.size)} sources acknowledged (${LARGE_SOURCES} queued of ~${fmt(content('zkbig0q', LARGE_PARAGRAPHS).length / 1024)} KiB, 1 URL source held, ${fmt(acked.size - LARGE_SOURCES - 1)} small processed in their requests); ` +
        `at the kill the URL source ${heldState} and ${processingAtKill} queued sources still processing; restart to /health 200 in ${fmt(restartMs)} ms, every source processed ${fmt(resumedMs)} ms after the restart began`,
    );

    // Exactly once, in every index: each source's chunk rows match its count with no position twice,
    // and the keyword and vector indexes hold one row per chunk.
    const data = await openData(dataDir, db);
    try {
      const k = data.kysely;
      const stuck = Number((await k.selectFrom('knowledge_sources').select((eb) => eb.fn.countAll<number>().as('n')).where('status', '=', 'processing').executeTakeFirst())?.n ?? 0);
      if (stuck > 0) failures.push(`${stuck} sources still processing in the database`);
      const perSource = await k
        .selectFrom('knowledge_sources as s')
        .leftJoin('knowledge_chunks as c', 'c.source_id', 's.id')
        .select((eb) => ['s.id', 's.status', 's.chunk_count', eb.fn.count<number>('c.rowid').as('chunks'), eb.fn.count<number>('c.position').distinct().as('positions')])
        .groupBy(['s.id', 's.status', 's.chunk_count'])
        .execute();
      const wrong = perSource.filter((s) => Number(s.chunks) !== (s.status === 'ready' ? Number(s.chunk_count) : 0) || Number(s.positions) !== Number(s.chunks));
      if (wrong.length > 0) failures.push(`${wrong.length} sources whose chunk rows do not match their count or repeat a position (first: ${wrong[0]!.id})`);
      const chunks = await count(k, 'knowledge_chunks');
      const indexes = data.kind === 'sqlite' ? ['knowledge_fts', 'knowledge_vec', 'knowledge_codes'] : ['knowledge_documents', 'knowledge_codes'];
      const sizes = await Promise.all(indexes.map(async (t) => [t, await count(k, t)] as const));
      const uneven = sizes.filter(([, n]) => n !== chunks);
      if (uneven.length > 0) failures.push(`indexes out of step with ${chunks} chunks: ${uneven.map(([t, n]) => `${t} ${n}`).join(', ')}`);
      notes.push(`${fmt(chunks)} chunks; ${sizes.map(([t, n]) => `${t} ${fmt(n)}`).join(', ')}`);
    } finally {
      await data.close();
    }
  } finally {
    await server?.kill();
    page.closeAllConnections();
    await new Promise<void>((resolve) => page.close(() => resolve()));
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
  if (lost.length > 0) notes.push(`lost: ${lost.slice(0, 5).join('; ')}${lost.length > 5 ? '…' : ''}`);
  return judged(
    metricRow({
      name: labelled('kill -9 during ingestion: acknowledged sources lost', db.backend),
      backend: db.backend.kind,
      metric: 'lost',
      value: lost.length,
      target: { kind: 'max', value: 0 },
      operations: acked.size,
      notes,
    }),
    failures,
  );
}

export async function run(options: BenchOptions): Promise<BenchRow[]> {
  const rows: MetricRow[] = [];
  for (const backend of options.backends) {
    rows.push(await withBackendDatabase(backend, (db) => answersRow(db, options)));
    rows.push(await withBackendDatabase(backend, (db) => ingestionRow(db, options)));
  }
  console.log(`\n${metricTable(rows)}`);
  return rows;
}
