import { type Embedder, normalize } from './embedder.js';
import { STOPWORDS } from '../lib/text.js';

/** Default vector length of the offline embedder: a multiple of 32 so the binary quantization packs into whole words. */
export const HASHED_DIMENSION = 384;

/**
 * How much each feature family weighs after each is normalised on its own, so a long text's many
 * character n-grams do not drown its words. Words carry the meaning, bigrams the phrasing, and
 * character n-grams catch inflections and compounds ("biomaterial" ~ "biomaterials").
 */
const WEIGHTS = { word: 1, bigram: 0.5, char: 0.6 };
const MIN_GRAM = 3;
const MAX_GRAM = 5;

const PRIME = 16777619;
const SEED = { word: 2166136261 | 0, bigram: 0x9e3779b9 | 0, char: 0x85ebca6b | 0 };
const LT = '<'.charCodeAt(0);
const GT = '>'.charCodeAt(0);

/** FNV-1a over a string's UTF-16 units, from a seed so the families hash apart. */
function fnv1a(text: string, seed: number): number {
  let h = seed;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), PRIME);
  return h >>> 0;
}

/** Stop words by their word hash: a hit is confirmed against the word itself (hashes may collide). */
const STOPWORD_HASHES = new Map([...STOPWORDS].map((w) => [fnv1a(w, SEED.word), w]));
/** The low 12 bits of the stop words' hashes: most words are looked up in no map at all (a hash above 2^30 is a heap number there). */
const STOPWORD_BITS = new Uint8Array(4096);
for (const hash of STOPWORD_HASHES.keys()) STOPWORD_BITS[hash & 4095] = 1;

/** 1 + ln(count) for the counts a bucket usually holds; Math.log per bucket was a tenth of the time. */
const SUBLINEAR = Float32Array.from({ length: 256 }, (_, c) => (c === 0 ? 0 : 1 + Math.log(c)));
const sublinear = (c: number) => (c < 256 ? SUBLINEAR[c]! : 1 + Math.log(c));

/**
 * Signed feature hashing into `2 × dim` counters (one per bucket and sign), so colliding features
 * cancel out on average instead of piling up; sublinear TF is applied per bucket and sign.
 */
class Family {
  readonly counts: Uint16Array;
  private readonly values: Float32Array;
  private readonly inverse: number;
  constructor(readonly dim: number) {
    this.counts = new Uint16Array(dim * 2);
    this.values = new Float32Array(dim);
    this.inverse = 1 / dim;
  }
  /** Counts a feature by its 32-bit hash (as a signed int). */
  add(hash: number) {
    // Low bits pick the bucket (unsigned hash mod dim), the top bit the sign: independent enough for
    // FNV-1a. The modulo goes through a multiply by 1/dim, corrected by one either way: `%` on a
    // uint32 above 2^31 is a floating-point remainder, a library call, per feature.
    const { dim } = this;
    const u = hash >>> 0;
    let bucket = u - Math.floor(u * this.inverse) * dim;
    if (bucket < 0) bucket += dim;
    else if (bucket >= dim) bucket -= dim;
    const slot = bucket * 2 + (hash < 0 ? 1 : 0);
    if (this.counts[slot]! < 65535) this.counts[slot]!++;
    return slot;
  }
  /** Adds this family, normalised and weighted, into `out`; clears the counters. */
  drainInto(out: Float32Array, weight: number) {
    const { counts, dim, values } = this;
    values.fill(0);
    let sum = 0;
    for (let b = 0; b < dim; b++) {
      const pos = counts[2 * b]!;
      const neg = counts[2 * b + 1]!;
      if (pos === 0 && neg === 0) continue;
      const v = sublinear(pos) - sublinear(neg);
      values[b] = v;
      sum += v * v;
    }
    counts.fill(0);
    if (sum === 0) return;
    const scale = weight / Math.sqrt(sum);
    for (let b = 0; b < dim; b++) out[b]! += values[b]! * scale;
  }
}

interface Families {
  words: Family;
  bigrams: Family;
  chars: Family;
  memo: WordMemo;
}

/** Words the memo holds at most (a table of twice as many entries), their units and their n-gram counters. */
const MEMO_WORDS = 1 << 14;
const MEMO_UNITS = 1 << 18;
const MEMO_SLOTS = 1 << 18;
/** Longest word remembered, in UTF-16 units. */
const MEMO_LONGEST = 40;

