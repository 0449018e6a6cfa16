import { z } from 'zod';
import { pageQuerySchema } from '../../lib/pagination.js';

/** `<toolName>.<action>` or `<toolName>.*`. */
const toolRef = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}\.(\*|[A-Za-z0-9_-]{1,128})$/, 'must be "<toolName>.<action>" or "<toolName>.*"');

/** When a conversation goes to the persona's team (issue 29); `/human` from the user always does. */
export const handoffPolicySchema = z
  .strictObject({
    tool: z.boolean().default(false).describe('Offer the persona the built-in `handoff` tool: it hands the conversation over when it should not answer (or the user asks for a person).'),
    keywords: z.array(z.string().trim().min(1).max(100)).max(20).default([]).describe('A user message containing one of these (case ignored) goes to a person.'),
    lowRating: z.boolean().default(false).describe('A rating of 1 or 2 on an answer hands the conversation to a person.'),
    noKnowledge: z
      .number()
      .int()
      .min(1)
      .max(20)
      .nullable()
      .default(null)
      .describe('When the knowledge had nothing for this many answers in a row in a conversation, it goes to a person after the last of them; null: never.'),
  })
  .meta({ id: 'HandoffPolicy' });

const personaFields = {
  name: z.string().trim().min(1).max(200),
  instructions: z.string().min(1).max(32_000),
  traits: z.array(z.string().trim().min(1).max(200)).max(50),
  model: z.string().trim().min(1).max(200).nullable(),
  temperature: z.number().min(0).max(2).nullable(),
  maxTokens: z.number().int().min(1).max(32_000).nullable(),
  tools: z.array(toolRef).max(200),
};

export const createPersonaSchema = z.strictObject({
  name: personaFields.name,
  instructions: personaFields.instructions,
  traits: personaFields.traits.default([]),
  model: personaFields.model.optional(),
  temperature: personaFields.temperature.optional(),
  maxTokens: personaFields.maxTokens.optional(),
  tools: personaFields.tools.default([]),
  teamId: z.string().min(1).nullable().optional().describe('The team whose members take over its conversations (not versioned).'),
  handoff: handoffPolicySchema.optional(),
});

/** Any subset of the create fields; `null` resets model, temperature or maxTokens to the server default. */
export const updatePersonaSchema = z.strictObject({
  name: personaFields.name.optional(),
  instructions: personaFields.instructions.optional(),
  traits: personaFields.traits.optional(),
  model: personaFields.model.optional(),
  temperature: personaFields.temperature.optional(),
  maxTokens: personaFields.maxTokens.optional(),
  tools: personaFields.tools.optional(),
  teamId: z.string().min(1).nullable().optional().describe('The team whose members take over its conversations; null: none (not versioned).'),
  handoff: handoffPolicySchema.optional(),
});

export const listPersonasQuerySchema = pageQuerySchema
  .extend({ q: z.string().max(200).optional().describe('Case-insensitive match on the name.') })
  .strict();

export const personaSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    instructions: z.string(),
    traits: z.array(z.string()),
    model: z.string().nullable(),
    temperature: z.number().nullable(),
    maxTokens: z.number().int().nullable(),
    tools: z.array(z.string()),
    version: z.number().int().describe('The current version (GET /personas/{id}/versions).'),
    teamId: z.string().nullable(),
    handoff: handoffPolicySchema,
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'Persona' });

export const personaVersionSchema = z
  .object({
    version: z.number().int(),
    name: z.string(),
    instructions: z.string(),
    traits: z.array(z.string()),
    model: z.string().nullable(),
    temperature: z.number().nullable(),
    maxTokens: z.number().int().nullable(),
    tools: z.array(z.string()),
    createdAt: z.string(),
    createdBy: z.string().nullable().describe('The API key (`key_…`) that made the change; null for versions older than version history.'),
  })
  .meta({ id: 'PersonaVersion' });

/** `:n` of a version path: a whole number from 1 (anything else is a version the persona never had: 404). */
export const versionParams = z.strictObject({ id: z.string(), n: z.string() });

export type CreatePersonaInput = z.infer<typeof createPersonaSchema>;
export type UpdatePersonaInput = z.infer<typeof updatePersonaSchema>;
export type Persona = z.infer<typeof personaSchema>;
export type PersonaVersion = z.infer<typeof personaVersionSchema>;
export type HandoffPolicy = z.infer<typeof handoffPolicySchema>;
