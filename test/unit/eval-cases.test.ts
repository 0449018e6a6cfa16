// Evaluation cases (src/business/evaluations/cases.ts): the schema's rules, JSONL and CSV import with
// errors naming line/row and field, export with formula cells neutralised, and export → import.
import { describe, expect, it } from 'vitest';
import {
  type EvalCase,
  caseInput,
  canonicalCase,
  casesToCsv,
  casesToJsonl,
  evalCaseSchema,
  parseCasesCsv,
  parseCasesJsonl,
  parseRegex,
} from '../../src/business/evaluations/cases.js';
import { ValidationError } from '../../src/errors.js';
import fc from '../helpers/property.js';

/** The ValidationError `fn` throws (the test fails when it throws nothing or something else). */
function validationError(fn: () => unknown): ValidationError {
  let caught: unknown = null;
  try {
    fn();
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(ValidationError);
  return caught as ValidationError;
}

/** The zod issue paths of an invalid case, dotted. */
function issuePaths(value: unknown): string[] {
  const parsed = evalCaseSchema.safeParse(value);
  expect(parsed.success).toBe(false);
  return parsed.success ? [] : parsed.error.issues.map((issue) => issue.path.map(String).join('.'));
}

const jsonl = (...lines: unknown[]): string => lines.map((line) => (typeof line === 'string' ? line : JSON.stringify(line))).join('\n');

describe('evalCaseSchema', () => {
  it('accepts an input case and a conversation case with every field', () => {
    expect(evalCaseSchema.safeParse({ input: 'What is the refund window?' }).success).toBe(true);
    const full = {
      messages: [
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: 'Hello, how can I help?' },
        { role: 'user', content: 'Refund window?' },
      ],
      expected: '30 days',
      mustContain: ['30 days'],
      mustNotContain: ['60 days'],
      regex: '/\\b30\\s+days\\b/i',
      expectedSources: ['src_abc', 'Refund policy'],
      jsonSchema: { type: 'object', properties: { days: { type: 'integer' } }, required: ['days'] },
      rubric: 'Mentions the 30-day window.',
      tags: ['refunds', 'smoke'],
    };
    const parsed = evalCaseSchema.parse(full);
    expect(parsed).toEqual(full);
  });

  it('needs exactly one of input and messages', () => {
    expect(issuePaths({ expected: 'x' })).toEqual(['input']);
    expect(issuePaths({ input: 'q', messages: [{ role: 'user', content: 'q' }] })).toEqual(['messages']);
  });

  it("needs the conversation to end with the user's message, and 1 to 20 messages", () => {
    expect(issuePaths({ messages: [{ role: 'user', content: 'q' }, { role: 'assistant', content: 'a' }] })).toEqual(['messages.1.role']);
    expect(issuePaths({ messages: [] })).toEqual(['messages']);
    const many = Array.from({ length: 21 }, () => ({ role: 'user', content: 'q' }));
    expect(issuePaths({ messages: many })).toEqual(['messages']);
    expect(evalCaseSchema.safeParse({ messages: many.slice(0, 20) }).success).toBe(true);
    expect(issuePaths({ messages: [{ role: 'system', content: 'q' }] })).toEqual(['messages.0.role']);
  });

  it('rejects blank text, unknown fields and values over the limits', () => {
    expect(issuePaths({ input: '   ' })).toEqual(['input']);
    expect(issuePaths({ input: 'x'.repeat(32_001) })).toEqual(['input']);
    expect(evalCaseSchema.safeParse({ input: 'x'.repeat(32_000) }).success).toBe(true);
    expect(issuePaths({ input: 'q', answer: 'a' })).toEqual(['']);
    expect(issuePaths({ input: 'q', mustContain: Array.from({ length: 51 }, (_, i) => `p${i}`) })).toEqual(['mustContain']);
    expect(issuePaths({ input: 'q', mustNotContain: ['x'.repeat(1001)] })).toEqual(['mustNotContain.0']);
    expect(issuePaths({ input: 'q', tags: Array.from({ length: 21 }, (_, i) => `t${i}`) })).toEqual(['tags']);
    expect(issuePaths({ input: 'q', tags: ['x'.repeat(101)] })).toEqual(['tags.0']);
    expect(issuePaths({ input: 'q', expectedSources: Array.from({ length: 51 }, (_, i) => `src_${i}`) })).toEqual(['expectedSources']);
    expect(issuePaths({ input: 'q', rubric: 'r'.repeat(4001) })).toEqual(['rubric']);
    expect(issuePaths({ input: 'q', mustContain: ['  '] })).toEqual(['mustContain.0']);
  });

  it('trims list items', () => {
    expect(evalCaseSchema.parse({ input: 'q', tags: ['  a '], mustContain: [' b\n'] })).toEqual({ input: 'q', tags: ['a'], mustContain: ['b'] });
  });

  it('needs the regex to compile, at most 500 characters, flags from imsu in the /pattern/flags form', () => {
    expect(evalCaseSchema.safeParse({ input: 'q', regex: 'ab+c' }).success).toBe(true);
    expect(evalCaseSchema.safeParse({ input: 'q', regex: '/ab+c/imsu' }).success).toBe(true);
    const unclosed = evalCaseSchema.safeParse({ input: 'q', regex: '(ab' });
    expect(unclosed.success).toBe(false);
    expect(unclosed.error?.issues[0]?.path).toEqual(['regex']);
    expect(unclosed.error?.issues[0]?.message).toMatch(/^must compile: /);
    expect(issuePaths({ input: 'q', regex: '/ab/g' })).toEqual(['regex']);
    expect(issuePaths({ input: 'q', regex: '/ab/ii' })).toEqual(['regex']);
    expect(issuePaths({ input: 'q', regex: 'a'.repeat(501) })).toEqual(['regex']);
    expect(evalCaseSchema.safeParse({ input: 'q', regex: 'a'.repeat(500) }).success).toBe(true);
  });

  it('reads /pattern/flags, else the whole text as the pattern', () => {
    expect(parseRegex('/a\\/b/i')).toEqual({ pattern: 'a\\/b', flags: 'i' });
    expect(parseRegex('a/b')).toEqual({ pattern: 'a/b', flags: '' });
    expect(parseRegex('/')).toEqual({ pattern: '/', flags: '' });
    expect(() => parseRegex('/a/gy')).toThrow(/imsu/);
  });

  it('needs the JSON schema to be an object that compiles, at most 64 KiB and 64 levels', () => {
    expect(evalCaseSchema.safeParse({ input: 'q', jsonSchema: {} }).success).toBe(true);
    expect(evalCaseSchema.safeParse({ input: 'q', jsonSchema: { $schema: 'http://json-schema.org/draft-07/schema#', type: 'array' } }).success).toBe(
      true,
    );
    const bad = evalCaseSchema.safeParse({ input: 'q', jsonSchema: { type: 'nope' } });
    expect(bad.error?.issues.map((i) => [i.path.join('.'), i.message.slice(0, 13)])).toEqual([['jsonSchema', 'must compile:']]);
    expect(issuePaths({ input: 'q', jsonSchema: { $ref: 'https://example.com/schema.json' } })).toEqual(['jsonSchema']);
    expect(issuePaths({ input: 'q', jsonSchema: [] })).toEqual(['jsonSchema']);
    expect(evalCaseSchema.safeParse({ input: 'q', jsonSchema: { $async: true, type: 'object' } }).error?.issues[0]?.message).toBe(
      'must compile: $async schemas are not supported',
    );
    expect(issuePaths({ input: 'q', jsonSchema: { description: 'x'.repeat(65_536) } })).toEqual(['jsonSchema']);
    let deep: Record<string, unknown> = { type: 'string' };
    for (let i = 0; i < 70; i++) deep = { items: deep };
    expect(issuePaths({ input: 'q', jsonSchema: deep })[0]).toMatch(/^jsonSchema\.items\.items/);
  });
});

