import { z } from 'zod';
import { pageOf } from '../http/openapi.js';

/** `limit` and `cursor` of a list tool: the HTTP lists' rules, as JSON numbers rather than query text. */
export const pageInput = {
  limit: z.number().int().min(1).max(100).default(20).describe('Page size, 1–100 (default 20).'),
  cursor: z.string().max(512).optional().describe('`nextCursor` of the previous page, to read the next one.'),
};

/** `{ id }` input of the get and delete tools. */
export const idInput = (what: string) => z.strictObject({ id: z.string().min(1).max(64).describe(`The ${what}'s id.`) });

/** A list result: the HTTP page shape. */
export const pageOutput = <T extends z.ZodType>(item: T) => pageOf(item);

/** Output of tools that delete: what went, so a model can say so. */
export const deletedOutput = z.object({ id: z.string(), deleted: z.literal(true) });
