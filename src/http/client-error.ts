import crypto from 'node:crypto';
import type { Socket } from 'node:net';
import { type AppError, HeadersTooLargeError, toProblem, UriTooLongError, ValidationError } from '../errors.js';

/** Longest request target accepted; longer ones get 414. Node's header limit (16 KiB) comes after. */
export const MAX_URL_LENGTH = 8192;

/**
 * Whether a header overflow (the request head passed Node's 16 KiB) is the request line's fault.
 * The parser hands over only the chunk it was reading (a request can arrive in several), and
 * `bytesParsed`: where in that chunk the span that crossed the limit ended. The URL's span ends
 * at the space before `HTTP/`; a header name's at `:`, a value's at CR/LF. A span cut by the
 * chunk's end is read from the chunk: after a line break it is a header; with none, the URL (sure
 * when the chunk starts the request; undecidable otherwise, and the URL comes first).
 */
function isRequestLineOverflow(raw: string, bytesParsed: unknown): boolean {
  const at = typeof bytesParsed === 'number' && bytesParsed >= 0 && bytesParsed <= raw.length ? bytesParsed : raw.length;
  const startsRequest = /^[A-Z]+ /.test(raw);
  const requestLineEnd = raw.indexOf('\r\n');
  const longRequestLineInView = startsRequest && (requestLineEnd === -1 || requestLineEnd > MAX_URL_LENGTH);
  if (raw.startsWith(' HTTP/', at) || raw.startsWith(' HTTP/', at - 1)) return true;
  if (at < raw.length || raw.lastIndexOf('\n', at - 1) !== -1) return longRequestLineInView;
  return true;
}

/**
 * Node's HTTP parser rejects some requests before Fastify sees them (header overflow, garbage).
 * They still get a problem+json answer, telling a too-long URL (414) from too-large headers (431).
 */
export function clientErrorHandler(
  err: Error & { code?: string; rawPacket?: unknown; bytesParsed?: unknown },
  socket: Socket,
) {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  let error: AppError;
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    const raw = Buffer.isBuffer(err.rawPacket) ? err.rawPacket.toString('latin1') : '';
    error = isRequestLineOverflow(raw, err.bytesParsed) ? new UriTooLongError(MAX_URL_LENGTH) : new HeadersTooLargeError();
  } else {
    error = new ValidationError('Malformed HTTP request.');
  }
  const requestId = crypto.randomUUID();
  const body = JSON.stringify(toProblem(error, requestId));
  socket.end(
    `HTTP/1.1 ${error.status} ${error.title}\r\n` +
      'Content-Type: application/problem+json\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      `x-request-id: ${requestId}\r\n` +
      'Connection: close\r\n\r\n' +
      body,
  );
}