describe('caseInput', () => {
  it('makes input one user message and copies a conversation', () => {
    expect(caseInput({ input: 'Hi?' })).toEqual({ messages: [{ role: 'user', content: 'Hi?' }] });
    const messages = [
      { role: 'user' as const, content: 'a' },
      { role: 'assistant' as const, content: 'b' },
      { role: 'user' as const, content: 'c' },
    ];
    const out = caseInput({ messages });
    expect(out).toEqual({ messages });
    expect(out.messages).not.toBe(messages);
  });
});

describe('parseCasesJsonl', () => {
  it('reads one case a line, skipping blank lines, with a BOM and CRLF line ends', () => {
    const text = `\uFEFF${jsonl({ input: 'one', tags: ['a'] }, '', '   ', { messages: [{ role: 'user', content: 'two' }] })}\r\n\r\n`;
    expect(parseCasesJsonl(text).cases).toEqual([{ input: 'one', tags: ['a'] }, { messages: [{ role: 'user', content: 'two' }] }]);
  });

  it('returns canonical cases: empty lists left out', () => {
    expect(parseCasesJsonl(jsonl({ tags: [], input: 'q', mustContain: [] })).cases).toEqual([{ input: 'q' }]);
  });

  it('names the case index, the line and the field of a bad case', () => {
    const error = validationError(() => parseCasesJsonl(jsonl({ input: 'ok' }, '', { input: 'q', regex: '(' })));
    expect(error.errors).toEqual([{ path: 'cases.1.regex', message: expect.stringMatching(/^line 3: must compile: /) }]);
    expect(error.message).toMatch(/cases\.1\.regex: line 3: must compile/);
  });

  it('reports every bad line (up to 20), bad JSON and non-objects included', () => {
    const error = validationError(() =>
      parseCasesJsonl(jsonl({ input: 'q', colour: 'red' }, '{"input": "q",', '[1,2]', { messages: [{ role: 'assistant', content: 'a' }] }, { expected: 'x' })),
    );
    expect(error.errors).toEqual([
      { path: 'cases.0.colour', message: 'line 1: unknown field' },
      { path: 'cases.1', message: expect.stringMatching(/^line 2: not valid JSON \(/) },
      { path: 'cases.2', message: 'line 3: must be a JSON object' },
      { path: 'cases.3.messages.0.role', message: "line 4: the last message must be the user's" },
      { path: 'cases.4.input', message: 'line 5: is required (exactly one of input and messages)' },
    ]);
    const many = validationError(() => parseCasesJsonl(Array.from({ length: 30 }, () => '{').join('\n')));
    expect(many.errors).toHaveLength(20);
  });

  it('names JSON nested too deep', () => {
    let deep: unknown = 'x';
    for (let i = 0; i < 70; i++) deep = [deep];
    const error = validationError(() => parseCasesJsonl(jsonl({ input: 'q', jsonSchema: { enum: deep } })));
    expect(error.errors?.[0]?.path).toMatch(/^cases\.0\.jsonSchema\.enum\.0\.0/);
    expect(error.errors?.[0]?.message).toMatch(/^line 1: nests deeper than 64 levels/);
  });

  it('holds to maxCases (default 10 000) and needs at least one case', () => {
    const three = jsonl({ input: 'a' }, { input: 'b' }, { input: 'c' });
    expect(parseCasesJsonl(three, { maxCases: 3 }).cases).toHaveLength(3);
    expect(validationError(() => parseCasesJsonl(three, { maxCases: 2 })).errors).toEqual([
      { path: 'cases', message: 'line 3: more than 2 cases; split the file' },
    ]);
    const big = `${'{"input":"q"}\n'.repeat(10_001)}`;
    expect(validationError(() => parseCasesJsonl(big)).message).toMatch(/more than 10,000 cases/);
    expect(validationError(() => parseCasesJsonl('\n \n')).errors).toEqual([{ path: 'cases', message: 'the file holds no cases' }]);
  });
});

describe('parseCasesCsv', () => {
  it('reads every column: lists split on |, JSON columns parsed, empty cells absent', () => {
    const csv = [
      'input,messages,expected,mustContain,mustNotContain,regex,expectedSources,jsonSchema,rubric,tags',
      'Refund window?,,30 days,30 days| refund ,60 days,/30\\s+days/i,src_1|Refund policy,"{""type"":""object""}",Be precise.,a|b',
      ',"[{""role"":""user"",""content"":""Hi""}]",,,,,,,,',
    ].join('\r\n');
    expect(parseCasesCsv(csv).cases).toEqual([
      {
        input: 'Refund window?',
        expected: '30 days',
        mustContain: ['30 days', 'refund'],
        mustNotContain: ['60 days'],
        regex: '/30\\s+days/i',
        expectedSources: ['src_1', 'Refund policy'],
        jsonSchema: { type: 'object' },
        rubric: 'Be precise.',
        tags: ['a', 'b'],
      },
      { messages: [{ role: 'user', content: 'Hi' }] },
    ]);
  });

  it('reads \\| as a pipe and \\\\ as a backslash in lists, other backslashes as written, empty items dropped', () => {
    const csv = 'input,mustContain\nq,a\\|b|C:\\docs|x\\\\y||  |\n';
    expect(parseCasesCsv(csv).cases).toEqual([{ input: 'q', mustContain: ['a|b', 'C:\\docs', 'x\\y'] }]);
  });

  it('takes columns in any order and case, semicolons or tabs, a BOM, and skips blank rows', () => {
    expect(parseCasesCsv('\uFEFFTags;INPUT\r\nx|y;"a; b"\r\n;\r\n\r\n').cases).toEqual([{ input: 'a; b', tags: ['x', 'y'] }]);
    expect(parseCasesCsv('expected\tinput\n4\t2+2?\n').cases).toEqual([{ input: '2+2?', expected: '4' }]);
  });

  it('takes the leading quote off a neutralised formula cell', () => {
    const csv = "input,expected,mustContain\n'=SUM(A1:A3),'-5,'+1|=2\n'plain,''=x,'@a\n";
    expect(parseCasesCsv(csv).cases).toEqual([
      { input: '=SUM(A1:A3)', expected: '-5', mustContain: ['+1', '=2'] },
      { input: "'plain", expected: "'=x", mustContain: ['@a'] },
    ]);
  });

  it('rejects unknown and repeated columns, and a header without input or messages', () => {
    expect(validationError(() => parseCasesCsv('input,answer\nq,a\n')).errors).toEqual([
      { path: 'columns', message: expect.stringMatching(/^row 1: unknown column "answer" \(column 2\); the columns are input, messages,/) },
    ]);
    expect(validationError(() => parseCasesCsv('input,Input\nq,a\n')).errors).toEqual([{ path: 'columns', message: 'row 1: column "input" appears twice' }]);
    expect(validationError(() => parseCasesCsv('expected,tags\na,b\n')).errors).toEqual([
      { path: 'columns', message: 'row 1: the header needs an "input" or a "messages" column' },
    ]);
    expect(validationError(() => parseCasesCsv('')).errors?.[0]?.path).toBe('columns');
  });

  it('names the spreadsheet row and the field of a bad cell', () => {
    const csv = 'input,regex,jsonSchema,messages\nok,,,\n\nq,(,,\nq,,{not json},\n,,,"[{""role"":""assistant"",""content"":""a""}]"\n';
    const error = validationError(() => parseCasesCsv(csv));
    expect(error.errors).toEqual([
      { path: 'cases.1.regex', message: expect.stringMatching(/^row 4: must compile: /) },
      { path: 'cases.2.jsonSchema', message: expect.stringMatching(/^row 5: not valid JSON \(/) },
      { path: 'cases.3.messages.0.role', message: "row 6: the last message must be the user's" },
    ]);
  });

  it('rejects cells beyond the header and values under an unnamed column, but allows empty unnamed columns', () => {
    expect(parseCasesCsv('input,\nq,\n').cases).toEqual([{ input: 'q' }]);
    const error = validationError(() => parseCasesCsv('input,\nq,x\nhello, world\n'));
    expect(error.errors).toEqual([
      { path: 'cases.0', message: 'row 2: a value in column 2, which has no header (quote cells that hold the delimiter)' },
      { path: 'cases.1', message: 'row 3: a value in column 2, which has no header (quote cells that hold the delimiter)' },
    ]);
    expect(validationError(() => parseCasesCsv('input\n"hello, world",x\n')).errors?.[0]?.message).toMatch(/^row 2: more cells than the header has columns/);
  });

  it('reports an unreadable CSV, and holds to maxCases', () => {
    expect(validationError(() => parseCasesCsv('input\n"unclosed\n')).message).toMatch(/the CSV could not be read/);
    expect(validationError(() => parseCasesCsv('input\na\nb\nc\n', { maxCases: 2 })).errors).toEqual([
      { path: 'cases', message: 'row 4: more than 2 cases; split the file' },
    ]);
    expect(validationError(() => parseCasesCsv('input\n\n')).errors).toEqual([{ path: 'cases', message: 'the file holds no cases' }]);
  });
});

describe('export', () => {
  const cases: EvalCase[] = [
    { input: '=HYPERLINK("http://evil","x")', expected: '-1', mustContain: ['@a', 'b|c'], tags: ['+t'] },
    { messages: [{ role: 'user', content: 'a, "quoted"\nline' }], regex: '/x/i', jsonSchema: { type: 'string' }, rubric: "'=kept" },
  ];

  it('writes the header and every column, neutralising formula cells', () => {
    const csv = casesToCsv(cases);
    const lines = csv.split('\r\n');
    expect(lines[0]).toBe('input,messages,expected,mustContain,mustNotContain,regex,expectedSources,jsonSchema,rubric,tags');
    expect(lines[1]).toBe(`"'=HYPERLINK(""http://evil"",""x"")",,'-1,'@a|b\\|c,,,,,,'+t`);
    expect(lines[2]).toBe(`,"[{""role"":""user"",""content"":""a, \\""quoted\\""\\nline""}]",,,,/x/i,,"{""type"":""string""}",''=kept,`);
    expect(lines[3]).toBe('');
    expect(lines).toHaveLength(4);
    // No cell starts with a formula character.
    for (const line of lines) for (const cell of line.split(',')) expect(cell).not.toMatch(/^"?[=+\-@\t\r]/);
    expect(casesToCsv([])).toBe('input,messages,expected,mustContain,mustNotContain,regex,expectedSources,jsonSchema,rubric,tags\r\n');
  });

  it('writes JSONL one canonical case a line', () => {
    expect(casesToJsonl([{ tags: ['x'], input: 'q', mustContain: [] }, { input: 'r' }])).toBe('{"input":"q","tags":["x"]}\n{"input":"r"}\n');
    expect(casesToJsonl([])).toBe('');
  });

  it('reads back what it writes', () => {
    expect(parseCasesCsv(casesToCsv(cases)).cases).toEqual(cases);
    expect(parseCasesJsonl(casesToJsonl(cases)).cases).toEqual(cases);
  });
});

describe('export → import (property)', () => {
  // Characters that CSV, the list encoding and the formula neutralising treat specially, and others.
  const tricky = fc.constantFrom('a', 'Z', ' ', '=', '+', '-', '@', '\t', '\r', '\n', '\r\n', '|', '\\', "'", '"', ',', ';', '{', 'é', '😀', '\u2028', '\ud800');
  const str = (max: number) => fc.oneof(fc.string({ unit: tricky, maxLength: max }), fc.string({ unit: 'binary', maxLength: max }));
  const text = str(40).filter((s) => s.trim() !== '');
  const items = fc.array(text, { maxLength: 4 });
  const regex = fc.constantFrom('a+b', '/^x$/im', '/\\d{2,}/u', '^[=+-]', '"|,', '/a\\/b/s');
  const schema = fc.constantFrom<Record<string, unknown>>(
    {},
    { type: 'object', required: ['a'], properties: { a: { type: 'integer' } } },
    { $schema: 'http://json-schema.org/draft-07/schema#', type: 'array', items: { enum: ['=x', '|', "'-"] } },
  );
  const message = fc.record({ role: fc.constantFrom('user' as const, 'assistant' as const), content: text });
  const conversation = fc.array(message, { minLength: 0, maxLength: 3 }).chain((head) => text.map((last) => [...head, { role: 'user' as const, content: last }]));
  const evalCase = fc
    .record(
      {
        question: fc.oneof(text.map((input) => ({ input })), conversation.map((messages) => ({ messages }))),
        expected: text,
        mustContain: items,
        mustNotContain: items,
        regex,
        expectedSources: items,
        jsonSchema: schema,
        rubric: text,
        tags: items,
      },
      { requiredKeys: ['question'] },
    )
    .map(({ question, ...rest }) => ({ ...question, ...rest }))
    .map((raw) => evalCaseSchema.safeParse(raw))
    .filter((parsed) => parsed.success)
    .map((parsed) => canonicalCase(parsed.data as EvalCase));

  // A lone surrogate has no UTF-8 form, so a CSV (text parsed as bytes) cannot hold one: it reads
  // back as U+FFFD. JSONL escapes it (\ud800) and keeps it. No case holds a NUL: an import refuses
  // one (PostgreSQL text cannot hold it), as the JSON body of POST /datasets does.
  const strings = (value: unknown): string[] =>
    typeof value === 'string' ? [value] : typeof value === 'object' && value !== null ? Object.values(value).flatMap(strings) : [];
  const noNul = (c: EvalCase): boolean => strings(c).every((s) => !s.includes('\0'));
  const wellFormed = (c: EvalCase): boolean => noNul(c) && strings(c).every((s) => !/[\ud800-\udfff]/u.test(s));

  it('CSV gives back the same cases', () => {
    fc.assert(
      fc.property(fc.array(evalCase.filter(wellFormed), { minLength: 1, maxLength: 5 }), (cases) => {
        expect(parseCasesCsv(casesToCsv(cases)).cases).toEqual(cases);
      }),
      { numRuns: 300 },
    );
  });

  it('JSONL gives back the same cases', () => {
    fc.assert(
      fc.property(fc.array(evalCase.filter(noNul), { minLength: 1, maxLength: 5 }), (cases) => {
        expect(parseCasesJsonl(casesToJsonl(cases)).cases).toEqual(cases);
      }),
      { numRuns: 300 },
    );
  });
});
