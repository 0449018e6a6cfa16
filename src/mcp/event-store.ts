/**
 * Resumable event streams for MCP sessions of the older era (issue 27; the SDK's `EventStore`), kept
 * in the database (migration 024) so a client resumes on whichever instance it reaches. Every message
 * a session sends on an SSE stream is stored before it is written, its row number the SSE event id
 * (the priming event, which carries nothing, is not stored: its id names its stream);
 * POST streams open with a priming event (an id, empty data) and a `retry` hint, for clients of
 * 2025-11-25 (the SDK sends neither to older ones). A client that lost a stream sends `GET /mcp`
 * with `Last-Event-ID`: what was stored after that event is replayed, and when the request that
 * stream answers is still being worked on by another instance, the replay goes on with what that
 * instance stores until the response, so the client gets it wherever the work runs.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';

/** How long stored events can be resumed. */
export const RESUME_WINDOW_MS = 10 * 60_000;
/** The `retry` hint of the priming event: how long a client waits before it reconnects. */
export const RETRY_MS = 1_000;
/** A replay of a stream another instance is answering waits this long at most for the response. */
const FOLLOW_MS = 60_000;
const FOLLOW_POLL_MS = 100;

/** The SDK's id of a session's standalone GET stream: nothing is answered on it, so a replay of it never follows. */
const STANDALONE_STREAM = '_GET_stream';

type Message = Record<string, unknown>;

/** A priming event's id: `p` and the SDK's stream id (a UUID, or its standalone stream's name). */
const PRIMING_ID = /^p[A-Za-z0-9_-]{1,64}$/;

/** A response (result or error) to a request: the last message of the stream that answers it. */
const isResponse = (m: Message) => 'id' in m && ('result' in m || 'error' in m);

export function createMcpEventStore(db: Kysely<Database>, now: () => number = Date.now) {
  /** The stream of an event of this session; undefined for an id not of this session (or not an id). */
  /**
   * The event an id names, in this session. A priming event is not stored (it carries nothing to
   * replay): its id, `p` and the stream's id, names the point before the stream's first event.
   */
  async function eventOf(sessionId: string, eventId: string): Promise<{ stream_id: string; message: string; seq: number } | undefined> {
    if (PRIMING_ID.test(eventId)) return { stream_id: eventId.slice(1), message: '{}', seq: 0 };
    if (!/^\d{1,15}$/.test(eventId)) return undefined;
    return db.selectFrom('mcp_events').select(['stream_id', 'message', 'seq']).where('seq', '=', Number(eventId)).where('session_id', '=', sessionId).executeTakeFirst();
  }
  const streamOf = async (sessionId: string, eventId: string) => (await eventOf(sessionId, eventId))?.stream_id;

  return {
    /** The SDK `EventStore` of one session's transport. */
    forSession(sessionId: string) {
      /** Streams this transport is still answering on: the SDK goes on writing them itself after a replay. */
      const answering = new Set<string>();
      return {
        async storeEvent(streamId: string, message: unknown): Promise<string> {
          const m = message as Message;
          if (isResponse(m)) answering.delete(streamId);
          else answering.add(streamId);
          // The priming event opens the stream: its id says where a replay starts, no row needed.
          if (Object.keys(m).length === 0) return `p${streamId}`;
          const row = await db
            .insertInto('mcp_events')
            .values({ session_id: sessionId, stream_id: streamId, message: JSON.stringify(m), created_ms: now() })
            .returning('seq')
            .executeTakeFirstOrThrow();
          return String(row.seq);
        },

        getStreamIdForEventId: (eventId: string) => streamOf(sessionId, eventId),

        async replayEventsAfter(lastEventId: string, { send }: { send: (eventId: string, message: never) => Promise<void> }): Promise<string> {
          const last = await eventOf(sessionId, lastEventId);
          if (last === undefined) throw new Error(`No event ${lastEventId.slice(0, 20)} in this session.`);
          const streamId = last.stream_id;
          // The client has the response already: nothing more comes on this stream.
          if (isResponse(JSON.parse(last.message) as Message)) return streamId;
          let after = last.seq;
          const until = Date.now() + FOLLOW_MS;
          for (;;) {
            const rows = await db
              .selectFrom('mcp_events')
              .select(['seq', 'message'])
              .where('session_id', '=', sessionId)
              .where('stream_id', '=', streamId)
              .where('seq', '>', after)
              .orderBy('seq')
              .execute();
            let answered = false;
            for (const row of rows) {
              after = row.seq;
              const m = JSON.parse(row.message) as Message;
              await send(String(row.seq), m as never);
              if (isResponse(m)) answered = true;
            }
            // Answered, or written on here from now on by the SDK, or not a request's stream, or given up on.
            if (answered || answering.has(streamId) || streamId === STANDALONE_STREAM || Date.now() >= until) return streamId;
            await new Promise((resolve) => setTimeout(resolve, FOLLOW_POLL_MS));
          }
        },
      };
    },

    /** Events past the resumption window, and those of sessions that ended, go. */
    async purge(): Promise<void> {
      await db.deleteFrom('mcp_events').where('created_ms', '<', now() - RESUME_WINDOW_MS).execute();
    },

    endSession: (sessionId: string) => db.deleteFrom('mcp_events').where('session_id', '=', sessionId).execute(),
  };
}

export type McpEventStore = ReturnType<typeof createMcpEventStore>;
