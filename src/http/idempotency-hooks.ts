import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hashRequestBody, type IdempotencyService } from '../core/idempotency/idempotency.service.js';
import { ValidationError } from '../errors.js';
import { onRoutesWhere } from './route-hooks.js';

const KEY = /^[\x21-\x7e]{1,255}$/;
const KEPT_HEADERS = ['content-type', 'location'];

/** `Idempotency-Key` on the routes marked `idempotent` (API.md §1). */
export function registerIdempotencyHooks(app: FastifyInstance, service: IdempotencyService) {
  app.decorateRequest('idempotency', null);

  const preHandler = async (request: FastifyRequest, reply: FastifyReply) => {
    const key = request.headers['idempotency-key'];
    if (key === undefined || !request.actor) return;
    if (typeof key !== 'string' || !KEY.test(key)) {
      throw ValidationError.field('Idempotency-Key', 'must be 1–255 visible ASCII characters');
    }
    const scope = {
      workspaceId: request.actor.workspaceId,
      method: request.method,
      path: request.url.split('?')[0] ?? request.url,
      key,
    };
    const stored = await service.begin(scope, hashRequestBody(request.body));
    if (stored) {
      return reply.code(stored.statusCode).headers(stored.headers).header('idempotent-replayed', 'true').send(stored.body);
    }
    request.idempotency = scope;
  };

  const onSend = async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const scope = request.idempotency;
    if (!scope) return payload;
    request.idempotency = null;
    if (reply.statusCode >= 500 || (typeof payload !== 'string' && !Buffer.isBuffer(payload))) {
      await service.release(scope);
      return payload;
    }
    const headers: Record<string, string> = {};
    for (const name of KEPT_HEADERS) {
      const value = reply.getHeader(name);
      if (value !== undefined) headers[name] = String(value);
    }
    await service.complete(scope, { statusCode: reply.statusCode, headers, body: payload.toString() });
    return payload;
  };

  const onRequestAbort = async (request: FastifyRequest) => {
    if (request.idempotency) await service.release(request.idempotency);
  };

  onRoutesWhere(app, (route) => route.config?.idempotent === true, { preHandler, onSend, onRequestAbort });
}
