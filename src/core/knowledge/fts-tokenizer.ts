/**
 * FTS5's `porter unicode61 remove_diacritics 2` tokenizer (the keyword index's, migration 002) in
 * JavaScript, so a backend without FTS5 (PostgreSQL keeps BM25 postings it computes in Node) indexes
 * and looks up exactly the terms SQLite does, and BM25 ranks the same rows the same way.
 *
 * A port of SQLite 3.54.1's ext/fts5/fts5_tokenize.c and fts5_unicode2.c (the copy better-sqlite3
 * bundles). What follows from that source and is easy to miss:
 * - Token characters are the categories L*, N* and Co of SQLite's own Unicode table (a much older
 *   Unicode than Node's) plus every code point that table leaves out: unassigned code points and
 *   everything at or above U+100000 are token characters too (`sqlite3Fts5UnicodeCatParse` always
 *   sets category 0). Node 24's `\p{L}\p{N}\p{Co}\p{Cn}` (Unicode 17) differs from that in 4,292
 *   code points: 4,271 that SQLite's table leaves unassigned (or, two of them, counts as letters)
 *   and Unicode 17 makes marks, punctuation or symbols (521 are emoji: 🤔 is a term, 😀 is not), and
 *   21 letters that SQLite's table has as spacing marks (U+19B0–U+19C0, U+19C8–U+19C9,
 *   U+1CF2–U+1CF3). The difference moves with each Node's Unicode version, so the table is SQLite's,
 *   as run lengths.
 * - Combining diacritics U+0300–U+0331 (a fixed subset) continue a token and are then dropped; any
 *   other mark ends it ("हिन्दी" is three terms).
 * - Case folding is SQLite's table (simple folds in the BMP plus Deseret) and remove_diacritics=2
 *   maps Latin letters with diacritics to their ASCII letter only; "ά" stays "ά", "ﬁ" stays "ﬁ".
 * - The porter stemmer works on UTF-8 bytes: tokens under 3 or over 64 bytes pass through, every
 *   non-ASCII byte is a consonant, and its step 1b may drop the last byte of a character whose two
 *   final UTF-8 bytes are equal ("a倀ing" is stored as the bytes 61 E5 80). Terms longer than 32,768
 *   bytes are cut to that many bytes, also mid-character.
 * Bytes that are not UTF-8 are returned as U+2500 + (byte − 0x80): box-drawing characters are
 * separators, so no real term contains one, and the mapping keeps distinct SQLite terms distinct in
 * a text column.
 *
 * test/unit/fts-tokenizer.test.ts checks every code point, and generated texts, against SQLite.
 */
import { queryTerms } from './search-index.js';

/** ASCII token characters (`sqlite3Fts5UnicodeAscii` with "L* N* Co"): letters and digits only. */
const ASCII_TOKEN = new Uint8Array(128);
for (let c = 0; c < 128; c++) ASCII_TOKEN[c] = /[0-9A-Za-z]/.test(String.fromCharCode(c)) ? 1 : 0;

/**
 * Non-ASCII token characters: base-36 lengths of alternating runs from U+0080, separators first, to
 * U+10FFFF. Derived from aFts5UnicodeBlock/Map/Data of fts5_unicode2.c through
 * `sqlite3Fts5UnicodeCategory` with the categories "L* N* Co" (and 0, which SQLite always adds).
 */
