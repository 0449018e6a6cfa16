/**
 * The deterministic scorers: one answer to one case gives one Score per scorer that applies.
 *
 * Three sorts of score:
 *  - pass/fail checks (exact, contains, must_contain, must_not_contain, regex, retrieval_hit_at_k,
 *    json_schema): value 0..1, passed true/false (null value with passed false: the check could
 *    not run, e.g. "regex timed out");
 *  - ranks (retrieval_mrr): value 0..1, passed null (a quality, not a verdict);
 *  - measurements (latency_ms, tokens): a raw number, passed null. They describe the run and are
 *    never part of passing or of the mean.
 * overallPass and meanScore read them this way; a scorer added elsewhere (the LLM judge) takes part
 * as a check when it sets passed, as a rank when not.
 */
import { type EvalCase, jsonSchemaValidator, parseRegex } from './cases.js';
import { TIMED_OUT, withinBudget } from './time-budget.js';

export interface ScoredAnswer {
  text: string;
  /** In retrieval rank order; one entry a chunk is fine (sources are counted once, at their best rank). */
  sources: { sourceId: string; sourceName: string }[];
  latencyMs: number;
  promptTokens: number;
  completionTokens: number;
  /** Why no answer came (the model call failed); null when it did. */
  error: string | null;
}

export interface Score {
  scorer: string;
  /** 0..1 for checks and ranks, the raw number for measurements; null when the scorer could not run. */
  value: number | null;
  /** null for ranks and measurements. */
  passed: boolean | null;
  detail?: string;
}

export type ScorerName =
  | 'exact'
  | 'contains'
  | 'must_contain'
  | 'must_not_contain'
  | 'regex'
  | 'retrieval_hit_at_k'
  | 'retrieval_mrr'
  | 'json_schema'
  | 'latency_ms'
  | 'tokens';

/** Scorers whose value is a measurement (milliseconds, tokens), not a 0..1 score. */
export const MEASUREMENT_SCORERS: ReadonlySet<string> = new Set<ScorerName>(['latency_ms', 'tokens']);

/** Text a regex is tested against is cut to this many characters. */
export const REGEX_TEXT_MAX = 100_000;
/** Milliseconds one regex test may run (its own running: a busy machine's time is not counted, see withinBudget). */
export const REGEX_TIMEOUT_MS = 50;
/** Milliseconds one JSON Schema validation (whose `pattern`s are user regexes too) may run. */
export const JSON_SCHEMA_TIMEOUT_MS = 100;
const DETAIL_MAX = 500;

/** Trimmed, whitespace runs as one space, lower case (NFC first, so composed and decomposed letters agree). */
export function normalizeText(text: string): string {
  return text.normalize('NFC').replace(/\s+/g, ' ').trim().toLowerCase();
}

const cut = (text: string, max = DETAIL_MAX): string => (text.length <= max ? text : `${text.slice(0, max - 1)}…`);
const quoted = (items: string[]): string => cut(items.map((item) => JSON.stringify(item)).join(', '));
const check = (scorer: ScorerName, passed: boolean, detail?: string, value: number = passed ? 1 : 0): Score =>
  detail === undefined ? { scorer, value, passed } : { scorer, value, passed, detail };

// ---------------------------------------------------------------------------------------------
// User regexes under a time limit

/**
 * Whether `regex` (a case's `regex`: "pattern" or "/pattern/flags") matches `text` (its first
 * REGEX_TEXT_MAX characters); 'timeout' when it ran out of time. Throws when the regex does not compile.
 */
export function testRegex(regex: string, text: string, timeoutMs = REGEX_TIMEOUT_MS): boolean | 'timeout' {
  const { pattern, flags } = parseRegex(regex);
  const compiled = new RegExp(pattern, flags);
  const subject = text.length > REGEX_TEXT_MAX ? text.slice(0, REGEX_TEXT_MAX) : text;
  const result = withinBudget(() => compiled.test(subject), timeoutMs);
  return result === TIMED_OUT ? 'timeout' : result;
}

// ---------------------------------------------------------------------------------------------
// JSON in an answer

const FENCED = /```[ \t]*([A-Za-z0-9_-]*)[^\n]*\n([\s\S]*?)```/g;

/** The JSON value of the answer: all of it, or else the first ```json (then unlabelled) fenced block that parses. */
export function answerJson(text: string): { value: unknown } | null {
  const whole = parseJson(text.trim());
  if (whole) return whole;
  const blocks = [...text.matchAll(FENCED)].map((m) => ({ label: (m[1] ?? '').toLowerCase(), body: m[2] ?? '' }));
  for (const wanted of ['json', '']) {
    for (const block of blocks) {
      if (block.label !== wanted) continue;
      const parsed = parseJson(block.body.trim());
      if (parsed) return parsed;
    }
  }
  return null;
}

