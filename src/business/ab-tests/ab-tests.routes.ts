import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { AppContext } from '../../context.js';
import { principalOf } from '../../http/auth-hooks.js';
import { idParams, pageOf, withErrors } from '../../http/openapi.js';
import { abTestResultsSchema, abTestSchema, createAbTestSchema, listAbTestsQuerySchema } from './ab-tests.schemas.js';

/** API.md §8: A/B tests. */
export function abTestRoutes(ctx: AppContext): FastifyPluginAsyncZod {
  const abTests = ctx.services.abTests;
  const tags = ['ab-tests'];
  return async (app) => {
    app.post(
      '/business/ab-tests',
      {
        config: { idempotent: true },
        schema: {
          tags,
          summary: 'Create an A/B test between two personas (a draft)',
          description: 'Both personas must exist in the workspace (404) and differ (400). `trafficSplit` is the share of traffic sent to persona A.',
          body: createAbTestSchema,
          response: withErrors({ 201: abTestSchema }, [404]),
        },
      },
      async (request, reply) => {
        const test = await abTests.create(principalOf(request).workspaceId, request.body);
        return reply.code(201).header('location', `/business/ab-tests/${test.id}`).send(test);
      },
    );

    app.get(
      '/business/ab-tests',
      { schema: { tags, summary: 'List A/B tests, newest first', querystring: listAbTestsQuerySchema, response: withErrors({ 200: pageOf(abTestSchema) }) } },
      async (request) => {
        const { status, ...page } = request.query;
        return abTests.list(principalOf(request).workspaceId, page, status);
      },
    );

    app.get(
      '/business/ab-tests/:id',
      { schema: { tags, summary: 'Get an A/B test', params: idParams, response: withErrors({ 200: abTestSchema }, [404]) } },
      async (request) => abTests.get(principalOf(request).workspaceId, request.params.id),
    );

    app.put(
      '/business/ab-tests/:id/start',
      {
        schema: {
          tags,
          summary: 'Start a draft test: from now on it routes questions sent with its id',
          params: idParams,
          response: withErrors({ 200: abTestSchema }, [404, 409]),
        },
      },
      async (request) => abTests.start(principalOf(request).workspaceId, request.params.id),
    );

    app.put(
      '/business/ab-tests/:id/stop',
      { schema: { tags, summary: 'Stop a running test (completed)', params: idParams, response: withErrors({ 200: abTestSchema }, [404, 409]) } },
      async (request) => abTests.stop(principalOf(request).workspaceId, request.params.id),
    );

    app.get(
      '/business/ab-tests/:id/results',
      {
        schema: {
          tags,
          summary: "Results per variant and Welch's t-test on the ratings",
          description:
            '`pValue` is null until each variant has 2 ratings; `significant` is pValue < 0.05; `winner` is the variant with the higher average only when significant and each variant has at least 10 ratings.',
          params: idParams,
          response: withErrors({ 200: abTestResultsSchema }, [404]),
        },
      },
      async (request) => abTests.results(principalOf(request).workspaceId, request.params.id),
    );
  };
}
