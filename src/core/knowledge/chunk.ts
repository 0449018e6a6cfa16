import { estimateTokens, isWideChar, tokensFor, wideChars } from '../../lib/text.js';

/** A unit of extracted text and the headings it sits under (see extract.ts). */
export interface ChunkInput {
  headingPath: string[];
  text: string;
}

export interface Chunk {
  /** 0-based order in the document. */
  position: number;
  text: string;
  headingPath: string[];
  tokens: number;
}

export interface ChunkOptions {
  /** Most tokens in a chunk. */
  maxTokens?: number;
  /** Tokens of the previous chunk's end repeated at the start of the next one in the same section. */
  overlapTokens?: number;
}

export const DEFAULT_CHUNKING: Required<ChunkOptions> = { maxTokens: 400, overlapTokens: 60 };

/** Terminal punctuation, Latin or CJK: a sentence may end after one. */
const TERMINAL = /[.!?…。！？]/g;

const CJK_TERMINAL = new Set(['。', '！', '？']);

/** JS `\s`: the white space a sentence end is followed by. */
function isSpace(c: number): boolean {
  return c === 32 || (c >= 9 && c <= 13) || (c >= 0xa0 && (c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff));
}

const UPPER_OR_NUMBER = /^[\p{Lu}\p{N}]$/u;
/** Per BMP code unit: 0 not yet seen, 1 an upper-case letter or a number, 2 not. */
const BMP_STARTS = new Uint8Array(0x10000);

