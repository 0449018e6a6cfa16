import { BlockList, cleanInline, cleanVerbatim, decodeText, type Extracted, HeadingTrail } from './common.js';
import { stripInline } from './markdown-inline.js';

// A small line-based reader, not a CommonMark implementation. Every regex is anchored at the start of
// a line and has no nested quantifiers, so the cost stays linear in the input.
const ATX = /^ {0,3}(#{1,6})(?=[ \t]|$)/;
const SETEXT = /^ {0,3}(=+|-+)[ \t]*$/;
const FENCE = /^[ \t]*(`{3,}|~{3,})/;
const QUOTE = /^ {0,3}>/;
const LIST_ITEM = /^[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]+|$)/;
const TASK_BOX = /^\[[ xX]\][ \t]+/;
const INDENTED = /^(?: {4}|\t)/;
const LINK_DEFINITION = /^ {0,3}\[[^\]]{1,999}\]:[ \t]/;
const DELIMITER_CELL = /^:?-+:?$/;
const ESCAPED_PIPE = '\uE07C';

type Pending = 'paragraph' | 'item' | 'quote';

/**
 * Markdown: ATX and setext headings set the heading path; paragraphs, blockquotes and each list item
 * (nested items too) are one block; fenced and indented code is one verbatim block; a table row is one
 * block, cells joined by " | ". YAML front matter is dropped; its `title:` becomes the title.
 */
export function extractMarkdown(data: Uint8Array): Extracted {
  const lines = decodeText(data).split('\n');
  const { title, bodyStart } = readFrontMatter(lines);
  const blocks = new BlockList();
  const trail = new HeadingTrail();
  let pending: string[] = [];
  let pendingKind = 'paragraph' as Pending; // asserted: `start` changes it, which narrowing cannot see
  let inList = false;

  const flush = (): void => {
    if (pending.length > 0) blocks.add(trail.path(), inline(pending.join('\n')));
    pending = [];
  };
  const start = (kind: Pending, text: string): void => {
    flush();
    pendingKind = kind;
    pending.push(text);
  };

  for (let i = bodyStart; i < lines.length; i++) {
    const line = lines[i] as string;
    if (line.trim() === '') {
      flush();
      continue;
    }

    const fence = FENCE.exec(line);
    if (fence && !(fence[1]?.startsWith('`') && line.slice(fence[0].length).includes('`'))) {
      flush();
      const marker = fence[1] as string;
      const indent = fence[0].length - marker.length;
      const code: string[] = [];
      for (i++; i < lines.length && !isClosingFence(lines[i] as string, marker); i++) {
        code.push(removeIndent(lines[i] as string, indent));
      }
      blocks.add(trail.path(), cleanVerbatim(code.join('\n')));
      continue;
    }

    const atx = ATX.exec(line);
    if (atx) {
      flush();
      inList = false;
      trail.enter((atx[1] as string).length, inline(stripClosingHashes(line.slice(atx[0].length))));
      continue;
    }

    const setext = pending.length > 0 && pendingKind === 'paragraph' ? SETEXT.exec(line) : null;
    if (setext) {
      const heading = inline(pending.join('\n'));
      pending = [];
      inList = false;
      trail.enter(setext[1]?.startsWith('=') ? 1 : 2, heading);
      continue;
    }

    if (isThematicBreak(line)) {
      flush();
      continue;
    }

    const next = lines[i + 1];
    if (line.includes('|') && next !== undefined && isDelimiterRow(next)) {
      flush();
      blocks.add(trail.path(), tableRow(line));
      for (i += 2; i < lines.length && (lines[i] as string).includes('|') && (lines[i] as string).trim() !== ''; i++) {
        blocks.add(trail.path(), tableRow(lines[i] as string));
      }
      i--;
      continue;
    }

    if (QUOTE.test(line)) {
      const content = unquote(line);
      if (content.trim() === '') flush();
      else if (pending.length > 0 && pendingKind === 'quote') pending.push(content);
      else start('quote', content);
      continue;
    }

    const item = LIST_ITEM.exec(line);
    if (item) {
      inList = true;
      start('item', line.slice(item[0].length).replace(TASK_BOX, ''));
      continue;
    }

    if (pending.length > 0) {
      pending.push(line); // a lazy continuation of the paragraph, item or quote
      continue;
    }

    if (LINK_DEFINITION.test(line)) continue;

    if (INDENTED.test(line) && !inList) {
      const code: string[] = [];
      for (; i < lines.length && (INDENTED.test(lines[i] as string) || (lines[i] as string).trim() === ''); i++) {
        code.push(removeIndent(lines[i] as string, 4));
      }
      i--;
      blocks.add(trail.path(), cleanVerbatim(code.join('\n')));
      continue;
    }

    if (!/^[ \t]/.test(line)) inList = false;
    start('paragraph', line);
  }
  flush();
  return { title, blocks: blocks.blocks };
}

function inline(markdown: string): string {
  return cleanInline(stripInline(markdown));
}

/** `---` on the first line opens YAML front matter, closed by `---` or `...`; only `title:` is kept. */
function readFrontMatter(lines: string[]): { title: string | null; bodyStart: number } {
  if (lines[0]?.trimEnd() !== '---') return { title: null, bodyStart: 0 };
  let title: string | null = null;
  for (let i = 1; i < lines.length; i++) {
    const line = (lines[i] as string).trimEnd();
    if (line === '---' || line === '...') return { title, bodyStart: i + 1 };
    const field = /^title:[ \t]*(.*)$/.exec(line);
    if (field && title === null) title = cleanInline(unquoteYaml(field[1] as string)) || null;
  }
  return { title: null, bodyStart: 0 }; // never closed: a thematic break, not front matter
}

function unquoteYaml(value: string): string {
  const trimmed = value.trim();
  const quote = trimmed[0];
  if ((quote === '"' || quote === "'") && trimmed.length >= 2 && trimmed.endsWith(quote)) {
    const inner = trimmed.slice(1, -1);
    return quote === "'" ? inner.replaceAll("''", "'") : inner.replace(/\\(["\\])/g, '$1');
  }
  return trimmed;
}

function isClosingFence(line: string, marker: string): boolean {
  const trimmed = line.trim();
  if (trimmed.length < marker.length) return false;
  for (const char of trimmed) if (char !== marker[0]) return false;
  return true;
}

function removeIndent(line: string, indent: number): string {
  let cut = 0;
  while (cut < indent && cut < line.length && (line[cut] === ' ' || line[cut] === '\t')) cut++;
  return line.slice(cut);
}

/** `## Title ##` → `Title`: a closing run of `#` counts only after a space. */
function stripClosingHashes(text: string): string {
  const trimmed = text.trimEnd();
  let end = trimmed.length;
  while (end > 0 && trimmed[end - 1] === '#') end--;
  if (end === 0) return '';
  const before = trimmed[end - 1];
  return end < trimmed.length && (before === ' ' || before === '\t') ? trimmed.slice(0, end) : trimmed;
}

/** Three or more `-`, `*` or `_` (the same one), spaces allowed between. */
function isThematicBreak(line: string): boolean {
  let marker: string | null = null;
  let count = 0;
  for (const char of line) {
    if (char === ' ' || char === '\t') continue;
    if (char !== '-' && char !== '*' && char !== '_') return false;
    if (marker === null) marker = char;
    else if (char !== marker) return false;
    count++;
  }
  return count >= 3;
}

function splitRow(line: string): string[] {
  let row = line.replaceAll('\\|', ESCAPED_PIPE).trim();
  if (row.startsWith('|')) row = row.slice(1);
  if (row.endsWith('|')) row = row.slice(0, -1);
  return row.split('|').map((cell) => cell.replaceAll(ESCAPED_PIPE, '|').trim());
}

function isDelimiterRow(line: string): boolean {
  if (!line.includes('|') || !line.includes('-')) return false;
  return splitRow(line).every((cell) => DELIMITER_CELL.test(cell));
}

function tableRow(line: string): string {
  return splitRow(line)
    .map(inline)
    .filter((cell) => cell !== '')
    .join(' | ');
}

/** Removes every leading `>` marker (nested quotes too) and the space after each. */
function unquote(line: string): string {
  let i = 0;
  for (;;) {
    while (line[i] === ' ') i++;
    if (line[i] !== '>') break;
    i++;
    if (line[i] === ' ') i++;
  }
  return line.slice(i);
}
