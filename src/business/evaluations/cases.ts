/**
 * Evaluation cases: the format (a zod schema), and import/export as JSONL and CSV.
 *
 * JSONL: one case a line as a JSON object; blank lines are skipped, a BOM is accepted.
 *
 * CSV: a header row, then one case a row. The delimiter (comma, semicolon or tab) is read off the
 * header row; export writes commas, CRLF line ends and every column in this order:
 *   input, messages, expected, mustContain, mustNotContain, regex, expectedSources, jsonSchema, rubric, tags
 * Import takes any subset in any order (names matched case-insensitively; it needs input or messages);
 * an unknown or repeated column is an error. A column with an empty header is allowed only with every
 * cell empty (spreadsheets add those).
 *  - An empty cell is an absent field; a row whose cells are all empty is skipped.
 *  - List columns (mustContain, mustNotContain, expectedSources, tags): items separated by `|`,
 *    each trimmed, empty items dropped; `\|` is a literal pipe and `\\` a literal backslash (any
 *    other backslash is itself, so `C:\docs` reads as written). Export escapes every `|` and `\`.
 *  - JSON columns (messages, jsonSchema): the value as JSON text.
 *  - Formula cells: export writes a cell starting with `=`, `+`, `-`, `@`, tab or CR with a `'`
 *    in front (csvCell, OWASP CSV injection), so a spreadsheet shows it as text; import takes one
 *    leading `'` off a cell whose next character is one of those (or another `'` followed by one of
 *    those: export adds a `'` to a value that itself starts with `'`s and such a character, so every
 *    value reads back as it was).
 *
 * Errors name the case by its index (`cases.12.regex`, as zod paths do) and the message starts
 * with the line (JSONL) or spreadsheet row (CSV, header = row 1) it came from.
 *
 * Imported and exported cases are canonical: fields in the schema's order, empty lists left out
 * (an empty list and an absent one score the same, and CSV cannot tell them apart), so
 * export → import gives the same cases.
 */
import { createRequire } from 'node:module';
import type { Ajv, ValidateFunction } from 'ajv';
import type { Ajv2020 } from 'ajv/dist/2020.js';
import { z } from 'zod';
import { csvCell } from '../analytics/analytics.export.js';
import { detectDelimiter } from '../../core/knowledge/extractors/csv.js';
import { type FieldError, ValidationError, validationErrorOf, zodFieldErrors } from '../../errors.js';
import { isModernDraft, newAjv07, newAjv2020 } from '../../lib/ajv.js';
import { jsonDepthIssue, pathTooDeep, TOO_DEEP } from '../../lib/json-depth.js';
import { nulIssue } from '../../lib/nul.js';

export const CASE_LIMITS = {
  input: 32_000,
  messages: 20,
  expected: 32_000,
  phrases: 50,
  phrase: 1_000,
  regex: 500,
  sources: 50,
  source: 200,
  jsonSchemaBytes: 64 * 1024,
  rubric: 4_000,
  tags: 20,
  tag: 100,
} as const;

/** Cases one import may hold unless the caller says otherwise. */
export const DEFAULT_MAX_CASES = 10_000;
/** Field errors reported by one failed import; the rest are left off (the detail says how many). */
const MAX_REPORTED_ERRORS = 20;

// ---------------------------------------------------------------------------------------------
// Regular expressions

/** Flags a case's regex may carry in the `/pattern/flags` form. */
const REGEX_FLAGS = /^[imsu]*$/;
const SLASHED = /^\/([\s\S]*)\/([a-z]*)$/;

/**
 * A case's `regex` as RegExp arguments: `/pattern/flags` (flags from `imsu`) or else the whole
 * text as the pattern with no flags (case-sensitive). Throws on a flag outside `imsu`; compiling
 * is the caller's (`new RegExp` throws on a bad pattern or a repeated flag).
 */
export function parseRegex(source: string): { pattern: string; flags: string } {
  const slashed = SLASHED.exec(source);
  if (!slashed) return { pattern: source, flags: '' };
  const [, pattern = '', flags = ''] = slashed;
  if (!REGEX_FLAGS.test(flags)) throw new Error(`flags must be from "imsu", got "${flags}" (a pattern starting with "/" is read as /pattern/flags)`);
  return { pattern, flags };
}