const TOKEN_RUNS =
  '16 1 7 2 1 1 3 2 1 3 1 n 1 v 1 cq 4 c e 5 7 1 1 1 3l 5 1 8 1 5 2 1 1 32 1 3v 8 5s 6 15 2 4 1 1 ' +
  '1j 17 2 b 5 1 m 2 2 17 l a 4 2 1 2r 1 1 f 2 7 f 2 1 e 1 1 1 1 u r 2j b 1m 9 2 4 s 4 1 9 1 3 1 5 ' +
  '2 f q 3 2 1 3p r 1 4 1i 3 1 i 1 7 a 4 a 1 g 3 1k 1 1 7 2 2 2 3 9 1 a 2 e 2 6 2 5 3 1k 1 1 5 4 2 ' +
  '2 3 3 1 u 2 3 1 b 3 1k 1 1 8 1 3 1 3 k 2 c 2 f 3 1k 1 1 7 2 2 2 3 8 2 a 2 c 1 h 1 1n 5 3 3 1 4 ' +
  '9 1 r 8 6 3 1m 7 1 3 1 4 7 2 b 2 r 1 2 2 1k 1 1 7 1 3 1 4 7 2 b 2 u 2 1m 7 1 3 1 4 9 1 a 2 l 1 ' +
  '8 2 1y 1 4 6 1 1 1 8 i 3 1o 1 2 7 4 1 7 9 a 2 2d 1 2 6 1 2 b 6 1f v k c 1d n 5 b 1 10 1 f 1 d ' +
  '28 k b 6 6 4 4 3 1 3 2 7 3 4 d c 1 1 a 6 2j 1 gx c 13 a 2u 1 h8 2 h 1 q 2 26 3 10 3 t 5 r 2 u 2 ' +
  '1s z 1 4 1 1 y f 4a 1 3a c 4 c 4 1 3 2 2y h 7 2 k y n 5 2 2 1h a 1 t 2 1 w 7 1 6 2a 5 1b h l z ' +
  '3 3 u d 1k e 8 4 10 k 3 5 1q 2 1s 8 8 p 4 1 4 3 5n 13 l 4 cd 1 1 3 b 3 d 3 d 3 d 2 1 2t 5 6 a 5 ' +
  'b 5 h q m x f 2 1 4 1 2 a 1 1 3 5 6 1 1 1 1 1 1 4 1 b 2 4 5 5 4 1 1 1s h0 c 13 p b 29 26 m e8 1 ' +
  '39 u qh 3 a az 6 4 3 7 4 1 2 34 1 e 1 2o 27 1 c 1w q 1 2h c 5y q c 4 5 3 p 9 7 5 2 5 3 2h 4 3 1 ' +
  '2i 1 44 2 4 a w 10 s v b u 8 1 f w a 13 f 1r 1 74 534 1s h3k 1j 1j 2 7h 3 2n g w 1 28 8 8 n 9 2 ' +
  '2v 2 3b 1 3 1 4 1 n 9 a 4 1m 4 8 2 1e h 9 2 g i 6 3 17 a n d b 1 w 4 1b r g 2 21 e c 1 8 2 e 4 ' +
  'n 3 1 1 1g 1 1 3 2 2 5 2 1 1 s 2 b 7 3 2 6k b 8pe 1 ou 2 3i 2 se 1 5cu 1 a 1 3s g ak 2 58 2 2 q ' +
  '6 7 9 z 1 j 1 4 43 1 1 f a 7 q 6 q b 3e 7 1 7 a 5 76 3 1g 9 1l h 6 c 1g 1a bl 1 1c 1 w6 1 5j 1 ' +
  'v 1 5d 3 1 2 5 4 14 3 4 1 g 9 12 1 55 7 xs 3 1h m 1e 3 19 i 1q 3 10 e b 4 1o 3 1c e 4 4 yq d ' +
  '2pk 4 esd 1a g 4 j1p 6u a 13 2 51 y 1y 56 2f oa 1 p 1 v 1 p 1 v 1 p 1 v 1 p 1 v 1 p 1 4ks 2 7i ' +
  '18 4 2s c f 2 e 2 f 1 f 1c v 1 1o 4 17 23 t d 17 5 9 7 2 4u x f 6 1 1y 3 k c 11 1 5 l h f 1r 1 ' +
  '1 1 52 1 4 3 1q 2 4 c o 43 1y 4 b 1c 1y 1m 38 gwi5 1 u 2o 3k 6o 47bk';
/** Code points where token and separator runs start; odd indexes start token runs. */
const RUN_STARTS: Int32Array = (() => {
  const lengths = TOKEN_RUNS.split(' ');
  const starts = new Int32Array(lengths.length);
  let at = 0x80;
  lengths.forEach((length, i) => {
    starts[i] = at;
    at += parseInt(length, 36);
  });
  if (at !== 0x110000) throw new Error('token character runs do not cover Unicode');
  return starts;
})();

