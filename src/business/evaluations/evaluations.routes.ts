import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.js';
import { actorOf } from '../../http/auth-hooks.js';
import { idParams, pageOf, withErrors } from '../../http/openapi.js';
import { pageQuerySchema } from '../../lib/pagination.js';
import { evalCaseSchema } from './cases.js';
import {
  caseFromSessionSchema,
  compareQuerySchema,
  comparisonSchema,
  createDatasetSchema,
  createRunSchema,
  datasetCaseSchema,
  datasetSchema,
  evalResultSchema,
  evalRunSchema,
  exportCasesQuerySchema,
  importCasesSchema,
  listDatasetsQuerySchema,
  listResultsQuerySchema,
  listRunsQuerySchema,
  updateDatasetSchema,
} from './evaluations.schemas.js';

const caseParams = z.strictObject({ id: z.string(), caseId: z.string() });

/** Datasets of evaluation cases and evaluation runs (issue 28; README "Evaluations"). */
export function evaluationRoutes(ctx: AppContext): FastifyPluginAsyncZod {
  const evaluations = ctx.services.evaluations;
  const tags = ['evaluations'];
  return async (app) => {
    app.post(
      '/datasets',
      {
        config: { idempotent: true },
        schema: { tags, summary: 'Create a dataset of evaluation cases', body: createDatasetSchema, response: withErrors({ 201: datasetSchema }) },
      },
      async (request, reply) => {
        const ds = await evaluations.createDataset(actorOf(request), request.body);
        return reply.code(201).header('location', `/datasets/${ds.id}`).send(ds);
      },
    );

    app.get(
      '/datasets',
      { schema: { tags, summary: 'List datasets, newest first', querystring: listDatasetsQuerySchema, response: withErrors({ 200: pageOf(datasetSchema) }) } },
      async (request) => {
        const { q, ...page } = request.query;
        return evaluations.listDatasets(actorOf(request).workspaceId, page, q);
      },
    );

    app.get(
      '/datasets/:id',
      { schema: { tags, summary: 'Get a dataset', params: idParams, response: withErrors({ 200: datasetSchema }, [404]) } },
      async (request) => evaluations.getDataset(actorOf(request).workspaceId, request.params.id),
    );

    app.put(
      '/datasets/:id',
      { schema: { tags, summary: 'Rename or describe a dataset', params: idParams, body: updateDatasetSchema, response: withErrors({ 200: datasetSchema }, [404]) } },
      async (request) => evaluations.updateDataset(actorOf(request), request.params.id, request.body),
    );

    app.delete(
      '/datasets/:id',
      {
        schema: {
          tags,
          summary: 'Delete a dataset with its cases and runs',
          description: '409 while a run over it is queued or running (cancel it first).',
          params: idParams,
          response: withErrors({ 204: z.undefined().describe('Deleted') }, [404, 409]),
        },
      },
      async (request, reply) => {
        await evaluations.deleteDataset(actorOf(request), request.params.id);
        return reply.code(204).send();
      },
    );

    app.get(
      '/datasets/:id/cases',
      {
        schema: { tags, summary: 'List a dataset’s cases in order', params: idParams, querystring: pageQuerySchema.strict(), response: withErrors({ 200: pageOf(datasetCaseSchema) }, [404]) },
      },
      async (request) => evaluations.listCases(actorOf(request).workspaceId, request.params.id, request.query),
    );

    app.post(
      '/datasets/:id/cases',
      {
        config: { idempotent: true },
        schema: {
          tags,
          summary: 'Add a case',
          description: 'The input (`input`, or `messages` ending with the user’s turn) and what makes an answer good: `expected`, `mustContain`, `mustNotContain`, `regex`, `expectedSources`, `jsonSchema`, `rubric`.',
          params: idParams,
          body: evalCaseSchema,
          response: withErrors({ 201: datasetCaseSchema }, [404, 409]),
        },
      },
      async (request, reply) => {
        const c = await evaluations.addCase(actorOf(request), request.params.id, request.body);
        return reply.code(201).header('location', `/datasets/${c.datasetId}/cases/${c.id}`).send(c);
      },
    );

    app.delete(
      '/datasets/:id/cases/:caseId',
      { schema: { tags, summary: 'Delete a case', params: caseParams, response: withErrors({ 204: z.undefined().describe('Deleted') }, [404]) } },
      async (request, reply) => {
        await evaluations.deleteCase(actorOf(request), request.params.id, request.params.caseId);
        return reply.code(204).send();
      },
    );

    app.post(
      '/datasets/:id/cases/from-session',
      {
        config: { idempotent: true },
        schema: {
          tags,
          summary: 'Turn a session’s answer into a regression case',
          description:
            'The turns up to the answer’s question become the case’s input; its rubric names the rating the answer got (override with `rubric`), tagged `from-session` and `rating-<n>`.',
          params: idParams,
          body: caseFromSessionSchema,
          response: withErrors({ 201: datasetCaseSchema }, [404, 409]),
        },
      },
      async (request, reply) => {
        const c = await evaluations.caseFromSession(actorOf(request), request.params.id, request.body);
        return reply.code(201).header('location', `/datasets/${c.datasetId}/cases/${c.id}`).send(c);
      },
    );

    app.post(
      '/datasets/:id/import',
      {
        // It adds cases: a retry with the same Idempotency-Key adds nothing twice.
        config: { idempotent: true },
        schema: {
          tags,
          summary: 'Append the cases of a JSONL or CSV file',
          description:
            'All or nothing: a case that does not pass is a 400 naming its line (row) and field, and nothing is added. The request body holds up to 1 MiB: import a larger file in parts (each call appends).',
          params: idParams,
          body: importCasesSchema,
          response: withErrors({ 200: z.object({ imported: z.number().int(), dataset: datasetSchema }) }, [404, 409]),
        },
      },
      async (request) => evaluations.importCases(actorOf(request), request.params.id, request.body.format, request.body.content),
    );

    app.get(
      '/datasets/:id/export',
      {
        schema: {
          tags,
          summary: 'Download the cases as JSONL or CSV',
          params: idParams,
          querystring: exportCasesQuerySchema,
          response: withErrors(
            { 200: { description: 'The file, as an attachment.', content: { 'application/x-ndjson': { schema: z.string() }, 'text/csv': { schema: z.string() } } } },
            [404],
          ),
        },
      },
      async (request, reply) => {
        const { body, filename } = await evaluations.exportCases(actorOf(request).workspaceId, request.params.id, request.query.format);
        return reply
          .header('content-type', request.query.format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8')
          .header('content-disposition', `attachment; filename="${filename}"`)
          .send(body);
      },
    );

    app.post(
      '/evaluations/runs',
      {
        config: { idempotent: true },
        schema: {
          tags,
          summary: 'Run a dataset against a persona version',
          description:
            'Starts in the background (201, `queued`): each case is answered by the persona version (`per_…@n`, or its current one) without tools and scored; poll the run for progress. Survives a restart; cancellable.',
          body: createRunSchema,
          response: withErrors({ 201: evalRunSchema }, [404]),
        },
      },
      async (request, reply) => {
        const run = await evaluations.createRun(actorOf(request), request.body);
        return reply.code(201).header('location', `/evaluations/runs/${run.id}`).send(run);
      },
    );

    app.get(
      '/evaluations/runs',
      { schema: { tags, summary: 'List evaluation runs, newest first', querystring: listRunsQuerySchema, response: withErrors({ 200: pageOf(evalRunSchema) }, [404]) } },
      async (request) => {
        const { datasetId, personaId, status, ...page } = request.query;
        return evaluations.listRuns(actorOf(request).workspaceId, page, { datasetId, personaId, status });
      },
    );

    app.get(
      '/evaluations/runs/:id',
      { schema: { tags, summary: 'Get a run: status, progress and, once finished, its summary', params: idParams, response: withErrors({ 200: evalRunSchema }, [404]) } },
      async (request) => evaluations.getRun(actorOf(request).workspaceId, request.params.id),
    );

    app.post(
      '/evaluations/runs/:id/cancel',
      {
        schema: {
          tags,
          summary: 'Cancel a queued or running run',
          description: 'It stops starting cases (within a second on another instance) and keeps, summarized, what it answered; the answer carries that summary. Finished → 409.',
          params: idParams,
          response: withErrors({ 200: evalRunSchema }, [404, 409]),
        },
      },
      async (request) => evaluations.cancelRun(actorOf(request), request.params.id),
    );

    app.get(
      '/evaluations/runs/:id/results',
      {
        schema: {
          tags,
          summary: 'A run’s per-case results in dataset order: answer, sources and every score',
          params: idParams,
          querystring: listResultsQuerySchema,
          response: withErrors({ 200: pageOf(evalResultSchema) }, [404]),
        },
      },
      async (request) => {
        const { passed, ...page } = request.query;
        return evaluations.results(actorOf(request).workspaceId, request.params.id, page, passed === undefined ? undefined : passed === 'true');
      },
    );

    app.get(
      '/evaluations/compare',
      {
        schema: {
          tags,
          summary: 'Compare two runs over one dataset case by case',
          description:
            'Pairs each case’s mean score in run A (the baseline) and run B: the mean difference B − A with a 95 % paired-bootstrap interval, an exact sign test, and a winner only when both agree (the interval excludes 0 and p < 0.05).',
          querystring: compareQuerySchema,
          response: withErrors({ 200: comparisonSchema }, [404]),
        },
      },
      async (request) => evaluations.compare(actorOf(request).workspaceId, request.query.a, request.query.b),
    );
  };
}
