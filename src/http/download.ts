import type { FastifyReply, FastifyRequest } from 'fastify';

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
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    ...(reply.getHeaders() as Record<string, string>),
    'content-type': file.contentType,
    'content-disposition': `attachment; filename="${file.filename}"`,
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
  });
  const drained = () =>
    new Promise<void>((resolve) => {
      const done = () => {
        res.off('drain', done);
        res.off('close', done);
        resolve();
      };
      res.on('drain', done);
      res.on('close', done);
    });
  try {
    for await (const chunk of chunks) {
      if (res.destroyed) break;
      if (!res.write(chunk)) await drained();
    }
    if (!res.destroyed) res.end();
  } catch (err) {
    request.log.error({ err }, 'download failed after it started; connection cut');
    res.destroy();
  }
}