function isTokenCodePoint(cp: number): boolean {
  let lo = 0;
  let hi = RUN_STARTS.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (RUN_STARTS[mid]! <= cp) lo = mid;
    else hi = mid - 1;
  }
  return (lo & 1) === 1;
}

/** `sqlite3Fts5UnicodeIsdiacritic`: the combining marks that stay inside a token. */
function isDiacritic(cp: number): boolean {
  if (cp < 768 || cp > 817) return false;
  return cp < 768 + 32 ? ((0x08029fdf >>> (cp - 768)) & 1) === 1 : ((0x000361f8 >>> (cp - 768 - 32)) & 1) === 1;
}

/** fts5_remove_diacritic's aDia: (first code point << 3) | (range length − 1), ranges in order. */
const DIACRITIC_KEYS = [
  0, 1797, 1848, 1859, 1891, 1928, 1940, 1995, 2024, 2040, 2060, 2110, 2168, 2206, 2264, 2286,
  2344, 2383, 2472, 2488, 2516, 2596, 2668, 2732, 2782, 2842, 2894, 2954, 2984, 3000, 3028, 3336,
  3456, 3696, 3712, 3728, 3744, 3766, 3832, 3896, 3912, 3928, 3944, 3968, 4008, 4040, 4056, 4106,
  4138, 4170, 4202, 4234, 4266, 4296, 4312, 4344, 4408, 4424, 4442, 4472, 4488, 4504, 6148, 6198,
  6264, 6280, 6360, 6429, 6505, 6529, 61448, 61468, 61512, 61534, 61592, 61610, 61642, 61672, 61688, 61704,
  61726, 61784, 61800, 61816, 61836, 61880, 61896, 61914, 61948, 61998, 62062, 62122, 62154, 62184, 62200, 62218,
  62252, 62302, 62364, 62410, 62442, 62478, 62536, 62554, 62584, 62604, 62640, 62648, 62656, 62664, 62730, 62766,
  62830, 62890, 62924, 62974, 63032, 63050, 63082, 63118, 63182, 63242, 63274, 63310, 63368, 63390,
];
/**
 * fts5_remove_diacritic's aChar, one character per aDia entry: the ASCII letter a range folds to,
 * upper case where SQLite sets HIBIT (folded only with remove_diacritics=2), '.' for none (dropped).
 */
const DIACRITIC_BASE =
  '.aceinouyyacdeeghijklnorstuuwyzouaiouUAgkoOjgnAaeiorusthaeOoOy........abCddEeEfghhiIklLlmnOprRrsStuUvwwxyzhtwyaAAAeEEioOOOuUUy';

