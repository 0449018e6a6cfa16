import crypto from 'node:crypto';
import type { Socket } from 'node:net';
import { type AppError, HeadersTooLargeError, toProblem, UriTooLongError, ValidationError } from '../errors.js';

/** Longest request target accepted; longer ones get 414. Node's header limit (16 KiB) comes after. */
export const MAX_URL_LENGTH = 8192;

/**
 * Node's HTTP parser rejects some requests before Fastify sees them (header overflow, garbage).
 * They still get a problem+json answer, telling a too-long URL (414) from too-large headers (431).
 */
export function clientErrorHandler(err: Error & { code?: string; rawPacket?: unknown }, socket: Socket) {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  let error: AppError;
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    const raw = Buffer.isBuffer(err.rawPacket) ? err.rawPacket.toString('latin1') : '';
    const lineEnd = raw.indexOf('\r\n');
    const requestLine = lineEnd === -1 ? raw : raw.slice(0, lineEnd);
    error = lineEnd === -1 || requestLine.length > MAX_URL_LENGTH ? new UriTooLongError(MAX_URL_LENGTH) : new HeadersTooLargeError();
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
