// ftsTokens and ftsQueryTerms (src/core/knowledge/fts-tokenizer.ts) against the FTS5 tokenizer of the
// SQLite that better-sqlite3 bundles: the terms fts5vocab reports for the same text, compared as bytes.
import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';
import fc from '../helpers/property.js';
import { afterAll, describe, expect, it } from 'vitest';
import { ftsQueryTerms, ftsTokens } from '../../src/core/knowledge/fts-tokenizer.js';
import { ftsQuery, queryTerms } from '../../src/core/knowledge/search-index.js';

const db = new Database(':memory:');
db.exec(`
  CREATE VIRTUAL TABLE doc USING fts5(x, content='', tokenize='porter unicode61 remove_diacritics 2');
  CREATE VIRTUAL TABLE doc_terms USING fts5vocab(doc, 'instance');
`);
afterAll(() => db.close());

const insertDoc = db.prepare('INSERT INTO doc (rowid, x) VALUES (?, ?)');
const docTerms = db.prepare('SELECT doc, CAST(term AS BLOB) AS term FROM doc_terms ORDER BY doc, offset').raw();
const docTermsText = db.prepare('SELECT term FROM doc_terms ORDER BY offset').pluck();
// 'delete-all' empties the index itself: deleted rows would stay in fts5vocab's scans until merged.
const clearDocs = db.prepare("INSERT INTO doc (doc) VALUES ('delete-all')");

/** SQLite's terms of each text, in order, each as hex of its bytes. */
function sqliteTerms(texts: string[]): string[][] {
  const out: string[][] = texts.map(() => []);
  db.transaction(() => {
    texts.forEach((text, i) => insertDoc.run(i + 1, text));
    for (const [doc, term] of docTerms.all() as [number, Buffer][]) out[doc - 1]!.push(shortHex(term.toString('hex')));
    clearDocs.run();
  })();
  return out;
}

/** Hex of a term's bytes, a digest for long ones (so a failure message stays readable). */
function shortHex(hex: string): string {
  return hex.length <= 400 ? hex : `${hex.length / 2} bytes, sha1 ${createHash('sha1').update(hex).digest('hex')}`;
}

/** A term's bytes in hex: U+2500–U+257F stand for the bytes 0x80–0xFF that are not UTF-8. */
function termHex(term: string): string {
  const parts: Buffer[] = [];
  for (const ch of term) {
    const cp = ch.codePointAt(0)!;
    parts.push(cp >= 0x2500 && cp <= 0x257f ? Buffer.from([cp - 0x2500 + 0x80]) : Buffer.from(ch, 'utf8'));
  }
  return shortHex(Buffer.concat(parts).toString('hex'));
}

const oursHex = (text: string) => ftsTokens(text).map(termHex);

/** The first index where two lists differ, with a little context, or null. */
function firstDifference(ours: string[], theirs: string[]): string | null {
  const n = Math.max(ours.length, theirs.length);
  for (let i = 0; i < n; i++) {
    if (ours[i] !== theirs[i]) return `term ${i}: ours ${JSON.stringify(ours.slice(i, i + 3))}, SQLite ${JSON.stringify(theirs.slice(i, i + 3))}`;
  }
  return null;
}

