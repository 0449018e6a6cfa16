import { z } from 'zod';
import { pageQuerySchema } from '../../lib/pagination.js';

export const createAbTestSchema = z.strictObject({
  name: z.string().trim().min(1).max(200),
  personaA: z.string().min(1).describe('Persona answering variant A.'),
  personaB: z.string().min(1).describe('Persona answering variant B; must differ from A.'),
  trafficSplit: z.number().min(0).max(1).default(0.5).describe('Share of traffic sent to persona A (default 0.5).'),
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
    createdAt: z.string(),
    startedAt: z.string().nullable(),
    endedAt: z.string().nullable(),
  })
  .meta({ id: 'AbTest' });

const variantSchema = z.object({
  personaId: z.string(),
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
  })
  .meta({ id: 'AbTestResults' });

export type CreateAbTestInput = z.infer<typeof createAbTestSchema>;
export type AbTest = z.infer<typeof abTestSchema>;
export type AbTestResults = z.infer<typeof abTestResultsSchema>;
export type Variant = 'A' | 'B';