function regexProblem(source: string): string | null {
  try {
    const { pattern, flags } = parseRegex(source);
    new RegExp(pattern, flags);
    return null;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

// ---------------------------------------------------------------------------------------------
// JSON Schema (Ajv)

// Ajv is loaded at the first case with a jsonSchema (src/lib/ajv.ts), csv-parse at the first CSV.
const require = createRequire(import.meta.url);
let draft07: Ajv | undefined;
let draft2020: Ajv2020 | undefined;

/** Compiled validators (or the compile error) by schema text; one dataset repeats a few schemas. */
const validators = new Map<string, ValidateFunction | string>();
const VALIDATOR_LIMIT = 1_000;
/** Schema text the cache may hold as keys (a schema may be 64 KiB). */
const VALIDATOR_KEY_CHARS = 8_000_000;
let validatorKeyChars = 0;

/**
 * A validator for `schema`, or the reason it does not compile. `$schema` picks the draft (2019-09
 * or 2020-12, else draft-07); `$id` is dropped so that two schemas with one id do not collide. Each
 * schema is removed from Ajv after compiling, and the Ajv instances are made afresh whenever the
 * cache is cleared, so user schemas do not pile up in them.
 */
export function jsonSchemaValidator(schema: Record<string, unknown>): ValidateFunction | string {
  const key = JSON.stringify(schema);
  const cached = validators.get(key);
  if (cached !== undefined) return cached;
  const { $schema, $id: _id, ...rest } = schema;
  const ajv = isModernDraft($schema) ? (draft2020 ??= newAjv2020()) : (draft07 ??= newAjv07());
  let result: ValidateFunction | string;
  try {
    const compiled = ajv.compile(rest);
    // An $async schema's validator returns a promise; scoring is synchronous.
    result = (compiled as { $async?: unknown }).$async === true ? '$async schemas are not supported' : compiled;
  } catch (error) {
    result = error instanceof Error ? error.message : String(error);
  } finally {
    ajv.removeSchema(rest);
  }
  if (validators.size >= VALIDATOR_LIMIT || validatorKeyChars + key.length > VALIDATOR_KEY_CHARS) {
    validators.clear();
    validatorKeyChars = 0;
    draft07 = undefined;
    draft2020 = undefined;
  }
  validators.set(key, result);
  validatorKeyChars += key.length;
  return result;
}

// ---------------------------------------------------------------------------------------------
// The schema

const text = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .refine((s) => s.trim() !== '', 'must not be blank');
const list = (items: number, length: number) => z.array(z.string().trim().min(1).max(length)).max(items);

export const evalMessageSchema = z.strictObject({
  role: z.enum(['user', 'assistant']),
  content: text(CASE_LIMITS.input),
});

export const evalCaseSchema = z
  .strictObject({
    input: text(CASE_LIMITS.input).optional().describe('The question; send exactly one of input and messages.'),
    messages: z
      .array(evalMessageSchema)
      .min(1)
      .max(CASE_LIMITS.messages)
      .superRefine((messages, ctx) => {
        const last = messages.at(-1);
        if (last && last.role !== 'user') {
          ctx.addIssue({ code: 'custom', path: [messages.length - 1, 'role'], message: 'the last message must be the user\'s' });
        }
      })
      .optional()
      .describe('A conversation ending with the user message to answer; send exactly one of input and messages.'),
    expected: text(CASE_LIMITS.expected).optional().describe('Expected answer text (exact and contains scorers).'),
    mustContain: list(CASE_LIMITS.phrases, CASE_LIMITS.phrase).optional().describe('Phrases the answer must contain (case-insensitive).'),
    mustNotContain: list(CASE_LIMITS.phrases, CASE_LIMITS.phrase).optional().describe('Phrases the answer must not contain (case-insensitive).'),
    regex: z
      .string()
      .min(1)
      .max(CASE_LIMITS.regex)
      .superRefine((source, ctx) => {
        const problem = regexProblem(source);
        if (problem !== null) ctx.addIssue({ code: 'custom', message: `must compile: ${problem}` });
      })
      .optional()
      .describe('JavaScript regular expression the answer must match: "pattern" or "/pattern/flags" with flags from imsu.'),
    expectedSources: list(CASE_LIMITS.sources, CASE_LIMITS.source)
      .optional()
      .describe('Knowledge source ids (src_...) or names expected among the retrieved sources.'),
    jsonSchema: z
      .record(z.string(), z.unknown())
      .superRefine((schema, ctx) => {
        const tooDeep = pathTooDeep(schema);
        if (tooDeep) {
          ctx.addIssue({ code: 'custom', path: tooDeep, message: TOO_DEEP });
          return;
        }
        if (Buffer.byteLength(JSON.stringify(schema)) > CASE_LIMITS.jsonSchemaBytes) {
          ctx.addIssue({ code: 'custom', message: 'must be at most 64 KiB as JSON' });
          return;
        }
        const validator = jsonSchemaValidator(schema);
        if (typeof validator === 'string') ctx.addIssue({ code: 'custom', message: `must compile: ${validator}` });
      })
      .optional()
      .describe('JSON Schema the answer (JSON, possibly in a ```json block) must be valid against.'),
    rubric: text(CASE_LIMITS.rubric).optional().describe('Grading instructions for the LLM judge.'),
    tags: list(CASE_LIMITS.tags, CASE_LIMITS.tag).optional(),
  })
  .superRefine((c, ctx) => {
    if (c.input !== undefined && c.messages !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['messages'], message: 'send exactly one of input and messages' });
    } else if (c.input === undefined && c.messages === undefined) {
      ctx.addIssue({ code: 'custom', path: ['input'], message: 'is required (exactly one of input and messages)' });
    }
  });

