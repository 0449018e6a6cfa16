import fc from '../helpers/property.js';
import { describe, expect, it } from 'vitest';
import { embedderId } from '../../src/llm/embedder.js';
import { createHashedEmbedder, HASHED_DIMENSION, hashedVector } from '../../src/llm/hashed-embedder.js';
import { STOPWORDS, wordsOf } from '../../src/lib/text.js';

const dot = (a: Float32Array, b: Float32Array): number => a.reduce((s, x, i) => s + x * b[i]!, 0);
const norm = (v: Float32Array): number => Math.sqrt(dot(v, v));
const cos = (a: string, b: string): number => dot(hashedVector(a), hashedVector(b));

describe('hashedVector', () => {
  it('has the requested dimension, 384 by default', () => {
    expect(HASHED_DIMENSION).toBe(384);
    expect(hashedVector('some text')).toHaveLength(384);
    for (const dim of [8, 64, 256, 1024]) expect(hashedVector('some text', dim)).toHaveLength(dim);
  });

  it('is unit length for any text with a content word, with both signs used', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), fc.constantFrom(64, 384), (noise, dim) => {
        const v = hashedVector(`${noise} anchorword`, dim);
        expect(norm(v)).toBeCloseTo(1, 5);
      }),
      { numRuns: 200 },
    );
    const v = hashedVector('Stem cells differentiate into cardiomyocytes under mechanical load.');
    expect(v.some((x) => x > 0)).toBe(true);
    expect(v.some((x) => x < 0)).toBe(true);
  });

  it('is the zero vector for text without words or with stop words only', () => {
    for (const text of ['', '   ', '!!! ... ??? —', 'the and of', 'It is not THE a']) {
      const v = hashedVector(text);
      expect(v).toHaveLength(384);
      expect(v.every((x) => x === 0)).toBe(true);
    }
  });

  it('is deterministic: the same text always gives the same vector, whatever came before', () => {
    const text = 'Biomaterials lack inductive properties.';
    const first = hashedVector(text);
    hashedVector('something else entirely, with many words words words');
    expect(hashedVector(text)).toEqual(first);
    expect(Array.from(first)).toEqual(Array.from(hashedVector(text)));
  });

  it('scores related texts above unrelated ones', () => {
    const a = 'biomaterials lack inductive properties';
    const related = 'inductive properties of biomaterial';
    const unrelated = 'the heart rate of mice';
    expect(cos(a, related)).toBeGreaterThan(0.4);
    expect(cos(a, unrelated)).toBeLessThan(0.15);
    expect(cos(a, related)).toBeGreaterThan(cos(a, unrelated) + 0.3);
  });

  it('is robust to inflection through character n-grams: plural ~ singular, well above unrelated words', () => {
    const pairs = [
      ['biomaterials', 'biomaterial'],
      ['vaccinations', 'vaccination'],
      ['proteins', 'protein'],
      ['mitochondrial', 'mitochondria'],
      ['receptors', 'receptor'],
      ['telescopes', 'telescope'],
      ['keyboards', 'keyboard'],
      ['infections', 'infection'],
    ] as const;
    const related: number[] = [];
    const unrelated: number[] = [];
    pairs.forEach(([plural, singular], i) => {
      // Different words, so only the character n-grams can make them alike.
      related.push(cos(plural, singular));
      unrelated.push(cos(plural, pairs[(i + 3) % pairs.length]![1]));
    });
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    for (const c of related) expect(c).toBeGreaterThan(0.15);
    // Unrelated words meet only through hash collisions (|cos| ≈ 0.1 at worst at 384 dimensions).
    for (const c of unrelated) expect(Math.abs(c)).toBeLessThan(0.12);
    expect(mean(related)).toBeGreaterThan(mean(unrelated) + 0.15);
    // In a sentence too: the inflected query still ranks its sentence first.
    const query = 'receptors of infections';
    expect(cos(query, 'the receptor of an infection')).toBeGreaterThan(cos(query, 'telescopes and keyboards') + 0.15);
  });

  it('ignores case and diacritics', () => {
    expect(hashedVector('Café')).toEqual(hashedVector('cafe'));
    expect(hashedVector('NAÏVE Résumé')).toEqual(hashedVector('naive resume'));
    expect(cos('Café au lait', 'cafe AU LAIT')).toBeCloseTo(1, 6);
  });

  it('weighs word order through bigrams: same words, different order, are close but not equal', () => {
    const c = cos('dog bites man', 'man bites dog');
    expect(c).toBeGreaterThan(0.7);
    expect(c).toBeLessThan(0.999);
  });
});

/**
 * The embedder as specified, one string per word from `wordsOf` (the definition of a word that
 * keyword search uses too), with the float32 roundings of the stored vector: an oracle for the fast
 * paths, which never build those strings.
 */
