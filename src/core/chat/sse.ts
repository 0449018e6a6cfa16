import type { FastifyReply } from 'fastify';
import { drained, takeOver } from '../../http/raw-response.js';

/** API.md §6: a comment line this often keeps proxies from closing a quiet stream. */
export const PING_INTERVAL_MS = 15_000;

export interface SseWriter {
  /** Writes raw SSE text; resolves when the socket can take more (back-pressure). */
  write(text: string): Promise<void>;
  /** Aborted when the client goes away before the stream ends. */
  signal: AbortSignal;
  end(): void;
}

/** The client went away mid-stream; the abort reason seen by the model call. */
export class ClientDisconnectedError extends Error {
  constructor() {
    super('The client disconnected.');
    this.name = 'AbortError';
  }
}

/**
 * Takes the response over from Fastify and opens an event stream on it, keeping the headers the
 * hooks set (request id, rate limit). Writes wait for `drain`, so a slow reader slows the producer
 * instead of filling memory; closing the connection aborts `signal`.
 */
export function openSse(reply: FastifyReply, extraHeaders: Record<string, string> = {}, pingMs = PING_INTERVAL_MS): SseWriter {
  const res = takeOver(reply, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
    ...extraHeaders,
  });
  res.flushHeaders();
  const controller = new AbortController();
  let ended = false;
  let blocked = false;
  const ping = setInterval(() => {
    if (!blocked && !ended) res.write(': ping\n\n');
  }, pingMs);
  res.on('close', () => {
    clearInterval(ping);
    if (!ended) controller.abort(new ClientDisconnectedError());
  });

  return {
    signal: controller.signal,
    async write(text) {
      if (ended || res.destroyed) return;
      if (res.write(text)) return;
      blocked = true;
      await drained(res);
      blocked = false;
    },
    end() {
      if (ended) return;
      ended = true;
      clearInterval(ping);
      res.end();
    },
  };
}

/** Aborted when the client closes the connection before the (non-streamed) answer is sent. */
export function disconnectSignal(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.on('close', () => {
    if (!reply.raw.writableEnded) controller.abort(new ClientDisconnectedError());
  });
  return controller.signal;
}