export type EvalCase = z.infer<typeof evalCaseSchema>;
export type EvalMessage = z.infer<typeof evalMessageSchema>;

/** The conversation to answer: `input` as one user message, or the case's messages. */
export function caseInput(c: EvalCase): { messages: EvalMessage[] } {
  if (c.messages !== undefined) return { messages: c.messages.map((m) => ({ role: m.role, content: m.content })) };
  return { messages: [{ role: 'user', content: c.input ?? '' }] };
}

const FIELDS = [
  'input',
  'messages',
  'expected',
  'mustContain',
  'mustNotContain',
  'regex',
  'expectedSources',
  'jsonSchema',
  'rubric',
  'tags',
] as const satisfies ReadonlyArray<keyof EvalCase>;
type Field = (typeof FIELDS)[number];

/** The case with its fields in schema order, absent and empty lists left out. */
export function canonicalCase(c: EvalCase): EvalCase {
  const out: Record<string, unknown> = {};
  for (const field of FIELDS) {
    const value = c[field];
    if (value === undefined || (Array.isArray(value) && value.length === 0)) continue;
    out[field] = field === 'messages' ? (value as EvalMessage[]).map((m) => ({ role: m.role, content: m.content })) : value;
  }
  return out as EvalCase;
}

// ---------------------------------------------------------------------------------------------
// Import

interface ParseOptions {
  /** Default 10 000. */
  maxCases?: number;
}

/** Collects field errors up to a limit, then throws them as one ValidationError. */
class Problems {
  readonly errors: FieldError[] = [];
  private dropped = 0;
  add(error: FieldError): void {
    if (this.errors.length < MAX_REPORTED_ERRORS) this.errors.push(error);
    else this.dropped++;
  }
  get full(): boolean {
    return this.errors.length >= MAX_REPORTED_ERRORS;
  }
  throwIfAny(): void {
    if (this.errors.length === 0) return;
    const error = validationErrorOf('cases', this.errors);
    if (this.dropped === 0) throw error;
    throw new ValidationError(`${error.message} (and ${this.dropped} more)`, this.errors);
  }
}