/** fts5_remove_diacritic(c, bComplex=1). */
function removeDiacritic(c: number): number {
  const key = ((c << 3) | 7) >>> 0;
  let res = 0;
  let lo = 0;
  let hi = DIACRITIC_KEYS.length - 1;
  while (hi >= lo) {
    const mid = (hi + lo) >> 1;
    if (key >= DIACRITIC_KEYS[mid]!) {
      res = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  const entry = DIACRITIC_KEYS[res]!;
  if (c > (entry >> 3) + (entry & 7)) return c;
  const base = DIACRITIC_BASE[res]!;
  return base === '.' ? 0 : base.toLowerCase().charCodeAt(0);
}

/** sqlite3Fts5UnicodeFold's aEntry as (first code point, flags, range length) triples. */
const FOLD_ENTRIES = [
  65, 14, 26, 181, 64, 1, 192, 14, 23, 216, 14, 7, 256, 1, 48, 306, 1, 6,
  313, 1, 16, 330, 1, 46, 376, 116, 1, 377, 1, 6, 383, 104, 1, 385, 50, 1,
  386, 1, 4, 390, 44, 1, 391, 0, 1, 393, 42, 2, 395, 0, 1, 398, 32, 1,
  399, 38, 1, 400, 40, 1, 401, 0, 1, 403, 42, 1, 404, 46, 1, 406, 52, 1,
  407, 48, 1, 408, 0, 1, 412, 52, 1, 413, 54, 1, 415, 56, 1, 416, 1, 6,
  422, 60, 1, 423, 0, 1, 425, 60, 1, 428, 0, 1, 430, 60, 1, 431, 0, 1,
  433, 58, 2, 435, 1, 4, 439, 62, 1, 440, 0, 1, 444, 0, 1, 452, 2, 1,
  453, 0, 1, 455, 2, 1, 456, 0, 1, 458, 2, 1, 459, 1, 18, 478, 1, 18,
  497, 2, 1, 498, 1, 4, 502, 122, 1, 503, 134, 1, 504, 1, 40, 544, 110, 1,
  546, 1, 18, 570, 70, 1, 571, 0, 1, 573, 108, 1, 574, 68, 1, 577, 0, 1,
  579, 106, 1, 580, 28, 1, 581, 30, 1, 582, 1, 10, 837, 36, 1, 880, 1, 4,
  886, 0, 1, 902, 18, 1, 904, 16, 3, 908, 26, 1, 910, 24, 2, 913, 14, 17,
  931, 14, 9, 962, 0, 1, 975, 4, 1, 976, 140, 1, 977, 142, 1, 981, 146, 1,
  982, 144, 1, 984, 1, 24, 1008, 136, 1, 1009, 138, 1, 1012, 130, 1, 1013, 128, 1,
  1015, 0, 1, 1017, 152, 1, 1018, 0, 1, 1021, 110, 3, 1024, 34, 16, 1040, 14, 32,
  1120, 1, 34, 1162, 1, 54, 1216, 6, 1, 1217, 1, 14, 1232, 1, 88, 1329, 22, 38,
  4256, 66, 38, 4295, 66, 1, 4301, 66, 1, 7680, 1, 150, 7835, 132, 1, 7838, 96, 1,
  7840, 1, 96, 7944, 150, 8, 7960, 150, 6, 7976, 150, 8, 7992, 150, 8, 8008, 150, 6,
  8025, 151, 8, 8040, 150, 8, 8072, 150, 8, 8088, 150, 8, 8104, 150, 8, 8120, 150, 2,
  8122, 126, 2, 8124, 148, 1, 8126, 100, 1, 8136, 124, 4, 8140, 148, 1, 8152, 150, 2,
  8154, 120, 2, 8168, 150, 2, 8170, 118, 2, 8172, 152, 1, 8184, 112, 2, 8186, 114, 2,
  8188, 148, 1, 8486, 98, 1, 8490, 92, 1, 8491, 94, 1, 8498, 12, 1, 8544, 8, 16,
  8579, 0, 1, 9398, 10, 26, 11264, 22, 47, 11360, 0, 1, 11362, 88, 1, 11363, 102, 1,
  11364, 90, 1, 11367, 1, 6, 11373, 84, 1, 11374, 86, 1, 11375, 80, 1, 11376, 82, 1,
  11378, 0, 1, 11381, 0, 1, 11390, 78, 2, 11392, 1, 100, 11499, 1, 4, 11506, 0, 1,
  42560, 1, 46, 42624, 1, 24, 42786, 1, 14, 42802, 1, 62, 42873, 1, 4, 42877, 76, 1,
  42878, 1, 10, 42891, 0, 1, 42893, 74, 1, 42896, 1, 4, 42912, 1, 10, 42922, 72, 1,
  65313, 14, 26,
];
/** sqlite3Fts5UnicodeFold's aiOff. */
const FOLD_OFFSETS = [
  1, 2, 8, 15, 16, 26, 28, 32, 37, 38, 40, 48, 63, 64, 69, 71,
  79, 80, 116, 202, 203, 205, 206, 207, 209, 210, 211, 213, 214, 217, 218, 219,
  775, 7264, 10792, 10795, 23228, 23256, 30204, 54721, 54753, 54754, 54756, 54787, 54793, 54809, 57153, 57274,
  57921, 58019, 58363, 61722, 65268, 65341, 65373, 65406, 65408, 65410, 65415, 65424, 65436, 65439, 65450, 65462,
  65472, 65476, 65478, 65480, 65482, 65488, 65506, 65511, 65514, 65521, 65527, 65528, 65529,
];

/** sqlite3Fts5UnicodeFold(c, 2) for c >= 128: 0 means the character is dropped. */
function foldCodePoint(c: number): number {
  if (c >= 65536) return c >= 66560 && c < 66600 ? c + 40 : c;
  let res = 0;
  let lo = 0;
  let hi = FOLD_ENTRIES.length / 3 - 1;
  while (hi >= lo) {
    const mid = (hi + lo) >> 1;
    if (c >= FOLD_ENTRIES[mid * 3]!) {
      res = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  const code = FOLD_ENTRIES[res * 3]!;
  const flags = FOLD_ENTRIES[res * 3 + 1]!;
  let ret = c;
  if (c < code + FOLD_ENTRIES[res * 3 + 2]! && (0x01 & flags & (code ^ c)) === 0) {
    ret = (c + FOLD_OFFSETS[flags >> 1]!) & 0xffff;
  }
  return removeDiacritic(ret);
}

/**
 * What unicode61 does with each BMP code unit, computed once when first seen: 0 not yet,
 * else 1 | token << 1 | diacritic << 2 | fold << 3.
 */
const BMP = new Uint32Array(0x10000);
const TOKEN = 2;
const DIACRITIC = 4;

function bmpClass(c: number): number {
  let v = BMP[c]!;
  if (v === 0) {
    // SQLite reads U+FFFE, U+FFFF and unpaired surrogates (sent as U+FFFD) as U+FFFD, a separator.
    const cp = (c & 0xf800) === 0xd800 || c >= 0xfffe ? 0xfffd : c;
    v = 1 | (isTokenCodePoint(cp) ? TOKEN : 0) | (isDiacritic(cp) ? DIACRITIC : 0) | (foldCodePoint(cp) << 3);
    BMP[c] = v;
  }
  return v;
}

/** Longest token FTS5 stems, and the longest term it stores (both in UTF-8 bytes). */
const PORTER_MAX_BYTES = 64;
const MAX_TERM_BYTES = 32768;

/**
 * The terms FTS5 indexes for `text` with `tokenize='porter unicode61 remove_diacritics 2'`, one per
 * token in order (the same list, for a column, as fts5vocab's 'instance' table ordered by offset).
 */
export function ftsTokens(text: string): string[] {
  const terms: string[] = [];
  const n = text.length;
  let i = 0;
  for (;;) {
    // Separators. A token's first character must be a token character (a diacritic is not).
    let start = -1;
    let startFold = 0;
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c < 128) {
        if (ASCII_TOKEN[c] === 1) {
          start = i;
          break;
        }
        i++;
      } else if ((c & 0xfc00) === 0xd800 && i + 1 < n && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
        const cp = ((c - 0xd800) << 10) + (text.charCodeAt(i + 1) - 0xdc00) + 0x10000;
        if (isTokenCodePoint(cp)) {
          start = i;
          startFold = foldCodePoint(cp);
          i += 2;
          break;
        }
        i += 2;
      } else {
        const v = bmpClass(c);
        if ((v & TOKEN) !== 0) {
          start = i;
          startFold = v >>> 3;
          i++;
          break;
        }
        i++;
      }
    }
    if (start < 0) return terms;

    // The token: ASCII runs are sliced from the text and lower-cased; other characters folded.
    let term = startFold === 0 ? '' : String.fromCodePoint(startFold);
    let ascii = term.length === 0 || startFold < 128;
    let runStart = i;
    let upper = false;
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c < 128) {
        if (ASCII_TOKEN[c] === 0) break;
        if (c <= 90 && c >= 65) upper = true;
        i++;
        continue;
      }
      let fold: number;
      let width = 1;
      if ((c & 0xfc00) === 0xd800 && i + 1 < n && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
        const cp = ((c - 0xd800) << 10) + (text.charCodeAt(i + 1) - 0xdc00) + 0x10000;
        if (!isTokenCodePoint(cp)) break;
        fold = foldCodePoint(cp);
        width = 2;
      } else {
        const v = bmpClass(c);
        if ((v & (TOKEN | DIACRITIC)) === 0) break;
        fold = v >>> 3;
      }
      if (runStart < i) term += upper ? text.slice(runStart, i).toLowerCase() : text.slice(runStart, i);
      upper = false;
      if (fold !== 0) {
        term += String.fromCodePoint(fold);
        if (fold >= 128) ascii = false;
      }
      i += width;
      runStart = i;
    }
    if (runStart < i) term += upper ? text.slice(runStart, i).toLowerCase() : text.slice(runStart, i);
    terms.push(ascii ? stemAscii(term) : stemUnicode(term));
  }
}

