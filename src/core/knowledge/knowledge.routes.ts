import multipart from '@fastify/multipart';
import type { FastifyRequest, FastifySchemaCompiler } from 'fastify';
import { type FastifyPluginAsyncZod, validatorCompiler } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.js';
import { actorOf } from '../../http/auth-hooks.js';
import { idParams, pageOf, withErrors } from '../../http/openapi.js';
import type { CreateSourceInput, UpdateSourceInput } from './knowledge.service.js';
import {
  chunkSchema,
  chunksQuerySchema,
  createSourceJsonSchema,
  knowledgeSourceSchema,
  listSourcesQuerySchema,
  multipartSourceSchema,
  searchQuerySchema,
  searchResultSchema,
  updateSourceJsonSchema,
} from './knowledge.schemas.js';
import { FROM_MULTIPART, readKnowledgeUpload } from './multipart.js';

/**
 * The documented body is JSON or multipart; JSON bodies are validated against `json` alone (so its
 * errors name fields), and a body already built and checked from multipart parts passes as is.
 */
// `any`: the route's schema type is the documented union; this compiler validates another schema.
function bodyValidator(json: z.ZodType): FastifySchemaCompiler<any> {
  return (route) => {
    if (route.httpPart !== 'body') return validatorCompiler(route);
    const validate = validatorCompiler({ ...route, schema: json });
    return (data: unknown) => (data !== null && typeof data === 'object' && FROM_MULTIPART in data ? { value: data } : validate(data));
  };
}

/** API.md §4. */
export function knowledgeRoutes(ctx: AppContext): FastifyPluginAsyncZod {
  const knowledge = ctx.services.knowledge;
  const limit = ctx.config.uploadLimitBytes;
  const tags = ['knowledge'];
  const bodyOptions = {
    bodyLimit: limit,
    // Multipart is read before validation, so Idempotency-Key compares the upload too.
    preValidation: async (request: FastifyRequest) => {
      if (request.isMultipart()) request.body = await readKnowledgeUpload(request, limit);
    },
  };
  const uploadDoc =
    'JSON (`text`, `markdown`, `html` with `content`; `url` with `url`) or `multipart/form-data` with a `file` part ' +
    `(pdf, docx, md, txt, html, csv, json; at most ${Math.round(limit / 1048576)} MiB) and optional \`name\`, \`personaId\`, \`metadata\` (JSON text) parts.`;

  return async (app) => {
    // Multipart only here: everywhere else a non-JSON body is still 415.
    await app.register(multipart, { limits: { fileSize: limit } });

    app.post(
      '/knowledge',
      {
        ...bodyOptions,
        validatorCompiler: bodyValidator(createSourceJsonSchema),
        config: { idempotent: true },
        schema: {
          tags,
          summary: 'Add a knowledge source',
          description: `${uploadDoc} Answers 202: \`ready\` at once when the document is small, else \`processing\` (poll GET /knowledge/:id).`,
          consumes: ['application/json', 'multipart/form-data'],
          body: z.union([createSourceJsonSchema, multipartSourceSchema]),
          response: withErrors({ 202: knowledgeSourceSchema }, [404, 409, 413, 415]),
        },
      },
      async (request, reply) => {
        const source = await knowledge.create(actorOf(request), request.body as CreateSourceInput);
        return reply.code(202).header('location', `/knowledge/${source.id}`).send(source);
      },
    );

    app.get(
      '/knowledge',
      {
        schema: {
          tags,
          summary: 'List knowledge sources, newest first',
          querystring: listSourcesQuerySchema,
          response: withErrors({ 200: pageOf(knowledgeSourceSchema) }),
        },
      },
      async (request) => {
        const { personaId, status, ...page } = request.query;
        return knowledge.list(actorOf(request).workspaceId, page, { personaId, status });
      },
    );

    app.get(
      '/knowledge/search',
      {
        schema: {
          tags,
          summary: 'Search knowledge (hybrid, vector or keyword)',
          description:
            'Without `personaId` every source of the workspace is searched; with it, the shared sources and that persona’s. `score` is higher-is-better: BM25 in keyword mode, cosine similarity in vector mode, reciprocal-rank fusion in hybrid mode.',
          querystring: searchQuerySchema,
          response: withErrors({ 200: searchResultSchema }, [404]),
        },
      },
      async (request) => knowledge.search(actorOf(request).workspaceId, request.query),
    );

    app.get(
      '/knowledge/:id',
      { schema: { tags, summary: 'Get a knowledge source', params: idParams, response: withErrors({ 200: knowledgeSourceSchema }, [404]) } },
      async (request) => knowledge.get(actorOf(request).workspaceId, request.params.id),
    );

    app.put(
      '/knowledge/:id',
      {
        ...bodyOptions,
        validatorCompiler: bodyValidator(updateSourceJsonSchema),
        schema: {
          tags,
          summary: 'Replace a source’s content or settings; it is processed again',
          description: `New content as for POST (${uploadDoc}), or only \`name\`/\`personaId\`/\`metadata\`. An empty body re-processes the stored content; a \`url\` source is fetched again.`,
          consumes: ['application/json', 'multipart/form-data'],
          params: idParams,
          body: z.union([updateSourceJsonSchema, multipartSourceSchema]),
          response: withErrors({ 202: knowledgeSourceSchema }, [404, 413, 415]),
        },
      },
      async (request, reply) => {
        const source = await knowledge.update(actorOf(request), request.params.id, request.body as UpdateSourceInput);
        return reply.code(202).send(source);
      },
    );

    app.get(
      '/knowledge/:id/chunks',
      {
        schema: {
          tags,
          summary: 'A source’s chunks in document order',
          params: idParams,
          querystring: chunksQuerySchema,
          response: withErrors({ 200: pageOf(chunkSchema) }, [404]),
        },
      },
      async (request) => knowledge.chunks(actorOf(request).workspaceId, request.params.id, request.query),
    );

    app.delete(
      '/knowledge/:id',
      {
        schema: {
          tags,
          summary: 'Delete a knowledge source and its chunks',
          params: idParams,
          response: withErrors({ 204: z.undefined().describe('Deleted') }, [404]),
        },
      },
      async (request, reply) => {
        await knowledge.delete(actorOf(request), request.params.id);
        return reply.code(204).send();
      },
    );
  };
}
