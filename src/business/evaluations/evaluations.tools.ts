/** MCP tools of datasets and evaluation runs (issue 28), through the same service as the HTTP routes. */
import { z } from 'zod';
import { idInput, pageInput, pageOutput } from '../../mcp/common-schemas.js';
import { defineTool, type McpFeature, READ_ONLY } from '../../mcp/tool-definition.js';
import { comparisonSchema, createRunSchema, datasetSchema, evalRunSchema } from './evaluations.schemas.js';

/** How often a run started as a task is looked at until it finishes. */
const RUN_POLL_MS = 250;
const FINISHED = new Set(['completed', 'cancelled', 'failed']);

export const evaluationFeature: McpFeature = {
  tools: [
    defineTool({
      name: 'list_datasets',
      title: 'List evaluation datasets',
      description: 'Lists the datasets of evaluation cases of this workspace, newest first, with their case counts. Pass `nextCursor` back as `cursor` for more.',
      input: z.strictObject({ ...pageInput }),
      output: pageOutput(datasetSchema),
      annotations: READ_ONLY,
      scope: 'read',
      run: ({ ctx, caller }, page) => ctx.services.evaluations.listDatasets(caller.workspaceId, page),
    }),
    defineTool({
      name: 'run_evaluation',
      title: 'Run an evaluation',
      description:
        'Runs a dataset against a persona version (`per_…` for its current version, `per_…@3` for version 3): every case is answered without tools and scored ' +
        '(expected text, phrases, regex, retrieval hit@k and MRR, JSON schema, latency, tokens, and the model as judge for cases with a rubric). ' +
        'Returns the run at once (`queued`); poll get_evaluation_run for progress and the summary. Run as a task, it returns the finished run.',
      input: createRunSchema,
      output: evalRunSchema,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false },
      scope: 'write',
      task: true,
      run: async ({ ctx, caller, signal, asTask }, input) => {
        let run = await ctx.services.evaluations.createRun(caller, input);
        while (asTask && !FINISHED.has(run.status)) {
          await new Promise((resolve) => setTimeout(resolve, RUN_POLL_MS));
          signal.throwIfAborted();
          run = await ctx.services.evaluations.getRun(caller.workspaceId, run.id);
        }
        return run;
      },
    }),
    defineTool({
      name: 'get_evaluation_run',
      title: 'Get an evaluation run',
      description: 'Returns an evaluation run: its status, progress (cases done of total) and, once finished, its summary (pass rate, mean score, each scorer, latency, tokens).',
      input: idInput('evaluation run'),
      output: evalRunSchema,
      annotations: READ_ONLY,
      scope: 'read',
      run: ({ ctx, caller }, { id }) => ctx.services.evaluations.getRun(caller.workspaceId, id),
    }),
    defineTool({
      name: 'compare_runs',
      title: 'Compare two evaluation runs',
      description:
        'Compares two runs over the same dataset case by case (run `a` the baseline, `b` the change): the mean score difference B − A with a 95 % paired-bootstrap interval, ' +
        'an exact sign test, the winner when both agree, a one-sentence verdict, and the cases whose score changed most.',
      input: z.strictObject({ a: z.string().min(1).max(64).describe('The baseline run (evr_…).'), b: z.string().min(1).max(64).describe('The run compared with it.') }),
      output: comparisonSchema,
      annotations: READ_ONLY,
      scope: 'read',
      run: ({ ctx, caller }, { a, b }) => ctx.services.evaluations.compare(caller.workspaceId, a, b),
    }),
  ],
};
