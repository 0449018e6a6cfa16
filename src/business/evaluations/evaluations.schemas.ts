import { z } from 'zod';
import { evalCaseSchema } from './cases.js';
import { pageQuerySchema } from '../../lib/pagination.js';

/** Cases a dataset holds at most: a run answers each, so this bounds a run's work too. */
export const MAX_DATASET_CASES = 10_000;

export const datasetSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    caseCount: z.number().int(),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'Dataset' });

export const createDatasetSchema = z.strictObject({
  name: z.string().trim().min(1).max(200),
  description: z.string().max(2000).optional(),
  cases: z.array(evalCaseSchema).max(1000).default([]).describe('Cases to start with (at most 1 000 here; import more as JSONL or CSV).'),
});

export const listDatasetsQuerySchema = pageQuerySchema
  .extend({ q: z.string().max(200).optional().describe('Case-insensitive match on the name.') })
  .strict();

export const updateDatasetSchema = z.strictObject({
  name: z.string().trim().min(1).max(200).optional(),
  description: z.string().max(2000).nullable().optional(),
});

export const datasetCaseSchema = z
  .object({
    id: z.string(),
    datasetId: z.string(),
    position: z.number().int().describe('Its place in the dataset, from 1.'),
    case: evalCaseSchema,
    sessionId: z.string().nullable().describe('The session it was made from, if any.'),
    createdAt: z.string(),
  })
  .meta({ id: 'DatasetCase' });

export const importCasesSchema = z.strictObject({
  format: z.enum(['jsonl', 'csv']),
  content: z.string().min(1).max(900_000).describe('The file’s text: one case a line (JSONL), or a header row and one case a row (CSV; README).'),
});

export const exportCasesQuerySchema = z.strictObject({ format: z.enum(['jsonl', 'csv']).default('jsonl') });

export const caseFromSessionSchema = z.strictObject({
  sessionId: z.string().min(1),
  messageId: z.string().min(1).optional().describe('The answer to make a case of; default the session’s latest answer.'),
  expected: z.string().max(32_000).optional(),
  mustContain: z.array(z.string().min(1).max(1000)).max(50).optional(),
  mustNotContain: z.array(z.string().min(1).max(1000)).max(50).optional(),
  rubric: z.string().max(4000).optional().describe('Default: a rubric that names the rating the answer was given.'),
});

const runStatus = z.enum(['queued', 'running', 'completed', 'cancelled', 'failed']);

const scorerSummary = z.object({
  scorer: z.string(),
  cases: z.number().int().describe('Cases the scorer applied to and could run on.'),
  mean: z.number().nullable().describe('Mean value: a 0–1 score, or milliseconds / tokens for the measurements.'),
  passed: z.number().int().nullable().describe('Cases it passed; null for measurements and ranks.'),
});

export const runSummarySchema = z
  .object({
    cases: z.number().int(),
    passed: z.number().int().describe('Cases whose every check passed.'),
    failed: z.number().int(),
    errors: z.number().int().describe('Cases with no answer (the model call failed).'),
    passRate: z.number().nullable(),
    meanScore: z.number().nullable().describe('Mean over cases of each case’s mean 0–1 score: what runs are compared on.'),
    latencyMs: z.object({ p50: z.number().nullable(), p95: z.number().nullable() }),
    tokens: z.object({ prompt: z.number().int(), completion: z.number().int() }),
    scorers: z.array(scorerSummary),
    judge: z.enum(['used', 'skipped', 'off']).describe('`skipped`: cases have rubrics but the configured model is the offline one, which cannot grade.'),
  })
  .meta({ id: 'EvalRunSummary' });

export const evalRunSchema = z
  .object({
    id: z.string(),
    datasetId: z.string(),
    personaId: z.string(),
    personaVersion: z.number().int(),
    status: runStatus,
    progress: z.object({ done: z.number().int(), total: z.number().int() }),
    concurrency: z.number().int(),
    judge: z.boolean(),
    summary: runSummarySchema.nullable().describe('Once finished (completed or cancelled: over the cases answered).'),
    error: z.string().nullable(),
    createdBy: z.string().nullable(),
    createdAt: z.string(),
    startedAt: z.string().nullable(),
    finishedAt: z.string().nullable(),
  })
  .meta({ id: 'EvalRun' });

