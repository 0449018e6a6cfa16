import { z } from 'zod';
import { pathTooDeep, TOO_DEEP } from '../../lib/json-depth.js';
import { NUL_MESSAGE, pathToNul } from '../../lib/nul.js';
import { pageQuerySchema } from '../../lib/pagination.js';

const name = z.string().trim().min(1).max(200);
const personaId = z.string().min(1).nullable().describe('Persona that alone retrieves this source; null or absent: shared by every persona.');
const metadata = z
  .record(z.string().min(1).max(100), z.unknown())
  .refine((m) => Object.keys(m).length <= 50, 'at most 50 keys')
  .refine((m) => JSON.stringify(m).length <= 16_384, 'at most 16 KiB as JSON')
  .describe('Free-form JSON object returned with search results and matched by `filter`.');

/**
 * JSON object sent as text (a query parameter, a multipart part), parsed and then checked by
 * `schema`; held to the JSON body's depth limit before `schema` (whose size check stringifies) sees it,
 * and to its refusal of the NUL character.
 */
function jsonObjectText<T extends z.ZodType>(schema: T, maxLength = 16_384) {
  return z
    .string()
    .max(maxLength)
    .transform((text, ctx) => {
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        ctx.addIssue({ code: 'custom', message: 'must be a JSON object, e.g. {"team":"support"}' });
        return z.NEVER;
      }
      const tooDeep = pathTooDeep(value);
      if (tooDeep) {
        ctx.addIssue({ code: 'custom', path: tooDeep, message: TOO_DEEP });
        return z.NEVER;
      }
      // An escaped NUL ("\u0000") is no NUL in the text itself, but is one once parsed (lib/nul.ts).
      const nul = pathToNul(value);
      if (nul) {
        ctx.addIssue({ code: 'custom', path: nul, message: NUL_MESSAGE });
        return z.NEVER;
      }
      return value;
    })
    .pipe(schema);
}

const inlineKind = z.enum(['text', 'markdown', 'html']);

export const inlineSourceSchema = z.strictObject({
  kind: inlineKind,
  name,
  content: z.string().min(1).describe('The document itself.'),
  personaId: personaId.optional(),
  metadata: metadata.optional(),
});

export const urlSourceSchema = z.strictObject({
  kind: z.literal('url'),
  url: z.string().max(2048).describe('http(s) URL on the public internet; fetched by the server.'),
  name: name.optional(),
  personaId: personaId.optional(),
  metadata: metadata.optional(),
});

/** The JSON bodies of `POST /knowledge`. */
export const createSourceJsonSchema = z.discriminatedUnion('kind', [inlineSourceSchema, urlSourceSchema]);

/** `multipart/form-data` parts of `POST /knowledge` and `PUT /knowledge/:id` (documentation: parsed by hand). */
export const multipartSourceSchema = z
  .object({
    file: z.string().meta({ format: 'binary' }).describe('pdf, docx, md, txt, html, csv or json'),
    name: name.optional(),
    personaId: z.string().optional().describe('Empty or absent: shared.'),
    metadata: z.string().optional().describe('A JSON object, as text.'),
  })
  .meta({ id: 'KnowledgeUpload' });

/**
 * The text parts of a multipart upload, held to the same rules as the JSON body's fields:
 * `metadata` is a JSON object sent as text, and an empty `personaId` means shared (null).
 */
export const uploadFieldsSchema = z.strictObject({
  name: name.optional(),
  personaId: z
    .string()
    .optional()
    .transform((v) => (v === undefined ? undefined : v || null)),
  metadata: jsonObjectText(metadata).optional(),
});

/**
 * `PUT /knowledge/:id` JSON: new content (`kind` with `content` or `url`, as for POST; `name` may
 * then be left out), or only new `name`/`personaId`/`metadata`, or nothing (re-process as is).
 */
export const updateSourceJsonSchema = z
  .strictObject({
    kind: z.enum(['text', 'markdown', 'html', 'url']).optional(),
    content: z.string().min(1).optional(),
    url: z.string().max(2048).optional(),
    name: name.optional(),
    personaId: personaId.optional(),
    metadata: metadata.optional(),
  })
  .superRefine((body, ctx) => {
    const needs = body.kind === 'url' ? 'url' : body.kind !== undefined ? 'content' : null;
    for (const field of ['content', 'url'] as const) {
      if (needs === field && body[field] === undefined) ctx.addIssue({ code: 'custom', path: [field], message: `is required when kind is "${body.kind}"` });
      if (needs !== field && body[field] !== undefined) {
        ctx.addIssue({ code: 'custom', path: [field], message: needs === null ? 'needs a kind' : `is not used when kind is "${body.kind}"` });
      }
    }
  });

export const listSourcesQuerySchema = pageQuerySchema
  .extend({
    personaId: z.string().optional().describe('Only this persona’s private sources.'),
    status: z.enum(['processing', 'ready', 'failed']).optional(),
  })
  .strict();

export const chunksQuerySchema = pageQuerySchema.strict();

export const SEARCH_MODES = ['hybrid', 'vector', 'keyword'] as const;

export const searchQuerySchema = z.strictObject({
  q: z.string().trim().min(1).max(2000).describe('Free text.'),
  personaId: z.string().optional().describe('Search the shared sources and this persona’s; absent: every source.'),
  limit: z.coerce.number().int().min(1).max(50).default(5),
  mode: z.enum(SEARCH_MODES).default('hybrid'),
  filter: jsonObjectText(z.record(z.string(), z.unknown()), 4096)
    .optional()
    .describe('JSON object: metadata fields that must equal these values (all of them).'),
});

export const knowledgeSourceSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    kind: z.enum(['text', 'markdown', 'html', 'url', 'pdf', 'docx', 'csv', 'json']),
    personaId: z.string().nullable(),
    status: z.enum(['processing', 'ready', 'failed']),
    error: z.string().nullable(),
    bytes: z.number().int(),
    chunkCount: z.number().int(),
    metadata: z.record(z.string(), z.unknown()),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'KnowledgeSource' });

export const chunkSchema = z
  .object({
    id: z.string(),
    position: z.number().int(),
    text: z.string(),
    headingPath: z.array(z.string()),
    tokens: z.number().int(),
  })
  .meta({ id: 'KnowledgeChunk' });

export const searchResultSchema = z
  .object({
    data: z.array(
      z.object({
        chunkId: z.string(),
        sourceId: z.string(),
        sourceName: z.string(),
        text: z.string(),
        score: z.number(),
        position: z.number().int(),
        metadata: z.record(z.string(), z.unknown()),
      }),
    ),
    mode: z.enum(SEARCH_MODES),
  })
  .meta({ id: 'KnowledgeSearchResult' });

export type CreateSourceJson = z.infer<typeof createSourceJsonSchema>;
export type KnowledgeSource = z.infer<typeof knowledgeSourceSchema>;
export type KnowledgeChunk = z.infer<typeof chunkSchema>;
export type SearchMode = (typeof SEARCH_MODES)[number];
export type SearchResult = z.infer<typeof searchResultSchema>;