/**
 * The character n-gram counters of the words seen lately: a word met again (most are: a text
 * repeats its words, and a language's common words fill every text) adds to the same counters
 * without hashing its n-grams again (SciFact chunk texts: ~78 → ~61 µs each). An open-addressed
 * table keyed by the word's hash and confirmed against its units, emptied whole when full; ~2 MB a
 * dimension. Counting is order-free, so what it holds never changes a vector.
 */
class WordMemo {
  private readonly keys = new Int32Array(2 * MEMO_WORDS);
  /** 0: an empty entry (no word is empty). */
  private readonly lengths = new Uint8Array(2 * MEMO_WORDS);
  private readonly unitStart = new Int32Array(2 * MEMO_WORDS);
  private readonly slotStart = new Int32Array(2 * MEMO_WORDS);
  private readonly slotEnd = new Int32Array(2 * MEMO_WORDS);
  private readonly units = new Uint16Array(MEMO_UNITS);
  private readonly slots = new Int32Array(MEMO_SLOTS);
  private words = 0;
  private unitsUsed = 0;
  private slotsUsed = 0;

  /** The entry holding the word in `unit[1..length]` (hash `hash`), or -1. */
  find(hash: number, length: number): number {
    const mask = 2 * MEMO_WORDS - 1;
    for (let at = (hash ^ (hash >>> 15)) & mask; ; at = (at + 1) & mask) {
      const l = this.lengths[at]!;
      if (l === 0) return -1;
      if (l === length && this.keys[at] === hash) {
        const from = this.unitStart[at]! - 1;
        let k = 1;
        while (k <= length && this.units[from + k] === unit[k]) k++;
        if (k > length) return at;
      }
    }
  }

  /** Counts the n-grams of entry `at` again. */
  replay(at: number, chars: Family) {
    const { counts } = chars;
    for (let k = this.slotStart[at]!, end = this.slotEnd[at]!; k < end; k++) {
      const slot = this.slots[k]!;
      if (counts[slot]! < 65535) counts[slot]!++;
    }
  }

  /** Remembers the word in `unit[1..length]` and the counters of its n-grams (`slots[0..count)`). */
  remember(hash: number, length: number, slots: Int32Array, count: number) {
    if (this.words >= MEMO_WORDS || this.unitsUsed + length > MEMO_UNITS || this.slotsUsed + count > MEMO_SLOTS) this.clear();
    const mask = 2 * MEMO_WORDS - 1;
    let at = (hash ^ (hash >>> 15)) & mask;
    while (this.lengths[at] !== 0) at = (at + 1) & mask;
    this.keys[at] = hash;
    this.lengths[at] = length;
    this.unitStart[at] = this.unitsUsed;
    this.units.set(unit.subarray(1, length + 1), this.unitsUsed);
    this.unitsUsed += length;
    this.slotStart[at] = this.slotsUsed;
    this.slots.set(slots.subarray(0, count), this.slotsUsed);
    this.slotsUsed += count;
    this.slotEnd[at] = this.slotsUsed;
    this.words++;
  }

  private clear() {
    this.lengths.fill(0);
    this.words = 0;
    this.unitsUsed = 0;
    this.slotsUsed = 0;
  }
}

/**
 * The word being hashed as UTF-16 units, framed as "<word>" for the character n-grams: the word is
 * at 1..length. Reused across words and calls (embedding is synchronous), grown for long words.
 */
let unit = new Uint16Array(256);
/** The counters of the current word's character n-grams, as counted (for the memo); three a unit at most. */
let gramSlots = new Int32Array(3 * 256);

/**
 * Counts one word (`length` units in `unit` from 1) and returns its bigram hash for the next word,
 * or -1 for a stop word (which breaks the bigram chain). `previous` is the last word's, or -1.
 */
