/**
 * The NUL character (U+0000), which PostgreSQL text cannot hold: a value carrying one would fail in
 * the database (a 500) on PostgreSQL and be stored on SQLite. So it never gets that far, on either
 * backend: what a client sends with one is refused at the edge (an id is unknown, a field is
 * invalid), and text extracted from documents or received from a chat platform drops it.
 */
import { type FieldError, NotFoundError, validationErrorOf } from '../errors.js';

export const NUL_MESSAGE = 'must not contain the NUL character (U+0000)';

/** The path to the first string (or key) holding U+0000 in a value (JSON-like), or null. Iterative: bodies nest deep. */
export function pathToNul(root: unknown): Array<string | number> | null {
  const pending: Array<{ value: unknown; path: Array<string | number> }> = [{ value: root, path: [] }];
  while (pending.length > 0) {
    const { value, path } = pending.pop()!;
    if (typeof value === 'string') {
      if (value.includes('\0')) return path;
    } else if (Array.isArray(value)) {
      value.forEach((v, i) => pending.push({ value: v, path: [...path, i] }));
    } else if (value !== null && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) {
        if (k.includes('\0')) return [...path, k];
        pending.push({ value: v, path: [...path, k] });
      }
    }
  }
  return null;
}

/** The field error for a NUL in `value` (path dotted under `prefix`; `root` when it is the value itself), or null. */
export function nulIssue(value: unknown, prefix?: string, root = prefix ?? 'body'): FieldError | null {
  const path = pathToNul(value);
  if (path === null) return null;
  const dotted = [...(prefix ? [prefix] : []), ...path].join('.');
  return { path: dotted || root, message: NUL_MESSAGE };
}

/** Throws a 400 `validation_failed` naming where `value` holds a NUL (`where`: "body", "query", "arguments"…). */
export function refuseNul(value: unknown, where: string, prefix?: string): void {
  const issue = nulIssue(value, prefix, where);
  if (issue) throw validationErrorOf(where, [issue]);
}

/** Throws a 404 when an id holds a NUL: no object has such an id, so it is unknown like any other. */
export function refuseNulId(id: string, what = 'Resource'): void {
  if (id.includes('\0')) throw new NotFoundError(what);
}

/** Text without NULs (the same string when it has none). */
export function dropNul(text: string): string {
  return text.includes('\0') ? text.replaceAll('\0', '') : text;
}

/** A copy of a JSON-like value whose strings (and keys) hold no NUL; the value itself when none does. */
export function withoutNul<T>(value: T): T {
  if (pathToNul(value) === null) return value;
  const clean = (v: unknown): unknown => {
    if (typeof v === 'string') return dropNul(v);
    if (Array.isArray(v)) return v.map(clean);
    if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [dropNul(k), clean(x)]));
    return v;
  };
  return clean(value) as T;
}
