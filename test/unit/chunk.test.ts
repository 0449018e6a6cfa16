import fc from '../helpers/property.js';
import { describe, expect, it } from 'vitest';
import { type Chunk, chunkBlocks, type ChunkInput, DEFAULT_CHUNKING, splitSentences } from '../../src/core/knowledge/chunk.js';
import { estimateTokens } from '../../src/lib/text.js';

const squash = (text: string): string => text.replace(/\s+/g, ' ').trim();

/** Distinct, short sentences: "Sentence 7 is about topic g." (about 7 tokens each). */
function sentences(count: number, tag = 'S'): string[] {
  return Array.from({ length: count }, (_, i) => `${tag}entence ${i} is about topic ${String.fromCharCode(97 + (i % 26))}.`);
}

/** The sentences of `text` from the given list, in the order they occur in it. */
function sentencesIn(text: string, all: string[]): string[] {
  return all.filter((s) => text.includes(s)).sort((a, b) => text.indexOf(a) - text.indexOf(b));
}

function expectPositions(chunks: Chunk[]) {
  expect(chunks.map((c) => c.position)).toEqual(chunks.map((_, i) => i));
}

describe('chunkBlocks', () => {
  it('returns nothing for no blocks and skips empty or whitespace-only blocks', () => {
    expect(chunkBlocks([])).toEqual([]);
    expect(chunkBlocks([{ headingPath: ['A'], text: '' }, { headingPath: ['B'], text: ' \n\t ' }])).toEqual([]);
    const chunks = chunkBlocks([
      { headingPath: ['A'], text: '   ' },
      { headingPath: ['B'], text: 'Only this.' },
      { headingPath: ['C'], text: '\n\n' },
    ]);
    expect(chunks).toEqual([{ position: 0, text: 'Only this.', headingPath: ['B'], tokens: estimateTokens('Only this.') }]);
  });

  it('keeps paragraphs whole when they fit, joining paragraphs of one section with a blank line', () => {
    const a = 'First paragraph. It has two sentences.';
    const b = 'Second paragraph here.';
    const chunks = chunkBlocks([
      { headingPath: ['Intro'], text: a },
      { headingPath: ['Intro'], text: `  ${b}  ` },
    ]);
    expect(chunks).toEqual([{ position: 0, text: `${a}\n\n${b}`, headingPath: ['Intro'], tokens: estimateTokens(`${a}\n\n${b}`) }]);
  });

  it('keeps a paragraph of exactly maxTokens whole, alone in its chunk', () => {
    const exact = `${'Word '.repeat(15)}end.`; // 79 characters: 20 tokens
    expect(estimateTokens(exact)).toBe(20);
    const chunks = chunkBlocks(
      [
        { headingPath: [], text: 'Before.' },
        { headingPath: [], text: exact },
        { headingPath: [], text: 'After.' },
      ],
      { maxTokens: 20, overlapTokens: 5 },
    );
    expect(chunks.map((c) => c.text)).toEqual(['Before.', exact, 'After.']);
  });

  it('starts a new chunk at every heading change, each chunk carrying its block heading path, without overlap across sections', () => {
    const blocks: ChunkInput[] = [
      { headingPath: [], text: 'Preamble text.' },
      { headingPath: ['A'], text: 'Alpha one.' },
      { headingPath: ['A'], text: 'Alpha two.' },
      { headingPath: ['A', 'B'], text: 'Beta one.' },
      { headingPath: ['A'], text: 'Alpha three.' },
      { headingPath: ['C'], text: 'Gamma one.' },
    ];
    const chunks = chunkBlocks(blocks, { maxTokens: 400, overlapTokens: 60 });
    expect(chunks.map((c) => [c.headingPath, c.text])).toEqual([
      [[], 'Preamble text.'],
      [['A'], 'Alpha one.\n\nAlpha two.'],
      [['A', 'B'], 'Beta one.'],
      [['A'], 'Alpha three.'],
      [['C'], 'Gamma one.'],
    ]);
    expectPositions(chunks);
  });

  it('cuts a long paragraph between sentences, never mid-sentence, with every chunk within maxTokens', () => {
    const all = sentences(200);
    const maxTokens = 60;
    const chunks = chunkBlocks([{ headingPath: ['Long'], text: all.join(' ') }], { maxTokens, overlapTokens: 15 });
    expect(chunks.length).toBeGreaterThan(10);
    expectPositions(chunks);
    for (const c of chunks) {
      expect(c.headingPath).toEqual(['Long']);
      expect(c.tokens).toBe(estimateTokens(c.text));
      expect(c.tokens).toBeLessThanOrEqual(maxTokens);
      // Made only of whole sentences, joined as in the paragraph (no blank line inside it).
      expect(sentencesIn(c.text, all).join(' ')).toBe(c.text);
    }
    // Nothing lost, in order.
    const seen = new Set(chunks.flatMap((c) => sentencesIn(c.text, all)));
    expect(all.filter((s) => !seen.has(s))).toEqual([]);
  });

  it('overlaps consecutive chunks of one section by their last sentences, within overlapTokens', () => {
    const all = sentences(120);
    const overlapTokens = 20;
    const chunks = chunkBlocks(
      [
        { headingPath: ['One'], text: all.slice(0, 60).join(' ') },
        { headingPath: ['Two'], text: all.slice(60).join(' ') },
      ],
      { maxTokens: 50, overlapTokens },
    );
    let sameSection = 0;
    for (let i = 1; i < chunks.length; i++) {
      const prev = sentencesIn(chunks[i - 1]!.text, all);
      const next = sentencesIn(chunks[i]!.text, all);
      const shared = next.filter((s) => prev.includes(s));
      if (chunks[i]!.headingPath[0] !== chunks[i - 1]!.headingPath[0]) {
        expect(shared).toEqual([]);
        continue;
      }
      sameSection++;
      // The next chunk starts with a non-empty suffix of the previous one.
      expect(shared.length).toBeGreaterThan(0);
      expect(next.slice(0, shared.length)).toEqual(shared);
      expect(prev.slice(prev.length - shared.length)).toEqual(shared);
      expect(estimateTokens(shared.join(' '))).toBeLessThanOrEqual(overlapTokens);
      // ...and moves forward.
      expect(next.length).toBeGreaterThan(shared.length);
    }
    expect(sameSection).toBeGreaterThan(4);
    // Each section's first chunk starts with that section's first sentence.
    expect(chunks.find((c) => c.headingPath[0] === 'Two')!.text.startsWith(all[60]!)).toBe(true);
  });

  it('overlaps with the last sentences of a whole paragraph too big to repeat, keeping them one paragraph', () => {
    const all = sentences(40);
    const paragraphs = Array.from({ length: 10 }, (_, i) => all.slice(4 * i, 4 * i + 4).join(' ')); // ~30 tokens each
    const chunks = chunkBlocks(
      paragraphs.map((text) => ({ headingPath: ['P'], text })),
      { maxTokens: 70, overlapTokens: 16 },
    );
    expect(chunks.length).toBeGreaterThan(3);
    for (let i = 1; i < chunks.length; i++) {
      const prev = sentencesIn(chunks[i - 1]!.text, all);
      const shared = sentencesIn(chunks[i]!.text, all).filter((s) => prev.includes(s));
      expect(shared.length).toBeGreaterThan(0);
      expect(estimateTokens(shared.join(' '))).toBeLessThanOrEqual(16);
      // The repeated sentences read as they did: one paragraph, then a blank line before the next one.
      expect(chunks[i]!.text.startsWith(`${shared.join(' ')}\n\n`)).toBe(true);
    }
    for (const c of chunks) {
      for (const part of c.text.split('\n\n')) expect(paragraphs.some((p) => p.endsWith(part) || p.startsWith(part))).toBe(true);
    }
  });

  it('does not overlap when overlapTokens is 0', () => {
    const all = sentences(60);
    const chunks = chunkBlocks([{ headingPath: [], text: all.join(' ') }], { maxTokens: 40, overlapTokens: 0 });
    const found = chunks.flatMap((c) => sentencesIn(c.text, all));
    expect(found).toEqual(all);
  });

  it('cuts a sentence longer than maxTokens by words', () => {
    const words = Array.from({ length: 300 }, (_, i) => `word${i}`);
    const sentence = `${words.join(' ')}.`;
    const maxTokens = 30;
    const chunks = chunkBlocks([{ headingPath: [], text: `Short start. ${sentence} Short end.` }], { maxTokens, overlapTokens: 0 });
    expect(chunks.length).toBeGreaterThan(5);
    const seen: string[] = [];
    for (const c of chunks) {
      expect(c.tokens).toBeLessThanOrEqual(maxTokens);
      // Whole words only: every token of the chunk is one of the input's words.
      for (const t of c.text.split(/\s+/)) {
        expect(['Short', 'start.', 'end.', 'word299.', ...words]).toContain(t);
        if (t.startsWith('word')) seen.push(t.replace('.', ''));
      }
    }
    expect(seen).toEqual(words);
  });

  it('cuts a single 10,000-character word by characters', () => {
    const blob = 'x'.repeat(4_000) + 'y'.repeat(6_000);
    const maxTokens = 100;
    const chunks = chunkBlocks([{ headingPath: ['Data'], text: blob }], { maxTokens, overlapTokens: 20 });
    expect(chunks.length).toBeGreaterThanOrEqual(Math.ceil(estimateTokens(blob) / maxTokens));
    for (const c of chunks) expect(c.tokens).toBeLessThanOrEqual(maxTokens);
    expect(chunks.map((c) => c.text).join('')).toBe(blob);
  });

  it('splits CJK text at its sentence ends and keeps each chunk within maxTokens', () => {
    // Japanese: no spaces, sentences end with 。 (each character about one token).
    const all = Array.from({ length: 60 }, (_, i) => `これは第${i}番目の文です。`);
    const maxTokens = 40;
    const chunks = chunkBlocks([{ headingPath: ['日本語'], text: all.join('') }], { maxTokens, overlapTokens: 10 });
    expect(chunks.length).toBeGreaterThan(5);
    for (const c of chunks) {
      expect(c.tokens).toBeLessThanOrEqual(maxTokens);
      expect(c.text.replace(/\s+/g, '').endsWith('。')).toBe(true);
      expect(sentencesIn(c.text, all).join('')).toBe(c.text.replace(/\s+/g, ''));
    }
    const seen = new Set(chunks.flatMap((c) => sentencesIn(c.text, all)));
    expect(all.filter((s) => !seen.has(s))).toEqual([]);
  });

  it('cuts unpunctuated CJK text to chunks within maxTokens', () => {
    const text = '漢字'.repeat(2_000); // 4,000 characters, about 4,000 tokens, no space, no sentence end
    const maxTokens = 100;
    const chunks = chunkBlocks([{ headingPath: [], text }], { maxTokens, overlapTokens: 0 });
    for (const c of chunks) expect(c.tokens).toBeLessThanOrEqual(maxTokens);
    expect(chunks.map((c) => c.text).join('')).toBe(text);
  });

  it('stays within maxTokens when many short pieces are joined (separators count too)', () => {
    // Four-character sentences: one token each, but each space between them adds a quarter token.
    const all = Array.from({ length: 400 }, (_, i) => `Ab${String.fromCharCode(97 + (i % 26))}.`);
    for (const maxTokens of [50, 400]) {
      const chunks = chunkBlocks([{ headingPath: [], text: all.join(' ') }], { maxTokens, overlapTokens: 10 });
      for (const c of chunks) expect(c.tokens).toBeLessThanOrEqual(maxTokens);
    }
    const paragraphs = chunkBlocks(
      all.map((text) => ({ headingPath: [], text })),
      { maxTokens: 100, overlapTokens: 0 },
    );
    for (const c of paragraphs) expect(c.tokens).toBeLessThanOrEqual(100);
  });

  it('uses 400/60 tokens by default', () => {
    expect(DEFAULT_CHUNKING).toEqual({ maxTokens: 400, overlapTokens: 60 });
    const chunks = chunkBlocks([{ headingPath: [], text: sentences(400).join(' ') }]);
    expect(chunks.length).toBeGreaterThan(5);
    for (const c of chunks) expect(c.tokens).toBeLessThanOrEqual(400);
    expect(Math.max(...chunks.map((c) => c.tokens))).toBeGreaterThan(300);
  });

  it('loses no text and respects the limits for any paragraphs and sentences (property)', () => {
    const word = fc.stringMatching(/^[a-z]{1,12}$/);
    // After the first (capitalised) word, some CJK (a token a character) and astral ones, so a chunk's token count is checked on each kind.
    const later = fc.oneof({ weight: 8, arbitrary: word }, { weight: 1, arbitrary: fc.constantFrom('日本語', '中文の', '한국어', '𠀀𠀁', 'café', 'x\ud800', '–') });
    const sentence = fc
      .tuple(word, fc.array(later, { maxLength: 39 }), fc.constantFrom('.', '!', '?'))
      .map(([first, ws, end]) => `${first.charAt(0).toUpperCase()}${[first, ...ws].join(' ').slice(1)}${end}`);
    const block = fc.record({
      headingPath: fc.constantFrom<string[]>([], ['A'], ['A', 'B'], ['C']),
      text: fc.array(sentence, { minLength: 0, maxLength: 12 }).map((ss) => ss.join(' ')),
    });
    fc.assert(
      fc.property(
        fc.array(block, { maxLength: 12 }),
        fc.integer({ min: 10, max: 120 }),
        fc.integer({ min: 0, max: 40 }),
        (blocks, maxTokens, overlapTokens) => {
          const chunks = chunkBlocks(blocks, { maxTokens, overlapTokens });
          expectPositions(chunks);
          for (const c of chunks) {
            expect(c.text.trim()).not.toBe('');
            expect(c.tokens).toBe(estimateTokens(c.text));
            expect(c.tokens).toBeLessThanOrEqual(maxTokens);
          }
          for (const b of blocks) {
            const inSection = chunks.filter((c) => JSON.stringify(c.headingPath) === JSON.stringify(b.headingPath));
            const sectionText = inSection.map((c) => squash(c.text)).join('\n');
            for (const s of b.text.match(/[^.!?]+[.!?]/g) ?? []) {
              const whole = s.trim();
              if (estimateTokens(whole) <= maxTokens) {
                // A sentence that fits is found whole in a chunk of its own section.
                expect(inSection.some((c) => squash(c.text).includes(whole))).toBe(true);
              } else {
                for (const w of whole.split(' ')) expect(sectionText).toContain(w);
              }
            }
          }
          // Chunks of a section are consecutive and a heading change always starts a new chunk.
          const keys = chunks.map((c) => JSON.stringify(c.headingPath));
          const runs = keys.filter((k, i) => i === 0 || keys[i - 1] !== k);
          const blockRuns = blocks
            .filter((b) => b.text.trim())
            .map((b) => JSON.stringify(b.headingPath))
            .filter((k, i, all) => i === 0 || all[i - 1] !== k);
          expect(runs).toEqual(blockRuns);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('chunks 1 MB in linear time', () => {
    const paragraph = sentences(40).join(' ');
    const blocks: ChunkInput[] = [];
    let size = 0;
    for (let i = 0; size < 1_000_000; i++) {
      blocks.push({ headingPath: [`Section ${Math.floor(i / 20)}`], text: paragraph });
      size += paragraph.length;
    }
    const oneBlock = [{ headingPath: [], text: blocks.map((b) => b.text).join(' ') }];
    const noSpaces = [{ headingPath: [], text: 'z'.repeat(1_000_000) }];
    for (const input of [blocks, oneBlock, noSpaces]) {
      const start = performance.now();
      const chunks = chunkBlocks(input);
      const elapsed = performance.now() - start;
      expect(chunks.length).toBeGreaterThan(600);
      expect(elapsed).toBeLessThan(2_000);
    }
  });
});

describe('splitSentences', () => {
  /** The definition: the regex the scan replaced. */
  const reference = (text: string) =>
    text
      .split(/(?<=[.!?…。！？])\s+(?=["'“‘(\[\p{Lu}\p{N}])|(?<=[。！？])/u)
      .map((s) => s.trim())
      .filter(Boolean);

  it('cuts after terminal punctuation before a capital, a number, a quote or a bracket, and after CJK punctuation', () => {
    expect(splitSentences('One. Two! 3 is next? (Four) "Five." six. 日本。中文！好？ End…  [7]')).toEqual([
      'One.',
      'Two!',
      '3 is next?',
      '(Four) "Five." six. 日本。',
      '中文！',
      '好？',
      'End…',
      '[7]',
    ]);
  });

  it('cuts exactly where the regex does, for any mix of punctuation, spaces, letters and code units (property)', () => {
    const piece = fc.oneof(
      fc.constantFrom('.', '!', '?', '…', '。', '！', '？', ' ', '  ', '\n', '\t', '\u00a0', '\u2003', '\u3000', '\ufeff', '\u0085'),
      fc.constantFrom('A', 'a', '1', 'É', 'é', 'Σ', 'ß', 'Ⅻ', '٣', '"', "'", '“', '‘', '(', '[', '𝐀', '𝟏', '𝒶', '\ud835', '\udc00', 'word', 'Word'),
      fc.string({ unit: 'binary', maxLength: 3 }),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 60 }).map((parts) => parts.join('')), (text) => {
        expect(splitSentences(text)).toEqual(reference(text));
      }),
      { numRuns: 2000 },
    );
  });
});
