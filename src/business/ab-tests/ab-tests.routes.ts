import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { AppContext } from '../../context.js';
import { actorOf } from '../../http/auth-hooks.js';
import { idParams, pageOf, withErrors } from '../../http/openapi.js';
import { abTestResultsSchema, abTestSchema, createAbTestSchema, promoteAbTestSchema, listAbTestsQuerySchema } from './ab-tests.schemas.js';

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
        const test = await abTests.create(actorOf(request), request.body);
        return reply.code(201).header('location', `/business/ab-tests/${test.id}`).send(test);
      },
    );

    app.get(
      '/business/ab-tests',
      { schema: { tags, summary: 'List A/B tests, newest first', querystring: listAbTestsQuerySchema, response: withErrors({ 200: pageOf(abTestSchema) }) } },
      async (request) => {
        const { status, ...page } = request.query;
        return abTests.list(actorOf(request).workspaceId, page, status);
      },
    );

    app.get(
      '/business/ab-tests/:id',
      { schema: { tags, summary: 'Get an A/B test', params: idParams, response: withErrors({ 200: abTestSchema }, [404]) } },
      async (request) => abTests.get(actorOf(request).workspaceId, request.params.id),
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
      async (request) => abTests.start(actorOf(request), request.params.id),
    );

    app.put(
      '/business/ab-tests/:id/stop',
      { schema: { tags, summary: 'Stop a running test (completed)', params: idParams, response: withErrors({ 200: abTestSchema }, [404, 409]) } },
      async (request) => abTests.stop(actorOf(request), request.params.id),
    );

    app.post(
      '/business/ab-tests/:id/promote',
      {
        schema: {
          tags,
          summary: 'Promote a finished test’s winner',
          description:
            'The winning variant becomes current: a pinned version (`per_…@n`) is restored as its persona’s current version, channels routed through the test move to the winner’s persona, and new conversations through the test (its OpenAI model id too) go to the winner. `variant` defaults to the sequential winner; none → 409. Not completed, or already promoted → 409.',
          params: idParams,
          body: promoteAbTestSchema,
          response: withErrors({ 200: abTestSchema }, [404, 409]),
        },
      },
      async (request) => {
        return abTests.promote(actorOf(request), request.params.id, request.body.variant);
      },
    );

    app.get(
      '/business/ab-tests/:id/results',
      {
        schema: {
          tags,
          summary: "Results per variant: Welch's t-test and the always-valid sequential test on the ratings, and the guardrails",
          description:
            '`significance` is the fixed-horizon test: `pValue` is null until each variant has 2 ratings; `significant` is pValue < 0.05; `winner` is the variant with the higher average only when significant and each variant has at least 10 ratings. It is valid only when read once, at a horizon fixed in advance. `sequential` (mixture SPRT) may be read after every rating: its p-value and confidence sequence stay valid however often they are looked at. Reading the results of a running test whose B has broken a guardrail stops it.',
          params: idParams,
          response: withErrors({ 200: abTestResultsSchema }, [404]),
        },
      },
      async (request) => abTests.results(actorOf(request).workspaceId, request.params.id),
    );
  };
}