function stemAscii(term: string): string {
  if (term.length < 3) return term;
  if (term.length > PORTER_MAX_BYTES) return term.length > MAX_TERM_BYTES ? term.slice(0, MAX_TERM_BYTES) : term;
  return porter(term);
}

/** The stem of a token with non-ASCII characters, stemmed (or cut) as its UTF-8 bytes. */
function stemUnicode(term: string): string {
  const bytes = Buffer.from(term, 'utf8');
  if (bytes.length < 3) return term;
  if (bytes.length > PORTER_MAX_BYTES) {
    return bytes.length > MAX_TERM_BYTES ? termOfBytes(bytes.subarray(0, MAX_TERM_BYTES)) : term;
  }
  const before = bytes.toString('latin1');
  const after = porter(before);
  return after === before ? term : termOfBytes(Buffer.from(after, 'latin1'));
}

/** UTF-8 to text, every byte that is not part of a well-formed character as U+2500 + (byte − 0x80). */
function termOfBytes(bytes: Uint8Array): string {
  let out = '';
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i]!;
    if (b < 0x80) {
      out += String.fromCharCode(b);
      i++;
      continue;
    }
    const need = b >= 0xc2 && b <= 0xdf ? 1 : b >= 0xe0 && b <= 0xef ? 2 : b >= 0xf0 && b <= 0xf4 ? 3 : 0;
    let cp = b & (need === 1 ? 0x1f : need === 2 ? 0x0f : 0x07);
    let ok = need > 0 && i + need < bytes.length;
    for (let k = 1; ok && k <= need; k++) {
      const next = bytes[i + k]!;
      ok = (next & 0xc0) === 0x80;
      cp = (cp << 6) | (next & 0x3f);
    }
    // Overlong forms, surrogates and code points beyond Unicode are not characters either.
    if (ok && need === 2) ok = cp >= 0x800 && (cp & 0xf800) !== 0xd800;
    if (ok && need === 3) ok = cp >= 0x10000 && cp <= 0x10ffff;
    if (ok) {
      out += String.fromCodePoint(cp);
      i += need + 1;
    } else {
      out += String.fromCharCode(0x2500 + b - 0x80);
      i++;
    }
  }
  return out;
}

