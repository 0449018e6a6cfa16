import { type SelectQueryBuilder, sql } from 'kysely';
import { z } from 'zod';
import { ValidationError } from '../errors.js';

/** `limit` and `cursor` of every list (API.md §1). Query strings arrive as text. */
export const pageQuerySchema = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20).describe('Page size, 1–100.'),
  cursor: z.string().max(512).optional().describe('`nextCursor` of the previous page.'),
});

export interface PageRequest {
  limit: number;
  cursor?: string | undefined;
}

export interface Page<T> {
  data: T[];
  nextCursor: string | null;
}

interface CursorPosition {
  createdAt: string;
  id: string;
}

function encodeCursor(pos: CursorPosition): string {
  return Buffer.from(JSON.stringify([pos.createdAt, pos.id])).toString('base64url');
}

function decodeCursor(cursor: string): CursorPosition {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(value) && value.length === 2 && value.every((v) => typeof v === 'string')) {
      return { createdAt: value[0] as string, id: value[1] as string };
    }
  } catch {
    // fall through
  }
  throw ValidationError.field('cursor', 'is not a cursor this list returned');
}

/**
 * Newest-first keyset pagination over `created_at, id` (stable under inserts, unlike offsets).
 * `table` qualifies the columns when the query joins.
 */
export async function paginate<DB, TB extends keyof DB, O extends { created_at: string; id: string }>(
  query: SelectQueryBuilder<DB, TB, O>,
  page: PageRequest,
  table?: string,
): Promise<Page<O>> {
  const col = (name: string) => sql.ref(table ? `${table}.${name}` : name);
  let q = query;
  if (page.cursor !== undefined) {
    const pos = decodeCursor(page.cursor);
    q = q.where(
      sql<boolean>`(${col('created_at')} < ${pos.createdAt} OR (${col('created_at')} = ${pos.createdAt} AND ${col('id')} < ${pos.id}))`,
    );
  }
  const rows = await q
    .orderBy(sql`${col('created_at')} DESC, ${col('id')} DESC`)
    .limit(page.limit + 1)
    .execute();
  const hasMore = rows.length > page.limit;
  const data = hasMore ? rows.slice(0, page.limit) : rows;
  const last = data[data.length - 1];
  return { data, nextCursor: hasMore && last ? encodeCursor({ createdAt: last.created_at, id: last.id }) : null };
}

/** Maps a page of rows to a page of API objects. */
export function mapPage<R, T>(page: Page<R>, fn: (row: R) => T): Page<T> {
  return { data: page.data.map(fn), nextCursor: page.nextCursor };
}
