import { z } from 'zod';
import { pageQuerySchema } from '../../lib/pagination.js';

export const guardrailsSchema = z
  .strictObject({
    maxErrorRate: z.number().min(0).max(1).optional().describe("B's share of failed answers may not exceed this."),
    maxP95LatencyMs: z.number().int().min(1).max(600_000).optional().describe("B's 95th-percentile answer time may not exceed this."),
    minSatisfaction: z.number().min(1).max(5).optional().describe("B's average rating may not fall below this."),
  })
  .describe('Limits variant B must keep; the test stops itself when B breaks one with sequential evidence (95 % confidence sequence beyond the limit).')
  .meta({ id: 'AbTestGuardrails' });

const personaRef = z
  .string()
  .min(1)
  .max(80)
  .describe('A persona id (`per_…`: its current version whenever it answers) or one version of it (`per_…@3`).');

export const createAbTestSchema = z.strictObject({
  name: z.string().trim().min(1).max(200),
  personaA: personaRef.describe('Persona (or `per_…@n`, one version of it) answering variant A.'),
  personaB: personaRef.describe('Persona (or `per_…@n`) answering variant B; must differ from A.'),
  trafficSplit: z.number().min(0).max(1).default(0.5).describe('Share of traffic sent to persona A (default 0.5).'),
  guardrails: guardrailsSchema.default({}),
});

export const promoteAbTestSchema = z.strictObject({
  variant: z.enum(['A', 'B']).optional().describe('The variant to promote; default the sequential winner (409 when there is none).'),
});

export const listAbTestsQuerySchema = pageQuerySchema
  .extend({ status: z.enum(['draft', 'running', 'completed']).optional() })
  .strict();

export const abTestSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    personaA: z.string(),
    personaB: z.string(),
    trafficSplit: z.number(),
    status: z.enum(['draft', 'running', 'completed']),
    guardrails: guardrailsSchema,
    stopReason: z.string().nullable().describe('Why it stopped: "manual", or the guardrail B broke and the evidence.'),
    promoted: z.enum(['A', 'B']).nullable().describe('The variant promoted when it finished: new conversations through the test go to it.'),
    promotedAt: z.string().nullable(),
    createdAt: z.string(),
    startedAt: z.string().nullable(),
    endedAt: z.string().nullable(),
  })
  .meta({ id: 'AbTest' });

const variantSchema = z.object({
  personaId: z.string().describe('The persona, or `per_…@n` when the variant pins a version.'),
  conversations: z.number().int().describe('Sessions the variant opened.'),
  messages: z.number().int().describe('Answers the variant gave (failed ones not counted).'),
  satisfaction: z.object({
    average: z.number().nullable(),
    count: z.number().int(),
    // Two items, but no tuple: the MCP SDK client validates results with Ajv's draft-07 dialect, where
    // 2020-12 `prefixItems` is unknown and the `items: false` beside it refuses every element.
    ci95: z.array(z.number().nullable()).length(2).describe('95 % confidence interval of the average (t distribution): [low, high]; nulls below two ratings.'),
  }),
  responseTime: z.object({ avgMs: z.number().nullable(), p50Ms: z.number().nullable() }),
});

export const abTestResultsSchema = z
  .object({
    testId: z.string(),
    status: z.enum(['draft', 'running', 'completed']),
    variants: z.object({ A: variantSchema, B: variantSchema }),
    significance: z.object({
      metric: z.literal('satisfaction'),
      pValue: z.number().nullable().describe("Welch's two-sided t-test on the ratings; null until each variant has 2."),
      significant: z.boolean().describe('pValue < 0.05.'),
      winner: z.enum(['A', 'B']).nullable().describe('The higher average, only when significant and each variant has at least 10 ratings.'),
    }),
    sequential: z
      .object({
        method: z.literal('msprt'),
        alpha: z.number(),
        tau: z.number().describe('Standard deviation of the normal mixture over the difference in average rating.'),
        difference: z.number().nullable().describe('Average rating of B minus A; null until each variant has 10 ratings.'),
        pValue: z.number().nullable().describe('Always-valid p-value: may be read after every rating without inflating false positives.'),
        interval: z.array(z.number()).length(2).nullable().describe('Confidence sequence (1 − alpha) for B − A, valid at every look at once.'),
        significant: z.boolean(),
        winner: z.enum(['A', 'B']).nullable(),
        series: z
          .array(z.object({ at: z.string(), ratings: z.number().int(), pValue: z.number().nullable(), interval: z.array(z.number()).length(2).nullable() }))
          .describe('The interval and p-value as they stood after each day (UTC) with ratings, oldest first.'),
      })
      .describe("The mixture sequential probability ratio test on the ratings (README: 'A/B tests that may be read at any time')."),
    guardrails: z.array(
      z.object({
        guardrail: z.enum(['maxErrorRate', 'maxP95LatencyMs', 'minSatisfaction']),
        limit: z.number(),
        observed: z.number().nullable().describe("B's figure so far: error rate, share of answers slower than the limit, or average rating."),
        interval: z.array(z.number()).length(2).nullable().describe('Confidence sequence of the observed figure, within the values it can take (a share 0–1, an average rating 1–5).'),
        breached: z.boolean(),
      }),
    ),
  })
  .meta({ id: 'AbTestResults' });

export type CreateAbTestInput = z.infer<typeof createAbTestSchema>;
export type Guardrails = z.infer<typeof guardrailsSchema>;
export type AbTest = z.infer<typeof abTestSchema>;
export type AbTestResults = z.infer<typeof abTestResultsSchema>;
export type Variant = 'A' | 'B';