function referenceVector(text: string, dim: number): Float32Array {
  const PRIME = 16777619;
  const fnv = (s: string, seed: number) => {
    let h = seed;
    for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), PRIME);
    return h;
  };
  const families = [new Uint16Array(dim * 2), new Uint16Array(dim * 2), new Uint16Array(dim * 2)] as const;
  const add = (counts: Uint16Array, hash: number) => {
    const slot = ((hash >>> 0) % dim) * 2 + (hash < 0 ? 1 : 0);
    if (counts[slot]! < 65535) counts[slot]!++;
  };
  let previous: number | null = null;
  for (const word of wordsOf(text)) {
    if (STOPWORDS.has(word)) {
      previous = null;
      continue;
    }
    const hash = fnv(word, 2166136261 | 0);
    add(families[0], hash);
    if (previous !== null) add(families[1], Math.imul(previous ^ hash, PRIME));
    const framed = `<${word}>`;
    for (let i = 0; i < framed.length; i++) {
      for (let n = 3; n <= 5 && i + n <= framed.length; n++) add(families[2], Math.imul(fnv(framed.slice(i, i + n), 0x85ebca6b | 0) ^ n, PRIME));
    }
    previous = fnv(word, 0x9e3779b9 | 0) >>> 0;
  }
  const sublinear = (c: number) => (c === 0 ? 0 : c < 256 ? Math.fround(1 + Math.log(c)) : 1 + Math.log(c));
  const out = new Float32Array(dim);
  families.forEach((counts, family) => {
    const values = new Float32Array(dim);
    let sum = 0;
    for (let b = 0; b < dim; b++) {
      const v = sublinear(counts[2 * b]!) - sublinear(counts[2 * b + 1]!);
      values[b] = v; // stored as float32, summed unrounded
      sum += v * v;
    }
    if (sum === 0) return;
    const scale = [1, 0.5, 0.6][family]! / Math.sqrt(sum);
    for (let b = 0; b < dim; b++) out[b]! += values[b]! * scale;
  });
  let sum = 0;
  for (let i = 0; i < dim; i++) sum += out[i]! * out[i]!;
  if (sum > 0) for (let i = 0; i < dim; i++) out[i]! *= 1 / Math.sqrt(sum);
  return out;
}

describe('hashedVector against the word-by-word reference', () => {
  /** Characters whose handling differs between the ASCII path and NFKD + mark removal + lower-casing, or that sit at its edges. */
  const TRICKY = [
    'é', 'e\u0301', '\u0301', 'ﬁ', 'Ａ', '²', '½', 'µ', '±', '–', '›', 'ß', 'İ', 'Σ', 'ς', 'ΟΔΟΣ', "'", '.', ':', '\u00a0', '\u200b', '細胞',
    '🙂', '𝔘', '\ud800', '\udc00', 'Ǆ', 'Ⅻ', '①', 'K', '\u0345', 'ᾳ',
  ];
  const piece = fc.oneof(
    fc.constantFrom('Stem', 'cells', 'the', 'of', 'IL-6', 'p53', 'x', 'COVID-19', '3.14', 'and', 'a'),
    fc.constantFrom(' ', '  ', '\n', '\t', '\r\n', ', ', '. ', '-', '/', '\v', '\f'),
    fc.constantFrom(...TRICKY),
    fc.string({ unit: 'binary', maxLength: 4 }),
  );
  const text = fc.array(piece, { maxLength: 120 }).map((parts) => parts.join(''));

  it('matches it on edge cases and on mixes of ASCII words, blanks and non-ASCII characters', () => {
    for (const t of ['', 'the', 'Σ ΟΔΟΣ. Α ΟΔΟΣ', 'ΟΔΟΣ.Α ΣΑΣ:Α', 'x\u0301 y', 'a \u0301b', 'SciFact abstracts 1-100 › Title\nText with ± and µg/ml.']) {
      expect(Array.from(hashedVector(t, 64))).toEqual(Array.from(referenceVector(t, 64)));
    }
    fc.assert(
      fc.property(text, fc.constantFrom(8, 64, 384), (t, dim) => {
        expect(Array.from(hashedVector(t, dim))).toEqual(Array.from(referenceVector(t, dim)));
      }),
      { numRuns: 400 },
    );
    // Long ASCII stretches between non-ASCII words, so the ASCII path resumes in between.
    const long = `${'word '.repeat(20)}é${' stem cell'.repeat(10)}ΟΔΟΣ.${'x '.repeat(40)}ΣΑΣ ${'y'.repeat(50)}`;
    expect(Array.from(hashedVector(long, 384))).toEqual(Array.from(referenceVector(long, 384)));
  });

  it('matches it while the memo of recent words fills up and is emptied, for words seen before and new ones', () => {
    // 40,000 distinct words, more than the memo holds, in texts that also repeat common words.
    const word = (i: number) => `w${i.toString(36)}${'x'.repeat(i % 45)}`;
    const texts = Array.from({ length: 400 }, (_, t) => Array.from({ length: 100 }, (_, k) => `${word(t * 100 + k)} cells of the stem`).join(' '));
    for (const [t, text] of texts.entries()) {
      const v = hashedVector(text, 64);
      if (t % 40 === 0 || t === texts.length - 1) expect(Array.from(v)).toEqual(Array.from(referenceVector(text, 64)));
    }
    // "glbvs" and "yacxa" have the same word hash (FNV-1a): each keeps its own character n-grams.
    for (const text of ['glbvs', 'yacxa', 'glbvs yacxa', 'yacxa glbvs yacxa']) {
      expect(Array.from(hashedVector(text, 64))).toEqual(Array.from(referenceVector(text, 64)));
    }
    // Seen before, now from the memo (or anew, after it was emptied): the same vectors.
    for (const text of [texts[0]!, texts[399]!, texts[200]!]) expect(Array.from(hashedVector(text, 64))).toEqual(Array.from(referenceVector(text, 64)));
  });
});

describe('createHashedEmbedder', () => {
  it('describes itself and embeds texts in order, as hashedVector does', async () => {
    const embedder = createHashedEmbedder(256);
    expect(embedder.provider).toBe('hashed');
    expect(embedder.dimension()).toBe(256);
    expect(embedderId(embedder)).toBe('hashed:fh-256');
    expect(createHashedEmbedder().dimension()).toBe(HASHED_DIMENSION);
    const texts = ['first text', 'second one', '', 'first text'];
    const vectors = await embedder.embed(texts);
    expect(vectors).toHaveLength(4);
    vectors.forEach((v, i) => expect(v).toEqual(hashedVector(texts[i]!, 256)));
    expect(vectors[0]).not.toEqual(vectors[1]);
    expect(await embedder.embed([])).toEqual([]);
  });
});
