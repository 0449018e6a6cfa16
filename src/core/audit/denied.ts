import type { FastifyRequest } from 'fastify';
import type { Actor } from '../auth/actor.js';

/**
 * What a 403 of the API refused, for its `request.denied` event: the operation itself,
 * `{ type: 'route', id: '<METHOD> <route pattern>' }` (e.g. `DELETE /personas/:id`), the same for
 * every resource type so one filter (`targetType=route`) finds every refusal; the object's id is
 * left out (a refused caller may name any id, existing or not).
 */
export function deniedTarget(request: FastifyRequest): { type: string; id: string } {
  return { type: 'route', id: `${request.method} ${request.routeOptions.url ?? request.url.split('?')[0]}` };
}

/** The refused caller with where the request came from (set already on requests that change something). */
export function deniedActor(request: FastifyRequest): Actor {
  const actor = request.actor!;
  if (actor.origin) return actor;
  const ua = request.headers['user-agent'];
  return { ...actor, origin: { requestId: request.id, ip: request.ip, userAgent: typeof ua === 'string' ? ua.slice(0, 300) : null } };
}