// The porter stemmer of fts5_tokenize.c. `w` holds one character per byte; `n` is the stem's
// length in bytes (a step may shorten it without copying).

function isVowel(c: number, yIsVowel: boolean): boolean {
  return c === 97 || c === 101 || c === 105 || c === 111 || c === 117 || (yIsVowel && c === 121);
}

/** fts5PorterGobbleVC over w[from, to): the index after the first vowel-consonant pair, or -1. */
function gobbleVC(w: string, from: number, to: number, prevCons: boolean): number {
  let cons = prevCons;
  let i = from;
  for (; i < to; i++) {
    cons = !isVowel(w.charCodeAt(i), cons);
    if (!cons) break;
  }
  for (i++; i < to; i++) {
    cons = !isVowel(w.charCodeAt(i), cons);
    if (cons) return i + 1;
  }
  return -1;
}

/** (m > 0) of w[0, n). */
const mGt0 = (w: string, n: number) => gobbleVC(w, 0, n, false) >= 0;
/** (m > 1) */
function mGt1(w: string, n: number): boolean {
  const k = gobbleVC(w, 0, n, false);
  return k >= 0 && gobbleVC(w, k, n, true) >= 0;
}
/** (m = 1) */
function mEq1(w: string, n: number): boolean {
  const k = gobbleVC(w, 0, n, false);
  return k >= 0 && gobbleVC(w, k, n, true) < 0;
}
/** (*o): consonant-vowel-consonant at the end, the last not w, x or y. */
function oStar(w: string, n: number): boolean {
  const last = w.charCodeAt(n - 1);
  if (last === 119 || last === 120 || last === 121) return false;
  let mask = 0;
  let cons = false;
  for (let i = 0; i < n; i++) {
    cons = !isVowel(w.charCodeAt(i), cons);
    mask = ((mask << 1) + (cons ? 1 : 0)) & 7;
  }
  return mask === 5;
}
/** (*v*): note y counts as a vowel anywhere but first, whatever precedes it. */
function hasVowel(w: string, n: number): boolean {
  for (let i = 0; i < n; i++) if (isVowel(w.charCodeAt(i), i > 0)) return true;
  return false;
}
/** (m > 1 and (*S or *T)) */
const mGt1AndSOrT = (w: string, n: number) => {
  const c = w.charCodeAt(n - 1);
  return (c === 115 || c === 116) && mGt1(w, n);
};

