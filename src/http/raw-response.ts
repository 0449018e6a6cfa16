import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';

/**
 * Takes the response over from Fastify for a body written by hand (event streams, downloads),
 * keeping the headers the hooks set (request id, rate limit, CORS).
 */
export function takeOver(reply: FastifyReply, headers: Record<string, string>): ServerResponse {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, { ...(reply.getHeaders() as Record<string, string>), ...headers });
  return res;
}

/** Resolves when the socket can take more (`drain`), or is gone (`close`): writers wait here, so a slow reader slows them down. */
export function drained(res: ServerResponse): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}
