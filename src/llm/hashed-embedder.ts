import { type Embedder, normalize } from './embedder.js';
import { isStopword, wordsOf } from '../lib/text.js';

/** Default vector length of the offline embedder: a multiple of 32 so the binary quantization packs into whole words. */
export const HASHED_DIMENSION = 384;

/**
 * How much each feature family weighs after each is normalised on its own, so a long text's many
 * character n-grams do not drown its words. Words carry the meaning, bigrams the phrasing, and
 * character n-grams catch inflections and compounds ("biomaterial" ~ "biomaterials").
 */
const WEIGHTS = { word: 1, bigram: 0.5, char: 0.6 };
const CHAR_NGRAMS = [3, 4, 5];

/** FNV-1a over a string's UTF-16 units, from a seed so the families hash apart. */
function fnv1a(text: string, seed: number, start = 0, end = text.length): number {
  let h = seed;
  for (let i = start; i < end; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
  return h >>> 0;
}

const SEED = { word: 2166136261, bigram: 0x9e3779b9, char: 0x85ebca6b };

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
  constructor(readonly dim: number) {
    this.counts = new Uint16Array(dim * 2);
    this.values = new Float32Array(dim);
  }
  add(hash: number) {
    // Low bits pick the bucket, the top bit the sign: independent enough for FNV-1a.
    const slot = (hash % this.dim) * 2 + (hash >>> 31);
    if (this.counts[slot]! < 65535) this.counts[slot]!++;
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

const LT = '<'.charCodeAt(0);
const GT = '>'.charCodeAt(0);
const MIN_GRAM = CHAR_NGRAMS[0]!;
const MAX_GRAM = CHAR_NGRAMS[CHAR_NGRAMS.length - 1]!;

/** Counters reused across calls (embedding is synchronous), one set per dimension. */
const families = new Map<number, { words: Family; bigrams: Family; chars: Family }>();

/** Embeds one text; exported for the benchmark and tests. */
export function hashedVector(text: string, dim = HASHED_DIMENSION): Float32Array {
  let f = families.get(dim);
  if (!f) {
    f = { words: new Family(dim), bigrams: new Family(dim), chars: new Family(dim) };
    families.set(dim, f);
  }
  const { words, bigrams, chars } = f;
  let previous: number | null = null;
  for (const word of wordsOf(text)) {
    if (isStopword(word)) {
      previous = null;
      continue;
    }
    const wordHash = fnv1a(word, SEED.word);
    words.add(wordHash);
    if (previous !== null) bigrams.add(Math.imul(previous ^ wordHash, 16777619) >>> 0);
    previous = fnv1a(word, SEED.bigram);
    // Character n-grams of "<word>", hashed incrementally: one pass per start position covers every size.
    const len = word.length + 2;
    for (let i = 0; i + MIN_GRAM <= len; i++) {
      let h = SEED.char;
      const end = Math.min(len, i + MAX_GRAM);
      for (let j = i; j < end; j++) {
        h = Math.imul(h ^ (j === 0 ? LT : j === len - 1 ? GT : word.charCodeAt(j - 1)), 16777619);
        if (j - i + 1 >= MIN_GRAM) chars.add(Math.imul(h ^ (j - i + 1), 16777619) >>> 0);
      }
    }
  }
  const out = new Float32Array(dim);
  words.drainInto(out, WEIGHTS.word);
  bigrams.drainInto(out, WEIGHTS.bigram);
  chars.drainInto(out, WEIGHTS.char);
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
