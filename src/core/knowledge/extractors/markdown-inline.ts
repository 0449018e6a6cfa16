// Markdown inline markup to plain text. Every pass is a single left-to-right scan (or a regex with no
// nested quantifiers), so a megabyte of brackets, backticks or asterisks costs linear time.

// Backslash-escaped punctuation is parked in the Private Use Area so later passes leave it alone.
const ESCAPE_BASE = 0xe000;
const ESCAPED = /\\([!-/:-@[-`{-~])/g;
const PARKED = /[\uE000-\uE07F]/g;
const ANY_PARKED = /[\uE000-\uE07F]/;

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' };
const ENTITY = /&(#\d{1,7}|#[xX][0-9a-fA-F]{1,6}|amp|lt|gt|quot|apos|nbsp);/g;

/**
 * Strips inline markdown: `[text](url)` → text, `![alt](src)` → alt, emphasis and code markers, HTML
 * tags. Each pass runs only when its marker character is there (a fast `includes`), so plain prose
 * is not scanned once per kind of markup.
 */
export function stripInline(text: string): string {
  if (!text.includes('`')) return stripProse(text);
  let out = '';
  let cursor = 0;
  for (const span of codeSpans(text)) {
    out += stripProse(text.slice(cursor, span.open)) + trimCode(text.slice(span.contentStart, span.contentEnd));
    cursor = span.close;
  }
  return out + stripProse(text.slice(cursor));
}

interface CodeSpan {
  open: number;
  contentStart: number;
  contentEnd: number;
  close: number;
}

/** Code spans: a backtick run closed by the next run of the same length; unmatched runs stay literal. */
function codeSpans(text: string): CodeSpan[] {
  const runs: { start: number; end: number }[] = [];
  for (const match of text.matchAll(/`+/g)) runs.push({ start: match.index, end: match.index + match[0].length });
  // For each run, the index of the next run of the same length: one backward pass.
  const nextSame = new Array<number>(runs.length).fill(-1);
  const lastByLength = new Map<number, number>();
  for (let i = runs.length - 1; i >= 0; i--) {
    const run = runs[i] as { start: number; end: number };
    const length = run.end - run.start;
    nextSame[i] = lastByLength.get(length) ?? -1;
    lastByLength.set(length, i);
  }
  const spans: CodeSpan[] = [];
  for (let i = 0; i < runs.length; i++) {
    const closing = nextSame[i] as number;
    if (closing < 0) continue;
    const open = runs[i] as { start: number; end: number };
    const close = runs[closing] as { start: number; end: number };
    spans.push({ open: open.start, contentStart: open.end, contentEnd: close.start, close: close.end });
    i = closing;
  }
  return spans;
}

function trimCode(code: string): string {
  return code.length > 2 && code.startsWith(' ') && code.endsWith(' ') ? code.slice(1, -1) : code;
}

function stripProse(text: string): string {
  if (!text) return text;
  let out = text.includes('\\') ? text.replace(ESCAPED, (_, char: string) => String.fromCharCode(ESCAPE_BASE + char.charCodeAt(0))) : text;
  out = stripTags(out);
  // Two passes unwrap one level of nesting, the common `[![badge](img)](link)`.
  out = stripLinks(stripLinks(out));
  if (out.includes('*') || out.includes('_') || out.includes('~~')) out = stripEmphasis(out);
  if (out.includes('&')) out = out.replace(ENTITY, decodeEntity);
  // Parked escapes, and any character of that range the text held (it is restored the same way).
  return ANY_PARKED.test(out) ? out.replace(PARKED, (char) => String.fromCharCode(char.charCodeAt(0) - ESCAPE_BASE)) : out;
}

/** `text.indexOf(char, from)`, remembering the last answer so that repeated calls with growing `from` stay linear. */
function finder(text: string, char: string): (from: number) => number {
  let found = -1;
  let searchedFrom = Number.POSITIVE_INFINITY;
  return (from) => {
    if (from >= searchedFrom && (found === -1 || found >= from)) return found;
    searchedFrom = from;
    found = text.indexOf(char, from);
    return found;
  };
}

function stripLinks(text: string): string {
  if (!text.includes('[')) return text;
  const nextOpen = finder(text, '[');
  const nextClose = finder(text, ']');
  const nextParen = finder(text, ')');
  const nextLine = finder(text, '\n');
  let out = '';
  let i = 0;
  while (i < text.length) {
    const open = nextOpen(i);
    if (open < 0) break;
    const close = nextClose(open + 1);
    if (close < 0) break;
    const start = text.lastIndexOf('[', close); // the innermost bracket before `close`, never before `open`
    const bang = start > i && text[start - 1] === '!' ? 1 : 0;
    const label = text.slice(start + 1, close);
    const after = text[close + 1];
    let end = -1;
    if (after === '(') {
      // A destination ends at the first ")" and never holds a "[" or a line break.
      const paren = nextParen(close + 2);
      const bracket = nextOpen(close + 2);
      const line = nextLine(close + 2);
      if (paren >= 0 && (bracket < 0 || bracket > paren) && (line < 0 || line > paren)) end = paren;
    } else if (after === '[') {
      const refEnd = nextClose(close + 2);
      if (refEnd >= 0 && !text.slice(close + 2, refEnd).includes('[')) end = refEnd;
    }
    if (end >= 0) {
      out += text.slice(i, start - bang) + label;
      i = end + 1;
    } else {
      out += text.slice(i, close + 1);
      i = close + 1;
    }
  }
  return out + text.slice(i);
}

const MAX_TAG = 300;

/** Drops inline HTML tags and comments; `<https://…>` autolinks keep their address. */
function stripTags(text: string): string {
  if (!text.includes('<')) return text;
  let out = '';
  let i = 0;
  let from = 0;
  while (from < text.length) {
    const lt = text.indexOf('<', from);
    if (lt < 0) break;
    const next = text[lt + 1] ?? '';
    let gt = -1;
    if (/[A-Za-z/!?]/.test(next)) {
      const limit = Math.min(text.length, lt + MAX_TAG);
      for (let k = lt + 1; k < limit; k++) {
        const char = text[k];
        if (char === '>') {
          gt = k;
          break;
        }
        if (char === '<') break;
      }
    }
    if (gt < 0) {
      from = lt + 1;
      continue;
    }
    const inside = text.slice(lt + 1, gt);
    const keep = /^[A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*$/.test(inside) || /^[^\s@<>]+@[^\s@<>]+\.[^\s@<>]+$/.test(inside);
    out += text.slice(i, lt) + (keep ? inside : /^br\b/i.test(inside) ? ' ' : '');
    i = gt + 1;
    from = i;
  }
  return out + text.slice(i);
}

const WORD = /[\p{L}\p{N}]/u;
const SPACE = /\s/;

/**
 * Removes `*`, `_` and `~~` runs that open or close emphasis. A run between two word characters
 * (`snake_case`, `a*b`) or between two spaces (`2 * 3`) is not emphasis and stays.
 */
function stripEmphasis(text: string): string {
  return text.replace(/\*+|_+|~~+/g, (run: string, offset: number) => {
    const before = text[offset - 1];
    const after = text[offset + run.length];
    const spaceBefore = before === undefined || SPACE.test(before);
    const spaceAfter = after === undefined || SPACE.test(after);
    if (spaceBefore && spaceAfter) return run;
    if (before !== undefined && after !== undefined && WORD.test(before) && WORD.test(after)) return run;
    return '';
  });
}

function decodeEntity(entity: string, name: string): string {
  if (name.startsWith('#')) {
    const code = name[1] === 'x' || name[1] === 'X' ? Number.parseInt(name.slice(2), 16) : Number.parseInt(name.slice(1), 10);
    return code > 0 && code <= 0x10ffff && (code < 0xd800 || code > 0xdfff) ? String.fromCodePoint(code) : entity;
  }
  return ENTITIES[name.toLowerCase()] ?? entity;
}