/** Validates one raw case; `where` is "line 13" or "row 13", `index` the case's 0-based index. */
function checkCase(raw: unknown, index: number, where: string, problems: Problems): EvalCase | null {
  const prefix = `cases.${index}`;
  const tooDeep = jsonDepthIssue(raw, prefix);
  if (tooDeep) {
    problems.add({ path: tooDeep.path, message: `${where}: ${tooDeep.message}` });
    return null;
  }
  // JSONL escapes a NUL ("\u0000") that the request's JSON parser saw as text (lib/nul.ts).
  const nul = nulIssue(raw, prefix);
  if (nul) {
    problems.add({ path: nul.path, message: `${where}: ${nul.message}` });
    return null;
  }
  const parsed = evalCaseSchema.safeParse(raw);
  if (parsed.success) return canonicalCase(parsed.data);
  for (const error of zodFieldErrors(parsed.error.issues, prefix)) problems.add({ path: error.path, message: `${where}: ${error.message}` });
  return null;
}

function tooMany(maxCases: number, where: string): ValidationError {
  return ValidationError.field('cases', `${where}: more than ${maxCases.toLocaleString('en-US')} cases; split the file`);
}

function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** JSONL: one case a line (a JSON object); blank lines skipped. Throws ValidationError naming line and field. */
export function parseCasesJsonl(text: string, { maxCases = DEFAULT_MAX_CASES }: ParseOptions = {}): { cases: EvalCase[] } {
  const lines = text.replace(/^\uFEFF/, '').split('\n');
  const problems = new Problems();
  const cases: EvalCase[] = [];
  let index = 0;
  for (let i = 0; i < lines.length && !problems.full; i++) {
    const line = (lines[i] as string).replace(/\r$/, '');
    if (line.trim() === '') continue;
    const where = `line ${i + 1}`;
    if (index >= maxCases) throw tooMany(maxCases, where);
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch (error) {
      problems.add({ path: `cases.${index}`, message: `${where}: not valid JSON (${describeError(error)})` });
      index++;
      continue;
    }
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
      problems.add({ path: `cases.${index}`, message: `${where}: must be a JSON object` });
    } else {
      const c = checkCase(raw, index, where, problems);
      if (c) cases.push(c);
    }
    index++;
  }
  problems.throwIfAny();
  if (cases.length === 0) throw ValidationError.field('cases', 'the file holds no cases');
  return { cases };
}

type ColumnKind = 'text' | 'list' | 'json';
const COLUMN_KINDS: Record<Field, ColumnKind> = {
  input: 'text',
  messages: 'json',
  expected: 'text',
  mustContain: 'list',
  mustNotContain: 'list',
  regex: 'text',
  expectedSources: 'list',
  jsonSchema: 'json',
  rubric: 'text',
  tags: 'list',
};
/** The CSV columns, in the order export writes them. */
export const CSV_COLUMNS: readonly Field[] = FIELDS;
const COLUMN_BY_NAME = new Map<string, Field>(FIELDS.map((f) => [f.toLowerCase(), f]));

/** A cell written by csvCell with a `'` in front of a formula character: that `'` taken off. */
const NEUTRALISED = /^'(?='*[=+\-@\t\r])/;
/** A value that would read back with one `'` fewer: export adds one. */
const QUOTED_FORMULA = /^'+[=+\-@\t\r]/;

function encodeList(items: readonly string[]): string {
  return items.map((item) => item.replace(/\\/g, '\\\\').replace(/\|/g, '\\|')).join('|');
}

function decodeList(cell: string): string[] {
  const items: string[] = [];
  let current = '';
  for (let i = 0; i < cell.length; i++) {
    const char = cell[i] as string;
    const next = cell[i + 1];
    if (char === '\\' && (next === '\\' || next === '|')) {
      current += next;
      i++;
    } else if (char === '|') {
      items.push(current);
      current = '';
    } else {
      current += char;
    }
  }
  items.push(current);
  return items.map((item) => item.trim()).filter((item) => item !== '');
}


/**
 * CSV with a header row (columns in the module comment). Throws ValidationError naming the row
 * (header = row 1, as a spreadsheet numbers them) and the field.
 */