// The exhaustive tests take seconds; on a loaded two-core machine, several times that.
describe('ftsTokens', () => {
  it('gives the terms SQLite gives for named examples', () => {
    const examples: [string, string[]][] = [
      ['running', ['run']],
      ['Running RUNS ran', ['run', 'run', 'ran']],
      ['Crème Brûlée', ['creme', 'brule']],
      ['relational conditional rational', ['relat', 'condit', 'ration']],
      ['ponies caresses cats feed agreed plastered motoring sing', ['poni', 'caress', 'cat', 'feed', 'agre', 'plaster', 'motor', 'sing']],
      ['hopping filing happy sky', ['hop', 'file', 'happi', 'sky']],
      // Only letters with a canonical diacritic lose it (Ł has none), and ß is not expanded.
      ['İstanbul ŁÓDŹ Straße STRASSE ẞ', ['istanbul', 'łodz', 'straß', 'strass', 'ß']],
      // Ligatures are not decomposed, Greek accents stay, other marks end a token.
      ['ﬁne ά Ελληνικά', ['ﬁne', 'ά', 'ελληνικά']],
      ['हिन्दी', ['ह', 'न', 'द']],
      ['e\u0301te\u0301 cafe\u0301s', ['et', 'cafe']],
      ['日本語のテキスト', ['日本語のテキスト']],
      ['a_b c-d e.f 3.14 x86_64', ['a', 'b', 'c', 'd', 'e', 'f', '3', '14', 'x86', '64']],
      // 😀 was assigned by SQLite's Unicode tables (a separator), 🤔 was not (so it is a token character).
      ['ok😀go 🤔', ['ok', 'go', '🤔']],
      ['lone \ud800 surrogate\udc00s', ['lone', 'surrog', 's']],
      ['', []],
      ['  ,;  ', []],
    ];
    const theirs = sqliteTerms(examples.map(([text]) => text));
    examples.forEach(([text, expected], i) => {
      expect(ftsTokens(text), text).toEqual(expected);
      expect(oursHex(text), text).toEqual(theirs[i]);
    });
  });

  it('keeps the bytes SQLite keeps where stemming or the 32,768-byte limit cuts a character', () => {
    // 倀 is E5 80 80: step 1b drops one of its two equal last bytes after removing "ing".
    const cut = 'a\u5000ing';
    const long = 'a' + 'ж'.repeat(20_000); // 40,001 bytes: cut after the first byte of a ж
    const asciiLong = 'B'.repeat(40_000);
    const stemLimit = ['a'.repeat(61) + 'ing', 'a'.repeat(62) + 'ing', 'é'.repeat(30) + 'ing', 'ж'.repeat(31) + 'ing'];
    const texts = [cut, long, asciiLong, ...stemLimit];
    const theirs = sqliteTerms(texts);
    expect(theirs[0]).toEqual(['61e580']);
    expect(ftsTokens(cut)).toEqual(['a\u2565\u2500']);
    const longTerm = ftsTokens(long)[0]!;
    expect([longTerm.length, longTerm.slice(-2)]).toEqual([1 + 16_383 + 1, 'ж\u2550']);
    const asciiTerm = ftsTokens(asciiLong);
    expect(asciiTerm.length === 1 && asciiTerm[0] === 'b'.repeat(32_768)).toBe(true);
    // 64 bytes are stemmed, 65 are not.
    expect(ftsTokens(stemLimit[0]!)).toEqual(['a'.repeat(61)]);
    expect(ftsTokens(stemLimit[1]!)).toEqual([stemLimit[1]]);
    texts.forEach((text, i) => expect(oursHex(text), text.slice(0, 20)).toEqual(theirs[i]));
  });

  it('treats every code point as SQLite does, at the start of a token and inside one', () => {
    // Per code point c: " c" starts a token with c (or skips it), "ac" continues "a" with c (or ends it).
    // One row per 4,096 code points; surrogates are tested as lone code units by the other tests.
    const rows: { from: number; text: string }[] = [];
    for (let from = 0; from < 0x110000; from += 4096) {
      let text = '';
      for (let cp = from; cp < from + 4096; cp++) {
        if (cp >= 0xd800 && cp <= 0xdfff) continue;
        const c = String.fromCodePoint(cp);
        text += ` ${c} a${c}`;
      }
      rows.push({ from, text });
    }
    const differences: string[] = [];
    for (const row of rows) {
      // Text, not bytes: no term here is cut mid-character, and 2.2 million blobs are slow to read.
      insertDoc.run(1, row.text);
      const theirs = docTermsText.all() as string[];
      clearDocs.run();
      const difference = firstDifference(ftsTokens(row.text), theirs);
      if (difference) differences.push(`U+${row.from.toString(16)}…: ${difference}`);
    }
    expect(differences).toEqual([]);
  }, 120_000);

  it('stems as SQLite does every short stem with every suffix the porter rules name', () => {
    const letters = 'aeiouybcdglnrstwxz';
    const stems = [''];
    for (const a of letters) {
      stems.push(a);
      for (const b of letters) {
        stems.push(a + b);
        for (const c of letters) stems.push(a + b + c);
      }
    }
    const suffixes = (
      's es ies sses ss ed eed ing ated ating bled bling izing ized ling ssing ying ' +
      'ational tional enci anci izer logi bli alli entli eli ousli ization ation ator alism iveness ' +
      'fulness ousness aliti iviti biliti ical ness icate iciti ful ative alize al ance ence er ic ' +
      'able ible ant ement ment ent sion tion ion ou ism ate iti ous ive ize e le ll y'
    ).split(' ');
    const words: string[] = [];
    for (const stem of stems) for (const suffix of ['', ...suffixes]) if (stem.length + suffix.length > 0) words.push(stem + suffix);
    // One row of ~20,000 words at a time keeps each comparison's failure message short.
    const differences: string[] = [];
    for (let i = 0; i < words.length; i += 20_000) {
      const text = words.slice(i, i + 20_000).join(' ');
      const difference = firstDifference(oursHex(text), sqliteTerms([text])[0]!);
      if (difference) differences.push(`words from ${words[i]}: ${difference}`);
    }
    expect(words.length).toBeGreaterThan(400_000);
    expect(differences).toEqual([]);
  }, 120_000);

  it('gives the terms SQLite gives for generated texts', () => {
    const codePoint = (min: number, max: number) => fc.integer({ min, max }).map((cp) => String.fromCodePoint(cp));
    const stem = fc.constantFrom('run', 'hop', 'relat', 'condit', 'happ', 'sky', 'agree', 'plaster', 'motor', 'cat', 'pon', 'fil', 'generaliz', 'electr', 'x', 'ab', 'yy', 'tree', 'ss', 'fe');
    const suffix = fc.constantFrom('', 's', 'es', 'ies', 'ing', 'ed', 'eed', 'ational', 'tional', 'ization', 'ness', 'ful', 'ically', 'ement', 'ion', 'ous', 'ive', 'ize', 'able', 'ly', 'e', 'le', 'll', 'y', 'er');
    const cased = (word: fc.Arbitrary<string>) =>
      fc.tuple(word, fc.constantFrom('lower', 'upper', 'title', 'random'), fc.infiniteStream(fc.boolean())).map(([w, mode, flips]) => {
        if (mode === 'upper') return w.toUpperCase();
        if (mode === 'title') return w.charAt(0).toUpperCase() + w.slice(1);
        if (mode === 'random') return [...w].map((ch) => (flips.next().value ? ch.toUpperCase() : ch)).join('');
        return w;
      });
    const english = cased(fc.tuple(stem, suffix).map(([a, b]) => a + b));
    const piece = fc.oneof(
      { weight: 8, arbitrary: english },
      { weight: 3, arbitrary: fc.constantFrom(' ', '  ', ', ', '. ', '-', "'", '"', '\n', '\t', '(', ')', '_', '/', ':', '@', '#', '\0', '\u00a0', '\u3000', '…') },
      { weight: 2, arbitrary: fc.oneof(fc.nat().map(String), fc.double({ noNaN: true }).map(String)) },
      { weight: 2, arbitrary: cased(fc.constantFrom('Crème', 'brûlée', 'naïve', 'Ångström', 'Œuvre', 'ß', 'ẞ', 'İstanbul', 'ŁÓDŹ', 'Ǆungla', 'ﬁne', 'façade', 'Ørsted', 'Þing', 'ŉ', 'ǰ')) },
      { weight: 2, arbitrary: codePoint(0xc0, 0x24f) },
      { weight: 1, arbitrary: codePoint(0x1e00, 0x1eff) },
      { weight: 2, arbitrary: fc.oneof(codePoint(0x370, 0x3ff), codePoint(0x400, 0x52f), codePoint(0x1f00, 0x1fff)) },
      { weight: 2, arbitrary: fc.oneof(codePoint(0x4e00, 0x9fff), codePoint(0x3040, 0x30ff), codePoint(0xac00, 0xd7a3), codePoint(0x20000, 0x2a6df)) },
      // Characters whose UTF-8 ends in two equal bytes (U+5000, U+0800, U+FF00…) before a suffix.
      { weight: 1, arbitrary: fc.tuple(fc.constantFrom('\u5000', '\u0800', '\u4000', '\u10400', '\uff10', '\u0100'), fc.constantFrom('ing', 'ed', 'ings', 'eds')).map(([c, s]) => c + s) },
      { weight: 2, arbitrary: fc.oneof(codePoint(0x1f300, 0x1faff), codePoint(0x2600, 0x27bf), codePoint(0xfe00, 0xfe0f), codePoint(0x1f3fb, 0x1f3ff)) },
      { weight: 2, arbitrary: fc.oneof(codePoint(0x300, 0x36f), codePoint(0x900, 0x97f), codePoint(0x19b0, 0x19cf), codePoint(0x1cf0, 0x1cff), codePoint(0x1ab0, 0x1aff)) },
      { weight: 1, arbitrary: fc.oneof(codePoint(0x80, 0x10ffff), fc.constantFrom('\ud800', '\udbff', '\udc00', '\udfff', '\ufffe', '\uffff', '\ufffd', '\u{10ffff}', '\u{f0000}', '\u{e0001}')) },
      { weight: 1, arbitrary: fc.tuple(fc.constantFrom('a', 'é', 'ж', '日', 'x'), fc.integer({ min: 20, max: 80 }), suffix).map(([c, n, s]) => c.repeat(n) + s) },
      { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 8 }) },
    );
    const text = fc.array(piece, { maxLength: 24 }).map((pieces) => pieces.join(''));
    fc.assert(
      fc.property(fc.array(text, { minLength: 1, maxLength: 40 }), (texts) => {
        const theirs = sqliteTerms(texts);
        texts.forEach((t, i) => expect(oursHex(t), JSON.stringify(t)).toEqual(theirs[i]));
      }),
      { numRuns: 150 },
    );
  }, 120_000);
});