function addWord(f: Families, length: number, previous: number): number {
  const u = unit;
  let wordHash = SEED.word;
  let bigramHash = SEED.bigram;
  for (let i = 1; i <= length; i++) {
    const c = u[i]!;
    wordHash = Math.imul(wordHash ^ c, PRIME);
    bigramHash = Math.imul(bigramHash ^ c, PRIME);
  }
  if (STOPWORD_BITS[wordHash & 4095] === 1) {
    const stopword = STOPWORD_HASHES.get(wordHash >>> 0);
    if (stopword !== undefined && sameWord(stopword, length)) return -1;
  }
  f.words.add(wordHash);
  if (previous !== -1) f.bigrams.add(Math.imul(previous ^ wordHash, PRIME));
  const { chars, memo } = f;
  const remembered = length <= MEMO_LONGEST;
  if (remembered) {
    const at = memo.find(wordHash, length);
    if (at !== -1) {
      memo.replay(at, chars);
      return bigramHash >>> 0;
    }
  }
  // Character n-grams of "<word>", hashed incrementally: one pass per start position covers every
  // size (3, 4 and 5 from the same prefix), unrolled where all three fit.
  const framed = length + 2;
  u[0] = LT;
  u[framed - 1] = GT;
  const slots = gramSlots;
  let n = 0;
  let i = 0;
  for (; i + MAX_GRAM <= framed; i++) {
    const h3 = Math.imul(Math.imul(Math.imul(SEED.char ^ u[i]!, PRIME) ^ u[i + 1]!, PRIME) ^ u[i + 2]!, PRIME);
    slots[n++] = chars.add(Math.imul(h3 ^ 3, PRIME));
    const h4 = Math.imul(h3 ^ u[i + 3]!, PRIME);
    slots[n++] = chars.add(Math.imul(h4 ^ 4, PRIME));
    slots[n++] = chars.add(Math.imul(Math.imul(h4 ^ u[i + 4]!, PRIME) ^ 5, PRIME));
  }
  for (; i + MIN_GRAM <= framed; i++) {
    let h = SEED.char;
    for (let j = i; j < framed; j++) {
      h = Math.imul(h ^ u[j]!, PRIME);
      if (j - i + 1 >= MIN_GRAM) slots[n++] = chars.add(Math.imul(h ^ (j - i + 1), PRIME));
    }
  }
  if (remembered) memo.remember(wordHash, length, slots, n);
  return bigramHash >>> 0;
}

function sameWord(word: string, length: number): boolean {
  if (word.length !== length) return false;
  for (let i = 0; i < length; i++) if (word.charCodeAt(i) !== unit[i + 1]) return false;
  return true;
}

function reserve(length: number) {
  if (length + 2 > unit.length) {
    const grown = new Uint16Array(Math.max(length + 2, unit.length * 2));
    grown.set(unit);
    unit = grown;
    gramSlots = new Int32Array(3 * unit.length);
  }
}

/** ASCII letters and digits: the words of `wordsOf` (lib/text.ts) in ASCII text, where it only lower-cases. */
const ASCII_WORD = Uint8Array.from({ length: 128 }, (_, c) => (/[A-Za-z0-9]/.test(String.fromCharCode(c)) ? 1 : 0));
const NON_ASCII_FROM = /[^\x00-\x7f]/g;

/** Whether a code point is a letter or a number (`\p{L}\p{N}`, as `wordsOf` matches), cached for the BMP. */
const LETTER_OR_NUMBER = /^[\p{L}\p{N}]$/u;
const bmpClass = new Uint8Array(65536); // 0 unknown, 1 word, 2 not
const astralClass = new Map<number, boolean>();
function isWordCodePoint(cp: number): boolean {
  if (cp < 0x10000) {
    let c = bmpClass[cp]!;
    if (c === 0) bmpClass[cp] = c = LETTER_OR_NUMBER.test(String.fromCharCode(cp)) ? 1 : 2;
    return c === 1;
  }
  let w = astralClass.get(cp);
  if (w === undefined) astralClass.set(cp, (w = LETTER_OR_NUMBER.test(String.fromCodePoint(cp))));
  return w;
}

/**
 * Hashes the words of `text[start, end)`, all ASCII: runs of letters and digits, lower-cased on the
 * way. `previous` is the bigram state before it; returns the state after.
 */
function addAscii(f: Families, text: string, start: number, end: number, previous: number): number {
  let i = start;
  while (i < end) {
    if (ASCII_WORD[text.charCodeAt(i)] === 0) {
      i++;
      continue;
    }
    const from = i;
    while (i < end && ASCII_WORD[text.charCodeAt(i)] === 1) i++;
    const length = i - from;
    reserve(length);
    const u = unit;
    for (let k = 0; k < length; k++) {
      const c = text.charCodeAt(from + k);
      u[k + 1] = c >= 65 && c <= 90 ? c | 0x20 : c;
    }
    previous = addWord(f, length, previous);
  }
  return previous;
}

const COMBINING_MARKS = /\p{M}+/gu;

/**
 * Hashes the words of any text exactly as `wordsOf` splits it (NFKD, marks dropped, lower case,
 * letter and number runs), from the bigram state `previous`; returns the state after.
 */
