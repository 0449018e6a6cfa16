import type { FastifyReply, FastifyRequest } from 'fastify';
import { drained, takeOver } from './raw-response.js';

/**
 * Streams a file to the client as `chunks` come, taking the response over from Fastify (like
 * sse.ts) and keeping the headers the hooks set (request id, rate limit). Each write that the socket
 * cannot take at once waits for `drain`, so a slow reader slows the producer and memory stays flat;
 * a client that goes away stops the producer. A failure after the headers were sent cannot become a
 * problem+json any more: the connection is cut, so the client sees an incomplete transfer.
 */
export async function sendDownload(
  request: FastifyRequest,
  reply: FastifyReply,
  file: { contentType: string; filename: string },
  chunks: AsyncIterable<string>,
): Promise<void> {
  const res = takeOver(reply, {
    'content-type': file.contentType,
    'content-disposition': `attachment; filename="${file.filename}"`,
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
  });
  try {
    for await (const chunk of chunks) {
      if (res.destroyed) break;
      if (!res.write(chunk)) await drained(res);
    }
    if (!res.destroyed) res.end();
  } catch (err) {
    request.log.error({ err }, 'download failed after it started; connection cut');
    res.destroy();
  }
}