export const createRunSchema = z.strictObject({
  datasetId: z.string().min(1),
  personaId: z.string().min(1).max(80).describe('`per_…` (its current version) or `per_…@n` (version n).'),
  concurrency: z.number().int().min(1).max(16).default(4).describe('Cases answered at once.'),
  judge: z.boolean().default(true).describe('Grade cases that have a rubric with the configured model (skipped with the offline model).'),
});

export const listRunsQuerySchema = pageQuerySchema
  .extend({
    datasetId: z.string().optional(),
    personaId: z.string().optional(),
    status: runStatus.optional(),
  })
  .strict();

const scoreSchema = z.object({
  scorer: z.string(),
  value: z.number().nullable(),
  passed: z.boolean().nullable(),
  detail: z.string().optional(),
});

export const evalResultSchema = z
  .object({
    caseId: z.string(),
    position: z.number().int(),
    input: z.string().nullable().describe('The question the case asked (its last user turn), cut at 500 characters; null once the case is deleted.'),
    passed: z.boolean().nullable(),
    score: z.number().nullable(),
    answer: z.string(),
    sources: z.array(z.object({ sourceId: z.string(), sourceName: z.string() })),
    scores: z.array(scoreSchema),
    latencyMs: z.number().int(),
    tokens: z.object({ prompt: z.number().int(), completion: z.number().int() }),
    error: z.string().nullable(),
  })
  .meta({ id: 'EvalResult' });

export const listResultsQuerySchema = z.strictObject({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  cursor: z.string().max(512).optional(),
  passed: z.enum(['true', 'false']).optional().describe('Only passing (true) or failing (false) cases.'),
});

export const compareQuerySchema = z.strictObject({
  a: z.string().min(1).describe('The baseline run.'),
  b: z.string().min(1).describe('The run compared with it (same dataset).'),
});

export const comparisonSchema = z
  .object({
    a: z.object({ runId: z.string(), personaId: z.string(), personaVersion: z.number().int(), meanScore: z.number().nullable(), passRate: z.number().nullable() }),
    b: z.object({ runId: z.string(), personaId: z.string(), personaVersion: z.number().int(), meanScore: z.number().nullable(), passRate: z.number().nullable() }),
    pairs: z.number().int().describe('Cases both runs scored.'),
    meanDifference: z.number().nullable().describe('Mean over cases of B’s score minus A’s.'),
    bootstrap: z.object({ interval: z.array(z.number()).length(2).nullable(), resamples: z.number().int(), seed: z.number().int() }),
    signTest: z.object({ wins: z.number().int(), losses: z.number().int(), ties: z.number().int(), pValue: z.number().nullable() }),
    winner: z.enum(['A', 'B']).nullable(),
    verdict: z.string().describe('The comparison in one sentence.'),
    changed: z
      .array(z.object({ caseId: z.string(), position: z.number().int(), a: z.number().nullable(), b: z.number().nullable(), input: z.string() }))
      .describe('Cases whose score changed, largest change first (at most 50).'),
  })
  .meta({ id: 'EvalComparison' });

export type Dataset = z.infer<typeof datasetSchema>;
export type DatasetCase = z.infer<typeof datasetCaseSchema>;
export type EvalRun = z.infer<typeof evalRunSchema>;
export type EvalResult = z.infer<typeof evalResultSchema>;
export type RunSummary = z.infer<typeof runSummarySchema>;
export type Comparison = z.infer<typeof comparisonSchema>;
export type CreateDatasetInput = z.infer<typeof createDatasetSchema>;
export type CreateRunInput = z.infer<typeof createRunSchema>;
export type CaseFromSessionInput = z.infer<typeof caseFromSessionSchema>;