describe('ftsQueryTerms', () => {
  /**
   * SQLite's terms of each quoted word of ftsQuery(text). FTS5 tokenizes a query's quoted string as
   * it does a document (porter and unicode61 ignore the query flag); the last test checks MATCH itself.
   */
  function sqlitePhrases(text: string): string[][] {
    const words = queryTerms(text).map((quoted) => quoted.slice(1, -1));
    return sqliteTerms(words);
  }

  it('is one phrase per query term, in order, with duplicates kept', () => {
    const text = 'The running runs; Crème brûlée and the RUNNER runs again';
    expect(queryTerms(text)).toEqual(['"running"', '"runs"', '"creme"', '"brulee"', '"runner"', '"again"']);
    expect(ftsQueryTerms(text)).toEqual([['run'], ['run'], ['creme'], ['brule'], ['runner'], ['again']]);
    expect(ftsQueryTerms('the of and')).toEqual([['the'], ['of'], ['and']]);
    expect(ftsQueryTerms('!!!')).toEqual([]);
    expect(ftsQuery('!!!')).toBeNull();
  });

  it('makes a phrase of a word SQLite splits, and nothing of a word it drops', () => {
    // U+19B0 is a letter to Node (Unicode 8 onwards) and a spacing mark, so a separator, to SQLite.
    expect(ftsQueryTerms('ab\u19b0cd \u19b0')).toEqual([['ab', 'cd'], []]);
    expect(ftsQueryTerms('ab\u19b0cd \u19b0').map((p) => p.map(termHex))).toEqual(sqlitePhrases('ab\u19b0cd \u19b0'));
  });

  it('tokenizes generated queries as SQLite does', () => {
    const word = fc.oneof(
      fc.stringMatching(/^[a-zA-Z]{1,12}$/),
      fc.constantFrom('running', 'Crème', 'ﬁne', 'हिन्दी', 'ab\u19b0cd', 'Ελληνικά', '日本語', 'a\u5000ing', 'İstanbul', 'the', 'and'),
      fc.integer({ min: 0x80, max: 0x2ffff }).map((cp) => String.fromCodePoint(cp)),
    );
    fc.assert(
      fc.property(fc.array(fc.tuple(word, fc.constantFrom(' ', ', ', '-', '?')), { maxLength: 12 }), (parts) => {
        const text = parts.map(([w, sep]) => w + sep).join('');
        const ours = ftsQueryTerms(text);
        expect(ours.length).toBe(queryTerms(text).length);
        expect(ours.map((p) => p.map(termHex))).toEqual(sqlitePhrases(text));
      }),
      { numRuns: 200 },
    );
  });

  it('finds the rows FTS5 finds for the query ftsQuery builds', () => {
    // The index side and the query side agree: a row matches when one of the phrases occurs in it.
    const rows = ['Running late again', 'the runner ran', 'Crème brûlée recipes', 'ab\u19b0cd here', 'hindi हिन्दी'];
    const queries = ['runs', 'creme BRULEE', 'ab\u19b0cd', 'the', 'recipe', 'हिन्दी'];
    db.transaction(() => rows.forEach((row, i) => insertDoc.run(i + 1, row)))();
    try {
      const match = db.prepare('SELECT rowid FROM doc WHERE doc MATCH ? ORDER BY rowid').pluck();
      for (const q of queries) {
        const phrases = ftsQueryTerms(q);
        const expected = rows
          .map((row, i) => ({ tokens: ftsTokens(row), rowid: i + 1 }))
          .filter(({ tokens }) => phrases.some((p) => p.length > 0 && tokens.some((_, at) => p.every((t, k) => tokens[at + k] === t))))
          .map((r) => r.rowid);
        expect(match.all(ftsQuery(q)), q).toEqual(expected);
      }
    } finally {
      clearDocs.run();
    }
  });
});
