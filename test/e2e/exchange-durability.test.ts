// The promise of saveExchange's grouped commit: an answer acknowledged by `POST /query` (a complete 200)
// survives kill -9 of the built server. Real processes, real sockets, a real SIGKILL mid-traffic.
import fs from 'node:fs';
import path from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { generateKeySecret } from '../../src/core/auth/keys.js';
import { tempDir } from '../helpers/app.js';
import { type BuiltServer as Server, builtServers, MAIN } from '../helpers/built-server.js';


const IN_FLIGHT = 32;
const ACKS_BEFORE_KILL = 150;
const ROUNDS = 2;

interface Ack {
  sessionId: string;
  messageId: string;
  message: string;
}


describe('exchange durability across kill -9 (built server)', () => {
  const dataDir = tempDir('switchboard-durability-');
  const key = generateKeySecret();

  afterAll(() => {
    killAll();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const { serve, killAll } = builtServers({ dataDir, adminKey: key });

  const auth = { authorization: `Bearer ${key}` };

  /**
   * Keeps IN_FLIGHT queries running until ACKS_BEFORE_KILL have been acknowledged, then SIGKILLs the server
   * with the rest still in flight. A 200 whose body arrived completely (even just after the kill) is acknowledged.
   */
  async function trafficThenKill(server: Server, personaId: string, round: number) {
    const acked: Ack[] = [];
    const unexpected: string[] = [];
    let next = 0;
    let killed = false;
    let inFlight = 0;
    let inFlightAtKill = 0;
    const worker = async () => {
      while (!killed) {
        const message = `durability question r${round} ${next++}`;
        inFlight++;
        try {
          const res = await fetch(`${server.url}/query`, {
            method: 'POST',
            headers: { ...auth, 'content-type': 'application/json' },
            body: JSON.stringify({ personaId, message }),
            signal: AbortSignal.timeout(8_000),
          });
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
            server.child.kill('SIGKILL');
          }
        } catch (err) {
          // Connection reset / refused after the kill: unacknowledged, may or may not be stored.
          if (!killed) unexpected.push(String(err));
        } finally {
          inFlight--;
        }
      }
    };
    await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
    await server.exited;
    expect(unexpected, 'every query before the kill is answered 200').toEqual([]);
    expect(server.child.signalCode).toBe('SIGKILL');
    expect(inFlightAtKill, 'the kill lands with queries still in flight').toBeGreaterThanOrEqual(IN_FLIGHT / 2);
    return { acked, sent: next };
  }

  /** Every acknowledged answer is in its session (through the restarted server) and in `interactions` exactly once. */
  async function verify(server: Server, acked: Ack[]) {
    const problems: string[] = [];
    let i = 0;
    const worker = async () => {
      while (i < acked.length) {
        const a = acked[i++]!;
        const res = await fetch(`${server.url}/sessions/${a.sessionId}`, { headers: auth, signal: AbortSignal.timeout(5_000) });
        if (res.status !== 200) {
          problems.push(`${a.message}: GET /sessions/${a.sessionId} → ${res.status}`);
          continue;
        }
        const session = (await res.json()) as { messages: { id: string; role: string; content: string }[] };
        const user = session.messages.filter((m) => m.role === 'user' && m.content === a.message);
        const answer = session.messages.filter((m) => m.role === 'assistant' && m.id === a.messageId);
        if (user.length !== 1) problems.push(`${a.message}: ${user.length} user messages with its text`);
        if (answer.length !== 1) problems.push(`${a.message}: ${answer.length} assistant messages with id ${a.messageId}`);
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    expect(problems, 'acknowledged answers lost after kill -9').toEqual([]);

    const db = new SqliteDatabase(path.join(dataDir, 'switchboard.db'), { readonly: true, fileMustExist: true });
    try {
      const counts = new Map(
        (db.prepare('SELECT message_id AS id, COUNT(*) AS n FROM interactions WHERE message_id IS NOT NULL GROUP BY message_id').all() as { id: string; n: number }[]).map(
          (r) => [r.id, r.n],
        ),
      );
      const wrong = acked.filter((a) => counts.get(a.messageId) !== 1).map((a) => `${a.messageId}: ${counts.get(a.messageId) ?? 0} interaction rows`);
      expect(wrong, 'each acknowledged answer has exactly one interaction row').toEqual([]);
    } finally {
      db.close();
    }
  }

  it(`keeps every acknowledged answer through ${ROUNDS} SIGKILLs under ${IN_FLIGHT} concurrent queries`, { timeout: 30_000 }, async () => {
    expect(fs.existsSync(MAIN), 'dist/ is built (npx tsc -p tsconfig.json)').toBe(true);
    let server = await serve();
    const res = await fetch(`${server.url}/personas`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Ada', instructions: 'Answer briefly.' }),
      signal: AbortSignal.timeout(5_000),
    });
    expect(res.status, await res.clone().text()).toBe(201);
    const personaId = ((await res.json()) as { id: string }).id;

    const all: Ack[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const { acked, sent } = await trafficThenKill(server, personaId, round);
      expect(acked.length).toBeGreaterThanOrEqual(ACKS_BEFORE_KILL);
      expect(sent - acked.length, 'some queries were cut off unacknowledged').toBeGreaterThan(0);
      all.push(...acked);
      expect(new Set(all.map((a) => a.messageId)).size).toBe(all.length);
      server = await serve();
      await verify(server, all);
    }
    server.child.kill('SIGKILL');
    await server.exited;
  });
});