/** Whether the code point at `at` can start a sentence: an opening quote or bracket, an upper-case letter or a number. */
function startsSentence(text: string, at: number): boolean {
  const c = text.charCodeAt(at);
  if (c < 0x80) return (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 0x22 || c === 0x27 || c === 0x28 || c === 0x5b;
  if (c === 0x201c || c === 0x2018) return true;
  if (c >= 0xd800 && c <= 0xdbff && at + 1 < text.length && (text.charCodeAt(at + 1) & 0xfc00) === 0xdc00) {
    return UPPER_OR_NUMBER.test(text.slice(at, at + 2));
  }
  let kind = BMP_STARTS[c]!;
  if (kind === 0) BMP_STARTS[c] = kind = UPPER_OR_NUMBER.test(String.fromCharCode(c)) ? 1 : 2;
  return kind === 1;
}

/**
 * Sentences: cut after terminal punctuation (Latin or CJK) and the white space after it when
 * something that can start a sentence follows, and right after CJK terminal punctuation. Exactly
 * `text.split(/(?<=[.!?…。！？])\s+(?=["'“‘(\[\p{Lu}\p{N}])|(?<=[。！？])/u)`, trimmed, empty
 * pieces dropped; that regex tried both look-behinds at every position, and on text with any
 * character above U+00FF (a dash, a Greek letter) took ~19 µs for a 1.5 KB abstract, this ~1.
 */
export function splitSentences(text: string): string[] {
  const n = text.length;
  const out: string[] = [];
  let p = 0; // where the current sentence starts
  TERMINAL.lastIndex = 0;
  for (let m = TERMINAL.exec(text); m !== null; m = TERMINAL.exec(text)) {
    const q = m.index + 1; // a cut can only be here, right after the punctuation
    if (q >= n) break;
    let e = q;
    while (e < n && isSpace(text.charCodeAt(e))) e++;
    if (e > q && e < n && startsSentence(text, e)) {
      out.push(text.slice(p, q));
      p = e;
      TERMINAL.lastIndex = e;
    } else if (q > p && CJK_TERMINAL.has(m[0])) {
      // 。！？ end a sentence with nothing after them (the regex's empty cut).
      out.push(text.slice(p, q));
      p = q;
    }
  }
  out.push(text.slice(p));
  return out.map((s) => s.trim()).filter(Boolean);
}

/** A piece of a chunk, with its CJK count and the tokens it adds to a chunk. */
function piece(text: string, paragraph: boolean, wide = wideChars(text)): Piece {
  // Counting the blank line that may join it to the previous piece: the sum over a chunk's pieces
  // then bounds the estimate of the joined text.
  return { text, wide, tokens: tokensFor(text.length + 2, wide), paragraph };
}

/** Windows of at most `max` tokens by characters (whole code points; a CJK character is a token). */
function splitChars(word: string, max: number): string[] {
  const out: string[] = [];
  let start = 0;
  let end = 0;
  let wide = 0;
  let narrow = 0;
  for (const char of word) {
    const w = isWideChar(char) ? 1 : 0;
    const n = w ? 0 : char.length;
    if (end > start && wide + w + Math.ceil((narrow + n) / 4) > max) {
      out.push(word.slice(start, end));
      start = end;
      wide = 0;
      narrow = 0;
    }
    wide += w;
    narrow += n;
    end += char.length;
  }
  if (end > start) out.push(word.slice(start, end));
  return out;
}

/** Word windows of at most `max` tokens, for a sentence too long to keep whole. */
function splitWords(text: string, max: number): string[] {
  const out: string[] = [];
  let current = '';
  for (const word of text.split(/\s+/)) {
    if (!word) continue;
    // A single "word" longer than a chunk (a URL, a base64 blob) is cut by characters.
    if (estimateTokens(word) > max) {
      if (current) out.push(current);
      current = '';
      out.push(...splitChars(word, max));
      continue;
    }
    const next = current ? `${current} ${word}` : word;
    if (current && estimateTokens(next) > max) {
      out.push(current);
      current = word;
    } else {
      current = next;
    }
  }
  if (current) out.push(current);
  return out;
}

interface Piece {
  text: string;
  /** Its CJK characters (`wideChars`): a joined chunk's token estimate is computed from its pieces'. */
  wide: number;
  tokens: number;
  /** Starts a new paragraph (joined with a blank line) rather than continuing one (a space). */
  paragraph: boolean;
}

/** A block as pieces no larger than `max`: whole, else by sentences, else by words. */
function piecesOf(text: string, max: number): Piece[] {
  const wide = wideChars(text);
  if (tokensFor(text.length, wide) <= max) return [piece(text, true, wide)];
  const pieces: Piece[] = [];
  for (const sentence of splitSentences(text)) {
    const sentenceWide = wideChars(sentence);
    if (tokensFor(sentence.length, sentenceWide) <= max) pieces.push(piece(sentence, pieces.length === 0, sentenceWide));
    else for (const p of splitWords(sentence, max)) pieces.push(piece(p, pieces.length === 0));
  }
  return pieces;
}

function join(pieces: Piece[]): string {
  return pieces.map((p, i) => (i === 0 ? p.text : `${p.paragraph ? '\n\n' : ' '}${p.text}`)).join('');
}

/** `estimateTokens(join(pieces))`, from the pieces' counts (the separators are not CJK). */
function joinedTokens(pieces: Piece[], text: string): number {
  let wide = 0;
  for (const p of pieces) wide += p.wide;
  return tokensFor(text.length, wide);
}

/**
 * Packs blocks into chunks of at most `maxTokens`: a chunk never spans two sections (a heading
 * change starts a new one), paragraphs are kept whole when they fit, and a long paragraph is cut
 * between sentences. Consecutive chunks of one section share `overlapTokens` of text, so a fact
 * that straddles a cut is still found whole in one of them.
 */
export function chunkBlocks(blocks: ChunkInput[], options: ChunkOptions = {}): Chunk[] {
  const { maxTokens, overlapTokens } = { ...DEFAULT_CHUNKING, ...options };
  const chunks: Chunk[] = [];
  let section: string[] = [];
  let sectionKey = '[]';
  let current: Piece[] = [];
  let tokens = 0;
  let fresh = 0; // pieces of `current` not carried over as overlap

  const flush = (keepOverlap: boolean) => {
    if (fresh > 0) {
      const text = join(current);
      chunks.push({ position: chunks.length, text, headingPath: section, tokens: joinedTokens(current, text) });
    }
    const carried: Piece[] = [];
    let carriedTokens = 0;
    if (keepOverlap && fresh > 0) {
      for (let i = current.length - 1; i >= 0; i--) {
        const kept = current[i]!;
        if (carriedTokens + kept.tokens > overlapTokens) {
          // Fall back to the piece's last sentences.
          const sentences = splitSentences(kept.text);
          for (let j = sentences.length - 1; j >= 0; j--) {
            // Sentences of one paragraph: joined by a space, not a blank line.
            const sentence = piece(sentences[j]!, false);
            if (carriedTokens + sentence.tokens > overlapTokens) break;
            carried.unshift(sentence);
            carriedTokens += sentence.tokens;
          }
          break;
        }
        carried.unshift(kept);
        carriedTokens += kept.tokens;
      }
    }
    current = carried;
    tokens = carriedTokens;
    fresh = 0;
  };

  for (const block of blocks) {
    const text = block.text.trim();
    if (!text) continue;
    const key = JSON.stringify(block.headingPath);
    if (key !== sectionKey) {
      flush(false);
      section = block.headingPath;
      sectionKey = key;
    }
    for (const next of piecesOf(text, maxTokens)) {
      if (fresh > 0 && tokens + next.tokens > maxTokens) flush(true);
      // The overlap itself may leave no room: drop it rather than exceed the size.
      while (current.length > 0 && tokens + next.tokens > maxTokens) tokens -= current.shift()!.tokens;
      current.push(next);
      tokens += next.tokens;
      fresh++;
    }
  }
  flush(false);
  return chunks;
}