function parseJson(text: string): { value: unknown } | null {
  if (text === '') return null;
  try {
    return { value: JSON.parse(text) };
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------------------------------------
// The scorers

/** Distinct sources in rank order (a source with several chunks counted at its first). */
function distinctSources(sources: ScoredAnswer['sources']): ScoredAnswer['sources'] {
  const seen = new Set<string>();
  return sources.filter((s) => !seen.has(s.sourceId) && seen.add(s.sourceId));
}

/** 1-based rank of the first retrieved source an expected entry names (by id, or by name ignoring case), or 0. */
function firstExpectedRank(expected: string[], sources: ScoredAnswer['sources']): number {
  const ids = new Set(expected);
  const names = new Set(expected.map(normalizeText));
  const at = sources.findIndex((s) => ids.has(s.sourceId) || names.has(normalizeText(s.sourceName)));
  return at + 1;
}

function jsonSchemaScore(schema: Record<string, unknown>, text: string): Score {
  const validator = jsonSchemaValidator(schema);
  if (typeof validator === 'string') return { scorer: 'json_schema', value: null, passed: false, detail: cut(`the schema does not compile: ${validator}`) };
  const json = answerJson(text);
  if (!json) return check('json_schema', false, 'the answer is not JSON (nor holds JSON in a ```json block)');
  const valid = withinBudget(() => validator(json.value), JSON_SCHEMA_TIMEOUT_MS);
  if (valid === TIMED_OUT) return { scorer: 'json_schema', value: null, passed: false, detail: 'schema validation timed out' };
  if (valid) return check('json_schema', true);
  const errors = (validator.errors ?? []).slice(0, 5).map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`);
  return check('json_schema', false, cut(`does not match the schema: ${errors.join('; ')}`));
}

/** Every deterministic scorer that applies to the case, in a fixed order (measurements last). */
export function scoreAnswer(c: EvalCase, answer: ScoredAnswer): Score[] {
  const scores: Score[] = [];
  const failed = answer.error;
  // A failed answer fails every check that applies, with the error as the detail.
  const add = (scorer: ScorerName, score: () => Score): void => {
    if (failed === null) scores.push(score());
    else scores.push({ scorer, value: 0, passed: scorer === 'retrieval_mrr' ? null : false, detail: cut(failed) });
  };
  const text = normalizeText(answer.text);

  if (c.expected !== undefined) {
    const expected = normalizeText(c.expected);
    add('exact', () => check('exact', text === expected));
    add('contains', () => check('contains', text.includes(expected)));
  }
  if (c.mustContain !== undefined && c.mustContain.length > 0) {
    const phrases = c.mustContain;
    add('must_contain', () => {
      const missing = phrases.filter((p) => !text.includes(normalizeText(p)));
      const value = (phrases.length - missing.length) / phrases.length;
      return check('must_contain', missing.length === 0, missing.length > 0 ? `missing: ${quoted(missing)}` : undefined, value);
    });
  }
  if (c.mustNotContain !== undefined && c.mustNotContain.length > 0) {
    const phrases = c.mustNotContain;
    add('must_not_contain', () => {
      const present = phrases.filter((p) => text.includes(normalizeText(p)));
      const value = (phrases.length - present.length) / phrases.length;
      return check('must_not_contain', present.length === 0, present.length > 0 ? `present: ${quoted(present)}` : undefined, value);
    });
  }
  if (c.regex !== undefined) {
    const regex = c.regex;
    add('regex', () => {
      let result: boolean | 'timeout';
      try {
        result = testRegex(regex, answer.text);
      } catch (error) {
        // Only for a case that skipped evalCaseSchema.
        const reason = error instanceof Error ? error.message : String(error);
        return { scorer: 'regex', value: null, passed: false, detail: cut(`the regex does not compile: ${reason}`) };
      }
      if (result === 'timeout') return { scorer: 'regex', value: null, passed: false, detail: 'regex timed out' };
      const note = answer.text.length > REGEX_TEXT_MAX ? `tested the first ${REGEX_TEXT_MAX} characters` : undefined;
      return check('regex', result, note);
    });
  }
  if (c.expectedSources !== undefined && c.expectedSources.length > 0) {
    const sources = distinctSources(answer.sources);
    const rank = firstExpectedRank(c.expectedSources, sources);
    const k = sources.length;
    const where = rank > 0 ? `${sources[rank - 1]?.sourceId} at rank ${rank}` : 'none of the expected sources retrieved';
    add('retrieval_hit_at_k', () => check('retrieval_hit_at_k', rank > 0, `k=${k}; ${where}`));
    add('retrieval_mrr', () => ({ scorer: 'retrieval_mrr', value: rank > 0 ? 1 / rank : 0, passed: null, detail: `k=${k}; ${where}` }));
  }
  if (c.jsonSchema !== undefined) {
    const schema = c.jsonSchema;
    add('json_schema', () => jsonSchemaScore(schema, answer.text));
  }
  // Measurements, not pass/fail: passed stays null, and they are reported for failed answers too.
  scores.push({ scorer: 'latency_ms', value: answer.latencyMs, passed: null });
  scores.push({ scorer: 'tokens', value: answer.promptTokens + answer.completionTokens, passed: null });
  return scores;
}

/**
 * Whether the case passed: every score with a verdict (passed not null, measurements aside) passed.
 * null when no score gives a verdict (a case with no checks), so it counts neither way.
 */
export function overallPass(scores: readonly Score[]): boolean | null {
  let verdicts = 0;
  for (const score of scores) {
    if (MEASUREMENT_SCORERS.has(score.scorer) || score.passed === null) continue;
    if (!score.passed) return false;
    verdicts++;
  }
  return verdicts > 0 ? true : null;
}

/** Mean of the 0..1 values of checks and ranks (measurements and null values left out); null when there are none. */
export function meanScore(scores: readonly Score[]): number | null {
  let sum = 0;
  let count = 0;
  for (const score of scores) {
    if (MEASUREMENT_SCORERS.has(score.scorer) || score.value === null) continue;
    sum += score.value;
    count++;
  }
  return count > 0 ? sum / count : null;
}
