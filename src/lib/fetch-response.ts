import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';

/** Statuses whose Response must have a null body. */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

/**
 * A `node:http` response as the `Response` a `fetch` answers with: the body streams on (an abort or
 * a destroyed socket ends it), and a status or method that carries no body gets a null one.
 */
export function toFetchResponse(res: IncomingMessage, method = 'GET'): Response {
  const status = res.statusCode ?? 502;
  const nullBody = NULL_BODY.has(status) || method === 'HEAD';
  if (nullBody) res.resume();
  return new Response(nullBody ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), { status, statusText: res.statusMessage ?? '', headers: headersOf(res) });
}

/** A `node:http` response's headers as fetch `Headers`, repeated ones kept. */
export function headersOf(res: IncomingMessage): Headers {
  const headers = new Headers();
  const raw = res.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) headers.append(raw[i]!, raw[i + 1]!);
  return headers;
}