function addNormalized(f: Families, raw: string, previous: number): number {
  const text = raw.normalize('NFKD').replace(COMBINING_MARKS, '').toLowerCase();
  const n = text.length;
  let length = 0;
  let i = 0;
  while (i <= n) {
    let word = false;
    let units = 1;
    if (i < n) {
      const c = text.charCodeAt(i);
      if (c < 128) word = ASCII_WORD[c] === 1;
      else if (c >= 0xd800 && c <= 0xdbff && i + 1 < n && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
        units = 2;
        word = isWordCodePoint(((c - 0xd800) << 10) + (text.charCodeAt(i + 1) - 0xdc00) + 0x10000);
      } else word = isWordCodePoint(c);
    }
    if (word) {
      reserve(length + units);
      unit[length + 1] = text.charCodeAt(i);
      if (units === 2) unit[length + 2] = text.charCodeAt(i + 1);
      length += units;
    } else if (length > 0) {
      previous = addWord(f, length, previous);
      length = 0;
    }
    i += units;
  }
  return previous;
}

/**
 * ASCII whitespace. NFKD, dropping marks and lower-casing never act across it (a mark reorders only
 * among marks, and the final-sigma rule of lower-casing looks through case-ignorable characters
 * only), and it is never part of a word: text cut at it and treated piece by piece hashes as it would whole.
 */
const isBlank = (c: number) => c === 32 || (c >= 9 && c <= 13);

/** Past this many all-ASCII units after a non-ASCII word, the ASCII fast path takes over again. */
const ASCII_STRETCH = 32;

/**
 * Hashes the words of any text. Real text is mostly ASCII with a few other characters (a dash, µ,
 * ±, an accented name, the " › " of a chunk's title), and normalising all of it for them cost a
 * third of the embedding (SciFact chunks: 117 → 97 µs each as pure ASCII): so only the
 * blank-delimited stretches holding non-ASCII characters are normalised, and the rest takes the
 * ASCII path.
 */
function addText(f: Families, text: string) {
  const n = text.length;
  let previous = -1;
  let at = 0;
  while (at < n) {
    NON_ASCII_FROM.lastIndex = at;
    const found = NON_ASCII_FROM.exec(text);
    if (found === null) {
      addAscii(f, text, at, n, previous);
      return;
    }
    // From the blank before the first non-ASCII unit to the first blank after the last one that
    // ASCII_STRETCH or more all-ASCII units follow (or the end).
    let start = found.index;
    while (start > at && !isBlank(text.charCodeAt(start - 1))) start--;
    previous = addAscii(f, text, at, start, previous);
    let end = found.index;
    for (;;) {
      while (end < n && !isBlank(text.charCodeAt(end))) end++;
      if (end === n) break;
      NON_ASCII_FROM.lastIndex = end;
      const next = NON_ASCII_FROM.exec(text);
      if (next === null || next.index - end >= ASCII_STRETCH) break;
      end = next.index;
    }
    previous = addNormalized(f, text.slice(start, end), previous);
    at = end;
  }
}

/** Counters reused across calls (embedding is synchronous), one set per dimension. */
const families = new Map<number, Families>();

/**
 * Embeds one text; exported for the ingestion threads, the benchmark and tests. `into`, when given,
 * is `dim` zeros the vector is written to (a thread embedding a document writes each chunk's vector
 * into one array for all of them, instead of allocating one per chunk and copying it).
 */
export function hashedVector(text: string, dim = HASHED_DIMENSION, into?: Float32Array): Float32Array {
  let f = families.get(dim);
  if (!f) {
    f = { words: new Family(dim), bigrams: new Family(dim), chars: new Family(dim), memo: new WordMemo() };
    families.set(dim, f);
  }
  addText(f, text);
  const out = into ?? new Float32Array(dim);
  f.words.drainInto(out, WEIGHTS.word);
  f.bigrams.drainInto(out, WEIGHTS.bigram);
  f.chars.drainInto(out, WEIGHTS.char);
  return normalize(out);
}

/** The offline embedder: deterministic, no network, fast enough to embed while ingesting. */
export function createHashedEmbedder(dim = HASHED_DIMENSION): Embedder {
  return {
    provider: 'hashed',
    model: `fh-${dim}`,
    dimension: () => dim,
    embed: async (texts) => texts.map((t) => hashedVector(t, dim)),
  };
}