type Condition = ((w: string, n: number) => boolean) | null;
/** One generated rule: suffix, condition on the stem before it, replacement. */
interface Rule {
  suffix: string;
  condition: Condition;
  replacement: string;
}

/**
 * A step of mkportersteps.tcl's generated code: the rules are tried by the word's second-to-last
 * byte (the index into this table), in order, and only the first whose suffix matches (leaving a
 * non-empty stem) is applied or refused.
 */
function step(rules: readonly [suffix: string, condition: Condition, replacement: string][]): Rule[][] {
  const bySecondLast: Rule[][] = Array.from({ length: 128 }, () => []);
  for (const [suffix, condition, replacement] of rules) {
    bySecondLast[suffix.charCodeAt(suffix.length - 2)]!.push({ suffix, condition, replacement });
  }
  return bySecondLast;
}

const STEP_1B = step([
  ['eed', mGt0, 'ee'],
  ['ed', hasVowel, ''],
  ['ing', hasVowel, ''],
]);
const STEP_1B2 = step([
  ['at', null, 'ate'],
  ['bl', null, 'ble'],
  ['iz', null, 'ize'],
]);
const STEP_2 = step([
  ['ational', mGt0, 'ate'],
  ['tional', mGt0, 'tion'],
  ['enci', mGt0, 'ence'],
  ['anci', mGt0, 'ance'],
  ['izer', mGt0, 'ize'],
  ['logi', mGt0, 'log'],
  ['bli', mGt0, 'ble'],
  ['alli', mGt0, 'al'],
  ['entli', mGt0, 'ent'],
  ['eli', mGt0, 'e'],
  ['ousli', mGt0, 'ous'],
  ['ization', mGt0, 'ize'],
  ['ation', mGt0, 'ate'],
  ['ator', mGt0, 'ate'],
  ['alism', mGt0, 'al'],
  ['iveness', mGt0, 'ive'],
  ['fulness', mGt0, 'ful'],
  ['ousness', mGt0, 'ous'],
  ['aliti', mGt0, 'al'],
  ['iviti', mGt0, 'ive'],
  ['biliti', mGt0, 'ble'],
]);
const STEP_3 = step([
  ['ical', mGt0, 'ic'],
  ['ness', mGt0, ''],
  ['icate', mGt0, 'ic'],
  ['iciti', mGt0, 'ic'],
  ['ful', mGt0, ''],
  ['ative', mGt0, ''],
  ['alize', mGt0, 'al'],
]);
const STEP_4 = step([
  ['al', mGt1, ''],
  ['ance', mGt1, ''],
  ['ence', mGt1, ''],
  ['er', mGt1, ''],
  ['ic', mGt1, ''],
  ['able', mGt1, ''],
  ['ible', mGt1, ''],
  ['ant', mGt1, ''],
  ['ement', mGt1, ''],
  ['ment', mGt1, ''],
  ['ent', mGt1, ''],
  ['ion', mGt1AndSOrT, ''],
  ['ou', mGt1, ''],
  ['ism', mGt1, ''],
  ['ate', mGt1, ''],
  ['iti', mGt1, ''],
  ['ous', mGt1, ''],
  ['ive', mGt1, ''],
  ['ize', mGt1, ''],
]);

