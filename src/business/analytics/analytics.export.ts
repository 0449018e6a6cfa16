/**
 * The export formats (API.md §8): rows in batches become text chunks, one per batch, so a file of
 * any size is written with one batch in memory at a time.
 *  - csv: RFC 4180 (header row first, CRLF, fields with a comma, quote, CR or LF quoted, quotes
 *    doubled); a text cell starting with `=`, `+`, `-`, `@`, tab or CR is prefixed with `'` so a
 *    spreadsheet shows it as text instead of running it as a formula (OWASP CSV injection). Numbers
 *    are written as they are; null is an empty cell.
 *  - json: one array of objects; ndjson: one object a line.
 */
import type { ExportFormat } from './analytics.schemas.js';

export const CONTENT_TYPES: Record<ExportFormat, string> = {
  csv: 'text/csv; charset=utf-8',
  json: 'application/json; charset=utf-8',
  ndjson: 'application/x-ndjson; charset=utf-8',
};

const FORMULA_START = /^[=+\-@\t\r]/;
const NEEDS_QUOTES = /[",\r\n]/;

/** One CSV field. */
export function csvCell(value: unknown): string {
  if (value === null || value === undefined) return '';
  let text = typeof value === 'string' ? value : typeof value === 'number' || typeof value === 'boolean' ? String(value) : JSON.stringify(value);
  if (typeof value === 'string' && FORMULA_START.test(text)) text = `'${text}`;
  return NEEDS_QUOTES.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** The file as text chunks: one for the start, one per batch, one for the end. */
export async function* encodeRows(format: ExportFormat, columns: string[], batches: AsyncIterable<Array<Record<string, unknown>>>): AsyncGenerator<string> {
  const pick = (row: Record<string, unknown>) => Object.fromEntries(columns.map((c) => [c, row[c] ?? null]));
  if (format === 'csv') yield `${columns.map(csvCell).join(',')}\r\n`;
  if (format === 'json') yield '[';
  let first = true;
  for await (const rows of batches) {
    if (rows.length === 0) continue;
    let chunk: string;
    if (format === 'csv') chunk = rows.map((row) => `${columns.map((c) => csvCell(row[c])).join(',')}\r\n`).join('');
    else if (format === 'ndjson') chunk = rows.map((row) => `${JSON.stringify(pick(row))}\n`).join('');
    else {
      chunk = (first ? '\n' : ',\n') + rows.map((row) => JSON.stringify(pick(row))).join(',\n');
      first = false;
    }
    yield chunk;
  }
  if (format === 'json') yield first ? ']\n' : '\n]\n';
}
