// Issue 27 item 2: resumable event streams on /mcp's older lane (src/mcp/event-store.ts). A client
// of 2025-11-25 gets a priming event (an id, empty data) and a `retry` hint first on each POST
// stream; when it loses the stream mid-call it resumes with GET and Last-Event-ID and gets the
// response, whether the call ended meanwhile or is still running; an event id of another session is
// refused. The replay on an instance that is not answering the call follows what the answering
// instance stores, up to the response (checked on the store with two instances' views of it).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMcpEventStore } from '../../src/mcp/event-store.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { createPersona } from '../helpers/factories.js';
import { gatedModel } from '../helpers/gated-model.js';
import { waitFor } from '../helpers/mcp-tools.js';
import { testBackends } from '../helpers/postgres.js';
import { listen, readSse } from './chat-helpers.js';

describe.each(testBackends())('resumable MCP event streams on $kind', { timeout: 30_000 }, (backend) => {
  let t: TestApp;
  let origin: string;
  const model = gatedModel();

  beforeAll(async () => {
    t = await createTestApp({ backend, overrides: { llm: model.llm } });
    origin = await listen(t);
  });
  afterAll(async () => {
    model.state.release();
    await t?.close();
  });

  const headers = (session?: string) => ({
    authorization: `Bearer ${t.adminKey}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2025-11-25',
    ...(session ? { 'mcp-session-id': session } : {}),
  });
  const post = (body: unknown, session?: string, signal?: AbortSignal) => fetch(`${origin}/mcp`, { method: 'POST', headers: headers(session), body: JSON.stringify(body), ...(signal ? { signal } : {}) });

  /** The first bytes of an event stream, up to its first blank line: the first event as sent. */
  async function firstEvent(res: Response): Promise<string> {
    const reader = res.body!.getReader();
    let text = '';
    while (!text.includes('\n\n')) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    reader.releaseLock();
    return text.slice(0, text.indexOf('\n\n') + 2);
  }

  async function openSession(): Promise<string> {
    const res = await post({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'resuming', version: '1' } } });
    expect(res.status).toBe(200);
    const session = res.headers.get('mcp-session-id')!;
    // The stream opens with the priming event: an id to resume from, the retry hint, no data.
    expect(await firstEvent(res)).toMatch(/^id: \S+\nretry: 1000\ndata: \n\n$/);
    await res.body?.cancel();
    expect((await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, session)).status).toBe(202);
    return session;
  }

  /** Starts ask_persona "slowly" on a POST stream, reads its priming event's id, and drops the stream. */
  async function startAndDrop(session: string, personaId: string, id: number): Promise<string> {
    const dropped = new AbortController();
    const waiting = model.state.waiting;
    const res = await post({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'ask_persona', arguments: { personaId, message: 'answer slowly' } } }, session, dropped.signal);
    const priming = /^id: (\S+)\n/.exec(await firstEvent(res))![1]!;
    await waitFor(() => model.state.waiting === waiting + 1, 5_000, 'the model to start');
    dropped.abort();
    return priming;
  }

  const resumeOnce = (session: string, lastEventId: string) =>
    fetch(`${origin}/mcp`, { headers: { ...headers(session), accept: 'text/event-stream', 'last-event-id': lastEventId } });
  /**
   * GET with Last-Event-ID, as a client reconnects: until the server has noticed the dropped stream
   * it answers 409 (the stream is still connected), and the client tries again after `retry`.
   */
  async function resume(session: string, lastEventId: string): Promise<Response> {
    let res: Response | undefined;
    await waitFor(async () => {
      res = await resumeOnce(session, lastEventId);
      if (res.status !== 409) return true;
      await res.body?.cancel();
      return false;
    }, 5_000, 'the server to notice the dropped stream');
    return res!;
  }
  const responseTo = (id: number) => (e: { data: string }) => e.data !== '' && (JSON.parse(e.data) as { id?: number }).id === id;

  it('replays the response of a call that ended while the client was away', async () => {
    const session = await openSession();
    const persona = await createPersona(t, { name: 'Away desk' });
    model.reset();
    const priming = await startAndDrop(session, persona.id, 1);
    const aborted = model.state.aborted;
    model.state.release();
    // The call goes on without its stream (losing the stream is not cancelling the call).
    await waitFor(async () => (await t.ctx.db.kysely.selectFrom('mcp_events').select('n').where('session_id', '=', session).where('message', 'like', '%"result"%').execute()).length > 1, 5_000, 'the response to be stored');
    expect(model.state.aborted).toBe(aborted);
    const res = await resume(session, priming);
    expect(res.status).toBe(200);
    const read = await readSse(res, { stop: responseTo(1) });
    const answer = JSON.parse(read.events.at(-1)!.data) as { result: { structuredContent: { response: string } } };
    expect(answer.result.structuredContent.response).toBe('Answered.');
    expect(read.events.at(-1)!.id).toMatch(/^\d+\.[\w-]+$/);
  });

  it('resumes a call still running, and the response arrives on the resumed stream', async () => {
    const session = await openSession();
    const persona = await createPersona(t, { name: 'Running desk' });
    model.reset();
    const priming = await startAndDrop(session, persona.id, 7);
    const res = await resume(session, priming);
    expect(res.status).toBe(200);
    const reading = readSse(res, { stop: responseTo(7), timeoutMs: 10_000 });
    model.state.release();
    const read = await reading;
    expect((JSON.parse(read.events.at(-1)!.data) as { result: { structuredContent: { response: string } } }).result.structuredContent.response).toBe('Answered.');
  });

  it('refuses an event id that is not of the session', async () => {
    const mine = await openSession();
    const theirs = await openSession();
    expect((await resumeOnce(mine, 'not-an-id')).status).toBe(400);
    // An event of theirs (written behind their stream: waited for), named in my session: refused.
    const theirEvent = (await waitFor(
      () => t.ctx.db.kysely.selectFrom('mcp_events').select(['n', 'stream_id']).where('session_id', '=', theirs).orderBy('n').executeTakeFirst(),
      5_000,
      'their events to be written',
    ))!;
    const id = `${theirEvent.n}.${theirEvent.stream_id}`;
    const own = await resumeOnce(theirs, id);
    expect(own.status).toBe(200);
    await own.body?.cancel();
    expect((await resumeOnce(mine, id)).status).toBe(400);
  });

  it('follows a stream another instance is answering, up to its response', async () => {
    const instanceA = createMcpEventStore(t.ctx.db.kysely, t.ctx.logger);
    const answering = instanceA.forSession('ses-shared');
    const elsewhere = createMcpEventStore(t.ctx.db.kysely, t.ctx.logger).forSession('ses-shared');
    const priming = await answering.storeEvent('stream-1', {});
    await answering.storeEvent('stream-1', { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: 1 } });
    // Written behind the stream: another instance finds them once written.
    await instanceA.close();
    expect(await elsewhere.getStreamIdForEventId(priming)).toBe('stream-1');
    const sent: unknown[] = [];
    const replay = elsewhere.replayEventsAfter(priming, { send: async (_id, message) => void sent.push(message) });
    await waitFor(() => sent.length === 1, 5_000, 'the stored progress to be replayed');
    await answering.storeEvent('stream-1', { jsonrpc: '2.0', id: 3, result: { content: [] } });
    expect(await replay).toBe('stream-1');
    expect(sent).toEqual([
      { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: 1 } },
      { jsonrpc: '2.0', id: 3, result: { content: [] } },
    ]);
    // Asked again from the response itself: nothing more to come, at once.
    const last = (await t.ctx.db.kysely.selectFrom('mcp_events').select('n').where('session_id', '=', 'ses-shared').orderBy('n', 'desc').executeTakeFirstOrThrow()).n;
    expect(await elsewhere.replayEventsAfter(`${last}.stream-1`, { send: async () => {} })).toBe('stream-1');
  });
});