/** The word being stemmed: its bytes (as characters) and the current length. One, reused: stemming never nests. */
const word = { w: '', n: 0 };

/** Applies one step: the suffix it replaced, or undefined when none (no suffix matched, or its condition failed). */
function apply(rules: readonly Rule[][]): string | undefined {
  const { w, n } = word;
  const list = rules[w.charCodeAt(n - 2)];
  if (list === undefined) return undefined;
  for (let i = 0; i < list.length; i++) {
    const { suffix, condition, replacement } = list[i]!;
    const k = suffix.length;
    if (n > k && w.startsWith(suffix, n - k)) {
      if (condition !== null && !condition(w, n - k)) return undefined;
      if (replacement.length === 0) word.n = n - k;
      else {
        word.w = w.slice(0, n - k) + replacement;
        word.n = word.w.length;
      }
      return suffix;
    }
  }
  return undefined;
}

/** fts5PorterCb's stemming of one token of 3 to 64 bytes. */
function porter(token: string): string {
  word.w = token;
  word.n = token.length;
  const at = (i: number) => word.w.charCodeAt(i);

  // Step 1a.
  if (at(word.n - 1) === 115) {
    const n = word.n;
    if (at(n - 2) === 101) {
      word.n = (n > 4 && at(n - 4) === 115 && at(n - 3) === 115) || (n > 3 && at(n - 3) === 105) ? n - 2 : n - 1;
    } else if (at(n - 2) !== 115) word.n = n - 1;
  }

  // Step 1b; only a removed "ed" or "ing" leads on to the clean-up ("eed" → "ee" does not).
  const step1b = apply(STEP_1B);
  if (step1b !== undefined && step1b !== 'eed' && apply(STEP_1B2) === undefined) {
    const n = word.n;
    const c = at(n - 1);
    if (!isVowel(c, false) && c !== 108 && c !== 115 && c !== 122 && c === at(n - 2)) word.n = n - 1;
    else if (mEq1(word.w, n) && oStar(word.w, n)) {
      word.w = word.w.slice(0, n) + 'e';
      word.n = n + 1;
    }
  }

  // Step 1c.
  if (at(word.n - 1) === 121 && hasVowel(word.w, word.n - 1)) {
    word.w = word.w.slice(0, word.n - 1) + 'i';
  }

  apply(STEP_2);
  apply(STEP_3);
  apply(STEP_4);

  // Step 5a.
  if (at(word.n - 1) === 101) {
    const n = word.n;
    if (mGt1(word.w, n - 1) || (mEq1(word.w, n - 1) && !oStar(word.w, n - 1))) word.n = n - 1;
  }

  // Step 5b.
  if (word.n > 1 && at(word.n - 1) === 108 && at(word.n - 2) === 108 && mGt1(word.w, word.n - 1)) word.n--;

  return word.n === word.w.length ? word.w : word.w.slice(0, word.n);
}

/**
 * The phrases FTS5 looks up for the keyword query of `text` (the MATCH expression `ftsQuery` builds):
 * one per term of `queryTerms(text)`, in that order, each the terms its quoted word tokenizes to.
 * A word is usually one term, but can be several (a phrase: the terms must follow each other in one
 * column; U+19B0–U+19C0, U+19C8–U+19C9 and U+1CF2–U+1CF3 are letters to Node and separators to SQLite)
 * or none (it matches nothing and adds nothing to BM25). Duplicates are kept: "running runs" is two
 * phrases "run", and FTS5's bm25() counts each.
 */
export function ftsQueryTerms(text: string): string[][] {
  // queryTerms quotes words of letters and digits, which never contain a quote to unescape.
  return queryTerms(text).map((quoted) => ftsTokens(quoted.slice(1, -1)));
}
