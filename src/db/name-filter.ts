import { type RawBuilder, sql } from 'kysely';

/** Escapes LIKE wildcards so a search for "50%" means the text "50%". */
function likeContains(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

const asciiLower = (text: string) => text.replace(/[A-Z]/g, (c) => c.toLowerCase());

/**
 * `name` contains `text`, ASCII case ignored on both backends, as SQLite's LIKE does: PostgreSQL's
 * LIKE does not, and its lower() of a "C"-collated column (dialect.ts) folds ASCII only, like the
 * pattern here. The `?q=` of lists that filter by name.
 */
export function nameContains(text: string): RawBuilder<boolean> {
  return sql<boolean>`lower(name) LIKE ${likeContains(asciiLower(text))} ESCAPE '\\'`;
}
