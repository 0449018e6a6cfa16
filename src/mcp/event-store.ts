/**
 * Resumable event streams for MCP sessions of the older era (issue 27; the SDK's `EventStore`), kept
 * in the database (migration 024) so a client resumes on whichever instance it reaches. Every message
 * a session sends on an SSE stream gets the next place `n` in its stream and is stored; its SSE event
 * id is `<n>.<stream>`. POST streams open with a priming event (id `0.<stream>`, empty data) and a
 * `retry` hint, for clients of 2025-11-25 (the SDK sends neither to older ones). A
 * client that lost a stream sends `GET /mcp` with `Last-Event-ID`: what was stored after that event
 * is replayed, and when the request that stream answers is still being worked on by another
 * instance, the replay goes on with what that instance stores until the response.
 *
 * Rows are written behind the stream, in batches (one INSERT for what a moment's traffic sent): the
 * message is not held up, and the cost per event is a fraction of a statement. A replay here writes
 * what is pending first; one on another instance finds it at its next look (every 100 ms).
 */
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from '../db/schema.js';

/** How long stored events can be resumed. */
export const RESUME_WINDOW_MS = 10 * 60_000;
/** The `retry` hint of the priming event: how long a client waits before it reconnects. */
export const RETRY_MS = 1_000;
/** A replay of a stream another instance is answering waits this long at most for the response. */
const FOLLOW_MS = 60_000;
const FOLLOW_POLL_MS = 100;
/** How long events wait to be written with the others of that moment (one commit for them all). */
const FLUSH_MS = 20;
/** Rows per INSERT (PostgreSQL and SQLite both take 5 × 500 parameters). */
const BATCH_ROWS = 500;

/** The SDK's id of a session's standalone GET stream: nothing is answered on it, so a replay of it never follows. */
const STANDALONE_STREAM = '_GET_stream';

type Message = Record<string, unknown>;
type Row = Database['mcp_events'];

/** An event id: its place and its stream (the SDK's UUID, or its standalone stream's name). */
const EVENT_ID = /^(\d{1,16})\.([A-Za-z0-9_-]{1,64})$/;

/** A response (result or error) to a request: the last message of the stream that answers it. */
const isResponse = (m: Message) => 'id' in m && ('result' in m || 'error' in m);

export function createMcpEventStore(db: Kysely<Database>, logger: Logger, now: () => number = Date.now) {
  let pending: Row[] = [];
  let flushing: Promise<void> | undefined;

  /** Writes what is pending (and waits for a write under way). */
  async function flush(): Promise<void> {
    while (flushing) await flushing;
    if (pending.length === 0) return;
    const rows = pending;
    pending = [];
    flushing = (async () => {
      for (let i = 0; i < rows.length; i += BATCH_ROWS) {
        // A standalone stream's places may meet another instance's (a session moves): the first one stays.
        await db.insertInto('mcp_events').values(rows.slice(i, i + BATCH_ROWS)).onConflict((oc) => oc.doNothing()).execute();
      }
    })()
      .catch((err: unknown) => logger.warn({ err, events: rows.length }, 'MCP stream events could not be stored; those streams cannot be resumed'))
      .finally(() => (flushing = undefined));
    await flushing;
  }

  function enqueue(row: Row): void {
    if (pending.length === 0) setTimeout(() => void flush(), FLUSH_MS).unref();
    pending.push(row);
  }

  return {
    /** The SDK `EventStore` of one session's transport. */
    forSession(sessionId: string) {
      /** Per stream: the last place given. */
      const places = new Map<string, number>();
      /** Streams this transport is still answering on: the SDK goes on writing them itself after a replay. */
      const answering = new Set<string>();
      return {
        async storeEvent(streamId: string, message: unknown): Promise<string> {
          const m = message as Message;
          if (isResponse(m)) answering.delete(streamId);
          else answering.add(streamId);
          // The priming event opens a stream at 0 (stored, so any instance knows the stream is this
          // session's, and never replayed); the standalone stream outlives a move of its session to
          // another instance, so its places continue from the clock.
          const first = Object.keys(m).length === 0 ? 0 : streamId === STANDALONE_STREAM ? now() * 100 : 1;
          const n = Math.max((places.get(streamId) ?? -1) + 1, first);
          places.set(streamId, n);
          if (isResponse(m)) places.delete(streamId);
          enqueue({ session_id: sessionId, stream_id: streamId, n, message: JSON.stringify(m), created_ms: now() });
          return `${n}.${streamId}`;
        },

        /** The stream of an event of this session; undefined for any other id (the SDK answers 400). */
        async getStreamIdForEventId(eventId: string): Promise<string | undefined> {
          const id = EVENT_ID.exec(eventId);
          if (!id) return undefined;
          await flush();
          const row = await db
            .selectFrom('mcp_events')
            .select('stream_id')
            .where('session_id', '=', sessionId)
            .where('stream_id', '=', id[2]!)
            .where('n', '=', Number(id[1]))
            .executeTakeFirst();
          return row?.stream_id;
        },

        async replayEventsAfter(lastEventId: string, { send }: { send: (eventId: string, message: never) => Promise<void> }): Promise<string> {
          const id = EVENT_ID.exec(lastEventId);
          if (!id) throw new Error('Not an event id of this server.');
          const streamId = id[2]!;
          let after = Number(id[1]);
          await flush();
          const select = () => db.selectFrom('mcp_events').select(['n', 'message']).where('session_id', '=', sessionId).where('stream_id', '=', streamId);
          // The client has the response already: nothing more comes on this stream.
          const named = await select().where('n', '=', after).executeTakeFirst();
          if (!named) throw new Error('Not an event of this session.');
          if (isResponse(JSON.parse(named.message) as Message)) return streamId;
          const until = Date.now() + FOLLOW_MS;
          for (;;) {
            let answered = false;
            for (const row of await select().where('n', '>', after).orderBy('n').execute()) {
              const m = JSON.parse(row.message) as Message;
              after = row.n;
              await send(`${row.n}.${streamId}`, m as never);
              if (isResponse(m)) answered = true;
            }
            // Answered, or written on here from now on by the SDK, or not a request's stream, or given up on.
            if (answered || answering.has(streamId) || streamId === STANDALONE_STREAM || Date.now() >= until) return streamId;
            await new Promise((resolve) => setTimeout(resolve, FOLLOW_POLL_MS));
          }
        },
      };
    },

    /** Events past the resumption window go. */
    async purge(): Promise<void> {
      await db.deleteFrom('mcp_events').where('created_ms', '<', now() - RESUME_WINDOW_MS).execute();
    },

    async endSession(sessionId: string): Promise<void> {
      await flush();
      await db.deleteFrom('mcp_events').where('session_id', '=', sessionId).execute();
    },

    /** Shutdown: what is pending is written. */
    close: flush,
  };
}

export type McpEventStore = ReturnType<typeof createMcpEventStore>;
