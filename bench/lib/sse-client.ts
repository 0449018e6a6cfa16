/**
 * A lean Server-Sent Events client for the chat benchmark: one POST over `http.request` (on the
 * caller's keep-alive agent), the body read as events, each `data` shown to a classifier. Cheap
 * enough to hold thousands open in one process, and the same code times both the platform and
 * the fake model, so its own cost cancels out of a difference.
 */
import http from 'node:http';

/** What an event's data is to the caller: the first one it waits for, the platform's `done`, an `error`. */
export type EventKind = 'first' | 'done' | 'error' | undefined;

export interface SseRequest {
  url: URL;
  headers: Record<string, string>;
  body: string;
  agent: http.Agent;
  classify(data: string): EventKind;
  /** The stream fails when no bytes arrive for this long. */
  idleTimeoutMs: number;
}

export interface SseOutcome {
  status: number;
  /** ms from sending the request to the first event classified `first`; null when none came. */
  firstMs: number | null;
  /** ms from sending the request to the end of the response. */
  totalMs: number;
  /** An event classified `done` arrived. */
  doneEvent: boolean;
  /** The last event was `data: [DONE]`. */
  doneMarker: boolean;
  /** The data of an `error` event, a transport error, or the start of a non-200 body. */
  error: string | null;
  events: number;
}

export interface SseStream {
  /** Resolves at the first `first` event, or when the stream ends or fails without one. */
  first: Promise<void>;
  result: Promise<SseOutcome>;
  cancel(reason: string): void;
}

export function openSse(request: SseRequest): SseStream {
  let resolveFirst!: () => void;
  const first = new Promise<void>((resolve) => (resolveFirst = resolve));
  const outcome: SseOutcome = { status: 0, firstMs: null, totalMs: 0, doneEvent: false, doneMarker: false, error: null, events: 0 };
  let req: http.ClientRequest | undefined;
  let cancelled: string | null = null;

  const result = new Promise<SseOutcome>((resolve) => {
    let settled = false;
    const started = performance.now();
    const settle = (error?: string) => {
      if (settled) return;
      settled = true;
      if (error && !outcome.error) outcome.error = error;
      outcome.totalMs = performance.now() - started;
      resolveFirst();
      resolve(outcome);
    };
    req = http.request(request.url, {
      method: 'POST',
      agent: request.agent,
      headers: { ...request.headers, 'content-length': Buffer.byteLength(request.body) },
    });
    req.setTimeout(request.idleTimeoutMs, () => req?.destroy(new Error(`no bytes for ${request.idleTimeoutMs} ms`)));
    req.on('error', (err) => settle(cancelled ?? err.message));
    req.on('response', (res) => {
      outcome.status = res.statusCode ?? 0;
      res.setEncoding('utf8');
      let buffer = '';
      if (outcome.status !== 200) {
        res.on('data', (piece: string) => {
          if (buffer.length < 300) buffer += piece;
        });
        res.on('end', () => settle(`HTTP ${outcome.status}: ${buffer.slice(0, 300)}`));
        res.on('error', (err) => settle(err.message));
        return;
      }
      res.on('data', (piece: string) => {
        buffer += piece;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) !== -1) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          onEvent(event, started);
        }
      });
      res.on('end', () => settle(outcome.doneMarker ? undefined : 'the stream ended without [DONE]'));
      res.on('error', (err) => settle(cancelled ?? err.message));
      res.on('close', () => settle(cancelled ?? (outcome.doneMarker ? undefined : 'the connection closed mid-stream')));
    });
    req.end(request.body);
  });

  function onEvent(event: string, started: number) {
    let data: string | null = null;
    for (const line of event.split('\n')) {
      if (line.startsWith('data:')) {
        const value = line.slice(line.charAt(5) === ' ' ? 6 : 5);
        data = data === null ? value : `${data}\n${value}`;
      }
    }
    if (data === null) return; // a comment (`: ping`) or an id-only event
    outcome.events++;
    if (data === '[DONE]') {
      outcome.doneMarker = true;
      return;
    }
    outcome.doneMarker = false;
    const kind = request.classify(data);
    if (kind === 'first' && outcome.firstMs === null) {
      outcome.firstMs = performance.now() - started;
      resolveFirst();
    } else if (kind === 'done') outcome.doneEvent = true;
    else if (kind === 'error') outcome.error ??= data.slice(0, 300);
  }

  return {
    first,
    result,
    cancel(reason) {
      cancelled ??= reason;
      req?.destroy(new Error(reason));
    },
  };
}

/** Switchboard's native chunks (API.md §6): the first `text` chunk, `done`, `error`. */
export function classifyPlatform(data: string): EventKind {
  try {
    const type = (JSON.parse(data) as { type?: unknown }).type;
    return type === 'text' ? 'first' : type === 'done' ? 'done' : type === 'error' ? 'error' : undefined;
  } catch {
    return 'error';
  }
}

/** OpenAI chat completion chunks: the first with non-empty `delta.content`. */
export function classifyModel(data: string): EventKind {
  try {
    const chunk = JSON.parse(data) as { choices?: { delta?: { content?: unknown } }[]; error?: unknown };
    if (chunk.error !== undefined) return 'error';
    const content = chunk.choices?.[0]?.delta?.content;
    return typeof content === 'string' && content !== '' ? 'first' : undefined;
  } catch {
    return 'error';
  }
}
