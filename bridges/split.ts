/**
 * Splits a long message into parts no longer than a platform's limit, without leaving a code block
 * open: when a cut falls inside a ``` (or ~~~) block, the part is closed with the fence and the next
 * part reopens it with the same opening line (language tag included). Shared by the bridges.
 *
 * Cuts prefer, in order: a blank line, a line break, a space (each only when it keeps the part at
 * least a third full), and otherwise a hard cut that never splits a surrogate pair. The whitespace
 * at a cut is dropped. Every part is at most `limit` characters (UTF-16 code units, as
 * `String#length` counts them).
 */

const FENCE_LINE = /^ {0,3}(`{3,}|~{3,})(.*)$/;
/** A reopened fence line longer than this loses its info string (it would eat the budget). */
const MAX_REOPEN = 24;

export function splitMessage(text: string, limit: number): string[] {
  if (!Number.isInteger(limit) || limit < 16) throw new RangeError(`splitMessage: limit must be an integer >= 16 (got ${limit})`);
  if (text.length <= limit) return [text];
  const closeReserve = 1 + longestFence(text);
  const parts: string[] = [];
  let rest = text;
  let open: string | null = null;
  while (rest.length > 0) {
    const prefix = open === null ? '' : `${open}\n`;
    if (prefix.length + rest.length <= limit) {
      parts.push(prefix + rest);
      break;
    }
    const budget = Math.max(1, limit - prefix.length - closeReserve);
    const { at, skip } = chooseCut(rest, budget);
    const chunk = rest.slice(0, at);
    rest = rest.slice(at + skip);
    const state = fenceStateAfter(chunk, open);
    const closing = state === null ? '' : `\n${fenceMarker(state)}`;
    parts.push(prefix + chunk + closing);
    open = state === null ? null : state.length > MAX_REOPEN ? fenceMarker(state) : state;
    if (open === null) rest = rest.replace(/^\s+/, '');
  }
  return parts.filter((part) => part.trim().length > 0);
}

/** Where to cut `rest` so the chunk before the cut is at most `budget` long; `skip` characters are dropped. */
function chooseCut(rest: string, budget: number): { at: number; skip: number } {
  const window = rest.slice(0, budget + 1);
  const paragraph = window.lastIndexOf('\n\n');
  if (paragraph >= budget / 2) return { at: paragraph, skip: 2 };
  const line = window.lastIndexOf('\n');
  if (line >= budget / 3) return { at: line, skip: 1 };
  const space = window.lastIndexOf(' ');
  if (space >= budget / 3) return { at: space, skip: 1 };
  let at = budget;
  const code = rest.charCodeAt(at - 1);
  if (code >= 0xd800 && code <= 0xdbff && at > 1) at -= 1;
  return { at, skip: 0 };
}

/** The fence line still open after `chunk`, given the one open before it (null = none). */
export function fenceStateAfter(chunk: string, open: string | null): string | null {
  let state = open;
  for (const line of chunk.split('\n')) {
    const match = FENCE_LINE.exec(line);
    if (!match) continue;
    const marker = match[1] ?? '';
    if (state === null) {
      state = line.trim();
    } else {
      const openMarker = fenceMarker(state);
      if (marker[0] === openMarker[0] && marker.length >= openMarker.length && (match[2] ?? '').trim() === '') state = null;
    }
  }
  return state;
}

/** The backticks or tildes of a fence line (```` ```ts ```` → ```` ``` ````). */
function fenceMarker(fenceLine: string): string {
  return /^(`{3,}|~{3,})/.exec(fenceLine.trim())?.[1] ?? '```';
}

function longestFence(text: string): number {
  let longest = 3;
  for (const match of text.matchAll(/^ {0,3}(`{3,}|~{3,})/gm)) longest = Math.max(longest, match[1]?.length ?? 3);
  return longest;
}
