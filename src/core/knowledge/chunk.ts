import { estimateTokens, isWideChar } from '../../lib/text.js';

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

/** Sentence ends: terminal punctuation (Latin or CJK), then space before something that can start a sentence. */
const SENTENCE_END = /(?<=[.!?…。！？])\s+(?=["'“‘(\[\p{Lu}\p{N}])|(?<=[。！？])/u;

function splitSentences(text: string): string[] {
  return text.split(SENTENCE_END).map((s) => s.trim()).filter(Boolean);
}

/**
 * Tokens a piece adds to a chunk, counting the blank line that may join it to the previous piece:
 * the sum over a chunk's pieces then bounds the estimate of the joined text.
 */
function packedTokens(text: string): number {
  return estimateTokens(`\n\n${text}`);
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
  tokens: number;
  /** Starts a new paragraph (joined with a blank line) rather than continuing one (a space). */
  paragraph: boolean;
}

/** A block as pieces no larger than `max`: whole, else by sentences, else by words. */
function piecesOf(text: string, max: number): Piece[] {
  const tokens = estimateTokens(text);
  if (tokens <= max) return [{ text, tokens: packedTokens(text), paragraph: true }];
  const pieces: Piece[] = [];
  for (const sentence of splitSentences(text)) {
    const parts = estimateTokens(sentence) <= max ? [sentence] : splitWords(sentence, max);
    for (const p of parts) pieces.push({ text: p, tokens: packedTokens(p), paragraph: pieces.length === 0 });
  }
  return pieces;
}

function join(pieces: Piece[]): string {
  return pieces.map((p, i) => (i === 0 ? p.text : `${p.paragraph ? '\n\n' : ' '}${p.text}`)).join('');
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
      chunks.push({ position: chunks.length, text, headingPath: section, tokens: estimateTokens(text) });
    }
    const carried: Piece[] = [];
    let carriedTokens = 0;
    if (keepOverlap && fresh > 0) {
      for (let i = current.length - 1; i >= 0; i--) {
        const piece = current[i]!;
        if (carriedTokens + piece.tokens > overlapTokens) {
          // Fall back to the piece's last sentences.
          const sentences = splitSentences(piece.text);
          for (let j = sentences.length - 1; j >= 0; j--) {
            const t = packedTokens(sentences[j]!);
            if (carriedTokens + t > overlapTokens) break;
            // Sentences of one paragraph: joined by a space, not a blank line.
            carried.unshift({ text: sentences[j]!, tokens: t, paragraph: false });
            carriedTokens += t;
          }
          break;
        }
        carried.unshift(piece);
        carriedTokens += piece.tokens;
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
    for (const piece of piecesOf(text, maxTokens)) {
      if (fresh > 0 && tokens + piece.tokens > maxTokens) flush(true);
      // The overlap itself may leave no room: drop it rather than exceed the size.
      while (current.length > 0 && tokens + piece.tokens > maxTokens) tokens -= current.shift()!.tokens;
      current.push(piece);
      tokens += piece.tokens;
      fresh++;
    }
  }
  flush(false);
  return chunks;
}