export function parseCasesCsv(text: string, { maxCases = DEFAULT_MAX_CASES }: ParseOptions = {}): { cases: EvalCase[] } {
  // csv-parse is loaded at the first CSV import, not at start-up.
  const { parse } = require('csv-parse/sync') as typeof import('csv-parse/sync');
  const body = text.replace(/^\uFEFF/, '');
  let rows: string[][];
  try {
    rows = parse(body, { relax_column_count: true, skip_empty_lines: false, delimiter: detectDelimiter(body) }) as string[][];
  } catch (error) {
    throw ValidationError.field('cases', `the CSV could not be read: ${describeError(error)}`);
  }
  const [header = [], ...records] = rows;
  const columns: Array<Field | null> = [];
  const headerErrors: FieldError[] = [];
  for (const [i, rawName] of header.entries()) {
    const name = rawName.trim();
    if (name === '') {
      columns.push(null);
      continue;
    }
    const field = COLUMN_BY_NAME.get(name.toLowerCase());
    if (field === undefined) {
      headerErrors.push({ path: 'columns', message: `row 1: unknown column "${name}" (column ${i + 1}); the columns are ${FIELDS.join(', ')}` });
    } else if (columns.includes(field)) {
      headerErrors.push({ path: 'columns', message: `row 1: column "${field}" appears twice` });
    }
    columns.push(field ?? null);
  }
  if (headerErrors.length === 0 && !columns.includes('input') && !columns.includes('messages')) {
    headerErrors.push({ path: 'columns', message: 'row 1: the header needs an "input" or a "messages" column' });
  }
  if (headerErrors.length > 0) throw validationErrorOf('cases', headerErrors);

  const problems = new Problems();
  const cases: EvalCase[] = [];
  let index = 0;
  for (let r = 0; r < records.length && !problems.full; r++) {
    const record = records[r] as string[];
    if (record.every((cell) => cell.trim() === '')) continue;
    const where = `row ${r + 2}`;
    if (index >= maxCases) throw tooMany(maxCases, where);
    const raw: Record<string, unknown> = {};
    let bad = false;
    for (const [i, cell] of record.entries()) {
      if (cell === '') continue;
      const field = columns[i];
      if (field === undefined || field === null) {
        const what = field === undefined ? 'more cells than the header has columns' : `a value in column ${i + 1}, which has no header`;
        problems.add({ path: `cases.${index}`, message: `${where}: ${what} (quote cells that hold the delimiter)` });
        bad = true;
        continue;
      }
      const value = cell.replace(NEUTRALISED, '');
      const kind = COLUMN_KINDS[field];
      if (kind === 'text') raw[field] = value;
      else if (kind === 'list') raw[field] = decodeList(value);
      else {
        try {
          raw[field] = JSON.parse(value);
        } catch (error) {
          problems.add({ path: `cases.${index}.${field}`, message: `${where}: not valid JSON (${describeError(error)})` });
          bad = true;
        }
      }
    }
    if (!bad) {
      const c = checkCase(raw, index, where, problems);
      if (c) cases.push(c);
    }
    index++;
  }
  problems.throwIfAny();
  if (cases.length === 0) throw ValidationError.field('cases', 'the file holds no cases');
  return { cases };
}

// ---------------------------------------------------------------------------------------------
// Export

/** JSONL, one canonical case a line, each line ending in `\n`. */
export function casesToJsonl(cases: readonly EvalCase[]): string {
  return cases.map((c) => `${JSON.stringify(canonicalCase(c))}\n`).join('');
}

function csvText(value: string): string {
  return csvCell(QUOTED_FORMULA.test(value) ? `'${value}` : value);
}

/** CSV: the header row then one row a case, CRLF line ends, every column (see the module comment). */
export function casesToCsv(cases: readonly EvalCase[]): string {
  const lines = [CSV_COLUMNS.map((column) => csvCell(column)).join(',')];
  for (const c of cases) {
    const cells = CSV_COLUMNS.map((field) => {
      const value = c[field];
      if (value === undefined) return '';
      const kind = COLUMN_KINDS[field];
      if (kind === 'list') return csvText(encodeList(value as string[]));
      if (kind === 'json') return csvText(JSON.stringify(value));
      return csvText(value as string);
    });
    lines.push(cells.join(','));
  }
  return `${lines.join('\r\n')}\r\n`;
}
