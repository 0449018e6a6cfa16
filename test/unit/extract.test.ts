import fs from 'node:fs';
import JSZip from 'jszip';
import { describe, expect, it } from 'vitest';
import { UnsupportedMediaTypeError } from '../../src/errors.js';
import { detectKind, extract, ExtractionError, FILE_KINDS, type FileKind } from '../../src/core/knowledge/extract.js';
import { cleanInline } from '../../src/core/knowledge/extractors/common.js';

const fixture = (name: string): Buffer => fs.readFileSync(new URL(`../fixtures/knowledge/${name}`, import.meta.url));
const texts = (blocks: { text: string }[]): string[] => blocks.map((block) => block.text);

async function extractionError(kind: FileKind, data: Buffer): Promise<ExtractionError> {
  const error = await extract(kind, data).then(
    () => null,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(ExtractionError);
  return error as ExtractionError;
}

/** Runs `fn` and returns how long it took, in milliseconds. */
async function timed(fn: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

async function zipOf(files: Record<string, string>): Promise<Buffer> {
  const zip = new JSZip();
  for (const [name, content] of Object.entries(files)) zip.file(name, content);
  return zip.generateAsync({ type: 'nodebuffer' });
}

describe('detectKind', () => {
  it('reads the media type, ignoring parameters and case', () => {
    expect(detectKind({ mediaType: 'text/plain' })).toBe('text');
    expect(detectKind({ mediaType: 'text/markdown; charset=utf-8' })).toBe('markdown');
    expect(detectKind({ mediaType: 'text/x-markdown' })).toBe('markdown');
    expect(detectKind({ mediaType: 'Text/HTML; charset=ISO-8859-1' })).toBe('html');
    expect(detectKind({ mediaType: 'application/xhtml+xml' })).toBe('html');
    expect(detectKind({ mediaType: 'application/pdf' })).toBe('pdf');
    expect(detectKind({ mediaType: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document' })).toBe('docx');
    expect(detectKind({ mediaType: 'text/csv' })).toBe('csv');
    expect(detectKind({ mediaType: 'application/json' })).toBe('json');
    expect(detectKind({ mediaType: 'application/ld+json' })).toBe('json');
  });

  it('prefers a specific media type to the name, and refines text/plain by a text extension', () => {
    expect(detectKind({ mediaType: 'application/pdf', filename: 'notes.txt' })).toBe('pdf');
    expect(detectKind({ mediaType: 'text/plain', filename: 'README.md' })).toBe('markdown');
    expect(detectKind({ mediaType: 'text/plain; charset=utf-8', filename: 'data.csv' })).toBe('csv');
    expect(detectKind({ mediaType: 'text/plain', filename: 'report.pdf' })).toBe('text');
  });

  it('falls back to the extension for octet-stream or no media type', () => {
    const cases: [string, FileKind][] = [
      ['a.txt', 'text'], ['a.text', 'text'], ['a.md', 'markdown'], ['a.markdown', 'markdown'], ['a.html', 'html'],
      ['a.htm', 'html'], ['REPORT.PDF', 'pdf'], ['a.docx', 'docx'], ['a.csv', 'csv'], ['a.json', 'json'],
    ];
    for (const [filename, kind] of cases) {
      expect(detectKind({ mediaType: 'application/octet-stream', filename })).toBe(kind);
      expect(detectKind({ filename })).toBe(kind);
    }
    expect(detectKind({ mediaType: null, filename: 'https://example.com/docs/guide.md?raw=1#top' })).toBe('markdown');
  });

  it('falls back to magic bytes: %PDF- and a zip holding word/document.xml', async () => {
    expect(detectKind({ bytes: fixture('sample.pdf') })).toBe('pdf');
    expect(detectKind({ mediaType: 'application/octet-stream', filename: 'upload', bytes: fixture('sample.docx') })).toBe('docx');
    expect(detectKind({ bytes: await zipOf({ 'hello.txt': 'hi' }) })).toBeNull();
    expect(detectKind({ bytes: fixture('sample.txt') })).toBeNull();
  });

  it('returns null for what it cannot read', () => {
    expect(detectKind({ mediaType: 'image/png' })).toBeNull();
    expect(detectKind({ mediaType: 'image/png', filename: 'photo.png', bytes: Buffer.from([0x89, 0x50, 0x4e, 0x47]) })).toBeNull();
    expect(detectKind({ filename: 'setup.exe' })).toBeNull();
    expect(detectKind({ filename: 'Makefile' })).toBeNull();
    expect(detectKind({})).toBeNull();
  });
});

describe('extract: common rules', () => {
  it('lists the file kinds', () => {
    expect([...FILE_KINDS].sort()).toEqual(['csv', 'docx', 'html', 'json', 'markdown', 'pdf', 'text']);
  });

  it('refuses a kind it does not read with UnsupportedMediaTypeError (415)', async () => {
    const error = await extract('url' as FileKind, Buffer.from('https://example.com')).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(UnsupportedMediaTypeError);
    expect((error as UnsupportedMediaTypeError).status).toBe(415);
  });

  it('survives control-character soup and invalid UTF-8 given as text', async () => {
    const soup = Buffer.concat([Buffer.from('\u0000\u0001 hello\u0007 \u001b[31mworld\n\n'), Buffer.from([0xc3, 0x28, 0xff, 0x00])]);
    const { blocks } = await extract('text', soup);
    expect(texts(blocks)).toEqual(['hello [31mworld', '\uFFFD(\uFFFD']);
  });

  it('cleans prose exactly as replacing every control and whitespace run and normalising everything would (every BMP code unit)', () => {
    const reference = (text: string) =>
      text.replace(/[\u0000-\u0008\u000B-\u001F\u007F]/g, ' ').replace(/\s+/g, ' ').trim().normalize('NFC');
    const mismatches: string[] = [];
    for (let c = 0; c <= 0xffff; c++) {
      const char = String.fromCharCode(c);
      // Alone between letters, doubled, at the edges, and after a base letter it may compose with.
      for (const text of [`a${char}b`, `a ${char}${char} b`, `${char}x${char}`, `e${char}`, `${char}\u0301 z`]) {
        if (cleanInline(text) !== reference(text)) mismatches.push(`U+${c.toString(16).padStart(4, '0')} in ${JSON.stringify(text)}`);
      }
    }
    expect(mismatches).toEqual([]);
  });

  it('normalises Unicode to NFC', async () => {
    const { blocks } = await extract('markdown', Buffer.from('# Cafe\u0301\n\nre\u0301sume\u0301'));
    expect(blocks).toEqual([{ headingPath: ['Caf\u00e9'], text: 'r\u00e9sum\u00e9' }]);
  });
});

describe('extract: text', () => {
  it('splits paragraphs on blank lines, joins lines, strips the BOM and keeps Unicode', async () => {
    const { title, blocks } = await extract('text', fixture('sample.txt'));
    expect(title).toBeNull();
    expect(blocks).toEqual([
      { headingPath: [], text: 'Switchboard release notes =========================' },
      { headingPath: [], text: 'Version 1.2 adds knowledge ingestion: PDF, DOCX, HTML and Markdown files are split into passages.' },
      { headingPath: [], text: 'Tabs and runs of spaces collapse.' },
      { headingPath: [], text: 'Café, naïve, 日本語 and emoji 🚀 stay intact.' },
    ]);
  });

  it('decodes UTF-16 with a BOM', async () => {
    const utf16 = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('Grüße\r\n\r\nzwei', 'utf16le')]);
    expect(texts((await extract('text', utf16)).blocks)).toEqual(['Grüße', 'zwei']);
  });
});

describe('extract: markdown', () => {
  it('reads headings, paragraphs, lists, code, quotes and tables from the fixture', async () => {
    const { title, blocks } = await extract('markdown', fixture('sample.md'));
    expect(title).toBe('Switchboard Guide');
    expect(blocks[2]?.headingPath).toEqual(['Guide', 'Installation']);
    expect(blocks).toEqual([
      { headingPath: ['Guide'], text: 'Switchboard is an agent platform in one process. See the API contract for the details.' },
      { headingPath: ['Guide', 'Installation'], text: 'Install it with npm install switchboard and start the server.' },
      { headingPath: ['Guide', 'Installation'], text: 'Node 20 or newer' },
      { headingPath: ['Guide', 'Installation'], text: 'A writable data directory that holds the database' },
      { headingPath: ['Guide', 'Installation'], text: 'SQLite with FTS5 logo full-text search' },
      { headingPath: ['Guide', 'Installation'], text: 'Clone the repository' },
      { headingPath: ['Guide', 'Installation'], text: 'Run the migrations' },
      { headingPath: ['Guide', 'Installation'], text: 'npm run build\nnode dist/src/main.js serve   # listens on :3000' },
      { headingPath: ['Guide', 'Installation'], text: 'Keys are shown once. Store them somewhere safe.' },
      { headingPath: ['Guide', 'Configuration'], text: 'Variable | Default | Meaning' },
      { headingPath: ['Guide', 'Configuration'], text: 'PORT | 3000 | The HTTP port' },
      { headingPath: ['Guide', 'Configuration'], text: 'SWITCHBOARD_SECRET | Encryption key' },
      {
        headingPath: ['Guide', 'Configuration', 'Environment'],
        text: 'Variables like max_tokens keep their snake_case names; 2 * 3 stays arithmetic.',
      },
      { headingPath: ['Usage'], text: 'Ask a question; the persona answers from the knowledge base & cites it.' },
    ]);
    expect(texts(blocks).join('\n')).not.toMatch(/tags:|```|\*\*|\]\(|https:\/\/example/);
  });

  it('keeps a level-1 heading above a level-2 one and replaces deeper ones', async () => {
    const md = '# A\n\n## B\n\n### C\n\none\n\n## D\n\ntwo\n\n#### E\n\nthree\n\n# F ##\n\nfour';
    const { blocks } = await extract('markdown', Buffer.from(md));
    expect(blocks).toEqual([
      { headingPath: ['A', 'B', 'C'], text: 'one' },
      { headingPath: ['A', 'D'], text: 'two' },
      { headingPath: ['A', 'D', 'E'], text: 'three' },
      { headingPath: ['F'], text: 'four' },
    ]);
  });

  it('treats an unclosed front matter fence as a rule and #hashtags as text', async () => {
    const { title, blocks } = await extract('markdown', Buffer.from('---\ntitle: Not front matter\n\n#hashtag only'));
    expect(title).toBeNull();
    expect(texts(blocks)).toEqual(['title: Not front matter', '#hashtag only']);
  });

  it('finishes 1 MB inputs, ordinary and adversarial, in linear time', async () => {
    const MB = 1 << 20;
    const doc = '# Title\n\nSome *text* with [a link](http://x.y) and `code`.\n\n- item\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n';
    const ordinary = doc.repeat(Math.ceil(MB / doc.length));
    let blockCount = 0;
    const elapsed = await timed(async () => {
      blockCount = (await extract('markdown', Buffer.from(ordinary))).blocks.length;
    });
    expect(blockCount).toBe(Math.ceil(MB / doc.length) * 4); // paragraph, item, two table rows
    expect(elapsed).toBeLessThan(5_000);

    const adversarial = [
      '['.repeat(MB),
      '[a]('.repeat(MB / 4),
      '![a](b'.repeat(MB / 6),
      Array.from({ length: 3000 }, (_, i) => `${'`'.repeat(1 + (i % 40))}x`).join(''),
      '*_'.repeat(MB / 2),
      '<a'.repeat(MB / 2),
      `# ${' '.repeat(MB)}x`,
      `a\n${'='.repeat(MB)}x`,
      `${'|'.repeat(MB)}\n${'|-'.repeat(MB / 2)}`,
      '\\'.repeat(MB),
    ];
    for (const input of adversarial) {
      expect(await timed(() => extract('markdown', Buffer.from(input)))).toBeLessThan(5_000);
    }
  });
});

describe('extract: html', () => {
  it('reads the article with its headings, lists, code and tables', async () => {
    const { title, blocks } = await extract('html', fixture('sample.html'));
    expect(title).toBe('Café Operations Manual');
    expect(blocks).toEqual([
      {
        headingPath: ['Running the Café'],
        text: 'This manual describes how the café opens, serves and closes every day. It is written for new staff, shift leads and owners, and it is kept short on purpose, so that everyone reads it to the end.',
      },
      {
        headingPath: ['Running the Café', 'Opening'],
        text: 'Unlock the door at 7:00, switch on the espresso machine & grinder, and check the fridge temperature before the first customer arrives.',
      },
      { headingPath: ['Running the Café', 'Opening'], text: 'Count the till float' },
      { headingPath: ['Running the Café', 'Opening'], text: 'Wipe the counters' },
      {
        headingPath: ['Running the Café', 'Opening', 'Coffee'],
        text: 'Dial in the grinder with two test shots; the extraction should take between 25 and 30 seconds, with a dose of 18 grams.',
      },
      { headingPath: ['Running the Café', 'Opening', 'Coffee'], text: 'dose: 18g\nyield: 36g' },
      { headingPath: ['Running the Café', 'Opening', 'Coffee'], text: 'Drink | Price' },
      { headingPath: ['Running the Café', 'Opening', 'Coffee'], text: 'Espresso | 2.50' },
      { headingPath: ['Running the Café', 'Closing'], text: 'Loose text in a div about closing the shop and cleaning the machine thoroughly.' },
      { headingPath: ['Running the Café', 'Closing'], text: 'Never leave the machine on overnight.' },
    ]);
  });

  it('never outputs scripts, styles, navigation or other page furniture', async () => {
    const all = texts((await extract('html', fixture('sample.html'))).blocks).join('\n');
    for (const noise of [
      'trackingSecret', 'inline script body', 'font-family', 'Menu navigation', 'ACME Corp header', 'Footer copyright',
      'Sidebar advertisement', 'Subscribe form', 'noscript notice',
      'Related stories', // not in any removed element: only readability's article selection leaves it out
    ]) {
      expect(all).not.toContain(noise);
    }
  });

  it('reads the whole body when readability finds no article, and a bare h1 is a heading, not the title', async () => {
    const html = '<h1>Only heading</h1><p>Short &amp; sweet.</p><div>Loose <b>div</b> text</div><script>evil()</script>';
    const { title, blocks } = await extract('html', Buffer.from(html));
    expect(title).toBeNull();
    expect(blocks).toEqual([
      { headingPath: ['Only heading'], text: 'Short & sweet.' },
      { headingPath: ['Only heading'], text: 'Loose div text' },
    ]);
  });

  it('keeps the h1 that readability drops for repeating the title at the top of the heading path', async () => {
    const sentence = 'Roasting changes the flavour, the body and the acidity of the beans, and every roaster has a style. ';
    const html = `<html><head><title>Roasting Guide</title></head><body><article><h1>Roasting Guide</h1>
      <p>${sentence.repeat(4)}</p><h2>Light roast</h2><p>${sentence.repeat(3)}</p></article></body></html>`;
    const { title, blocks } = await extract('html', Buffer.from(html));
    expect(title).toBe('Roasting Guide');
    expect(blocks.map((block) => block.headingPath)).toEqual([['Roasting Guide'], ['Roasting Guide', 'Light roast']]);
  });

  it('reads pages without head or body tags, and nested lists item by item', async () => {
    const html = '<html><title>T</title><p>no body tag</p><ul><li>a<ul><li>b</li></ul></li></ul><dl><dt>term</dt><dd>def</dd></dl></html>';
    const { title, blocks } = await extract('html', Buffer.from(html));
    expect(title).toBe('T');
    expect(texts(blocks)).toEqual(['no body tag', 'a', 'b', 'term', 'def']);
  });

  it('reads a 20,000-deep DOM quickly, without overflowing the stack', async () => {
    const html = `${'<div>'.repeat(20_000)}deep text${'</div>'.repeat(20_000)}`;
    let blocks: string[] = [];
    const elapsed = await timed(async () => {
      blocks = texts((await extract('html', Buffer.from(html))).blocks);
    });
    expect(blocks).toEqual(['deep text']);
    expect(elapsed).toBeLessThan(5_000); // readability on this would take minutes
  });
});

describe('extract: docx', () => {
  it('turns Word headings into the heading path', async () => {
    const { title, blocks } = await extract('docx', fixture('sample.docx'));
    expect(title).toBeNull();
    expect(blocks).toEqual([
      { headingPath: ['Operations Handbook'], text: 'This handbook describes how the team runs Switchboard in production.' },
      { headingPath: ['Operations Handbook', 'Deployment'], text: 'Deploy from the main branch after the tests pass.' },
      { headingPath: ['Operations Handbook', 'Deployment'], text: 'Build the container image' },
      { headingPath: ['Operations Handbook', 'Deployment'], text: 'Run the database migrations' },
      { headingPath: ['Operations Handbook', 'Deployment'], text: 'Restart the service' },
      { headingPath: ['Operations Handbook', 'Monitoring'], text: 'Alerts go to the on-call channel — naïve retries are disabled.' },
    ]);
  });

  it('rejects a file that is not a zip, or a zip without word/document.xml', async () => {
    expect((await extractionError('docx', fixture('sample.txt'))).message).toBe(
      'The DOCX could not be read: it is not a zip archive (a .docx file is one)',
    );
    const notWord = await zipOf({ 'hello.txt': 'hi' });
    expect((await extractionError('docx', notWord)).message).toMatch(/no word\/document\.xml/);
  });
});

describe('extract: pdf', () => {
  it('reads paragraphs per page, joins hyphenated lines and takes the metadata title', async () => {
    const { title, blocks } = await extract('pdf', fixture('sample.pdf'));
    expect(title).toBe('Switchboard Field Manual');
    expect(blocks).toEqual([
      { headingPath: [], text: 'Switchboard routes every message through a persona. Personas answer with international knowledge sources.' },
      { headingPath: [], text: 'Knowledge is split into passages and indexed for keyword and vector search.' },
      { headingPath: [], text: 'The second page explains retrieval. Each answer cites its passages.' },
      { headingPath: [], text: 'Café owners use it too.' },
    ]);
  });

  it('uses a fixture with exact xref offsets (no repair needed)', () => {
    const pdf = fixture('sample.pdf').toString('latin1');
    const xrefAt = Number(/startxref\n(\d+)/.exec(pdf)?.[1]);
    expect(pdf.startsWith('xref', xrefAt)).toBe(true);
    const entries = [...pdf.slice(xrefAt).matchAll(/^(\d{10}) 00000 n $/gm)].map((match) => Number(match[1]));
    expect(entries).toHaveLength(8);
    entries.forEach((offset, i) => expect(pdf.startsWith(`${i + 1} 0 obj`, offset)).toBe(true));
  });

  it('rejects a corrupt or password-protected PDF with a readable message', async () => {
    expect((await extractionError('pdf', fixture('corrupt.pdf'))).message).toBe('The PDF could not be read: Invalid PDF structure');
    expect((await extractionError('pdf', fixture('encrypted.pdf'))).message).toMatch(/password-protected/);
    expect((await extractionError('pdf', Buffer.alloc(0))).message).toMatch(/^The PDF could not be read: .*empty/);
  });
});

describe('extract: csv', () => {
  it('makes one "header: value" block per row, skipping empty values and lines', async () => {
    const { blocks } = await extract('csv', fixture('sample.csv'));
    expect(blocks).toEqual([
      { headingPath: [], text: 'name: Ada Lovelace; role: Engineer; city: London; notes: Wrote the first program, in 1843' },
      { headingPath: [], text: 'name: Grace Hopper; role: Admiral; city: New York' },
      { headingPath: [], text: 'name: Linus; city: Helsinki; notes: Said "talk is cheap"' },
      { headingPath: [], text: 'name: Ünal Öztürk; role: Designer; city: İzmir; notes: Uses ; and tabs' },
    ]);
  });

  it('detects semicolon and tab delimiters from the first line', async () => {
    expect(texts((await extract('csv', Buffer.from('\uFEFFa;b\n1,5;2\n'))).blocks)).toEqual(['a: 1,5; b: 2']);
    expect(texts((await extract('csv', Buffer.from('a\tb\tc\n1\t\t3\n'))).blocks)).toEqual(['a: 1; c: 3']);
  });

  it('accepts 100,000 data rows and refuses more', async () => {
    const rows = (count: number): Buffer => Buffer.from(`id,value\n${'1,x\n'.repeat(count)}`);
    expect((await extract('csv', rows(100_000))).blocks).toHaveLength(100_000);
    expect((await extractionError('csv', rows(100_001))).message).toBe(
      'The CSV has more than 100,000 rows; split it into smaller files.',
    );
  });

  it('rejects a CSV that does not parse', async () => {
    expect((await extractionError('csv', Buffer.from('a,b\n"never closed,2\n'))).message).toMatch(/^The CSV could not be read: .*quote/i);
  });
});

describe('extract: json', () => {
  it('makes one block per array element with flattened paths', async () => {
    const { title, blocks } = await extract('json', fixture('sample.json'));
    expect(title).toBeNull();
    expect(blocks).toEqual([
      {
        headingPath: [],
        text: [
          'id: kb-1',
          'question: How do I rotate an API key?',
          'answer: Call POST /keys/{id}/rotate; the old key stops working at once.',
          'tags: keys, security',
          'meta.author.name: Ada',
          'meta.reviewed: true',
        ].join('\n'),
      },
      {
        headingPath: [],
        text: 'id: kb-2\nquestion: Which models are supported?\nanswer: Any OpenAI-compatible endpoint, or the offline model.\nmeta.author.name: Grace\nmeta.reviewed: false',
      },
    ]);
  });

  it('keeps a small object whole and splits a big one per top-level key', async () => {
    expect((await extract('json', Buffer.from('{"name":"Switchboard","port":3000,"offline":true}'))).blocks).toEqual([
      { headingPath: [], text: 'name: Switchboard\nport: 3000\noffline: true' },
    ]);
    const big = {
      version: 2,
      settings: Object.fromEntries(Array.from({ length: 25 }, (_, i) => [`key${i}`, i])),
      users: [{ name: 'Ada' }, { name: 'Grace' }],
    };
    const { blocks } = await extract('json', Buffer.from(JSON.stringify(big)));
    expect(blocks).toHaveLength(4);
    expect(blocks[0]).toEqual({ headingPath: [], text: 'version: 2' });
    expect(blocks[1]?.headingPath).toEqual(['settings']);
    expect(blocks[1]?.text.split('\n')).toHaveLength(25);
    expect(blocks[1]?.text).toMatch(/^key0: 0\nkey1: 1\n/);
    expect(blocks.slice(2)).toEqual([
      { headingPath: ['users'], text: 'name: Ada' },
      { headingPath: ['users'], text: 'name: Grace' },
    ]);
  });

  it('rejects invalid JSON, naming the position', async () => {
    const error = await extractionError('json', Buffer.from('{\n  "a": 1'));
    expect(error.message).toMatch(/^The JSON could not be read: .*(position|line)/);
    await extractionError('json', Buffer.from(''));
  });

  it('reads a 10,000-deep nested array without overflowing the stack', async () => {
    const deep = `${'['.repeat(10_000)}"bottom"${']'.repeat(10_000)}`;
    const { blocks } = await extract('json', Buffer.from(deep));
    expect(blocks).toHaveLength(1);
    expect(blocks[0]?.text).toMatch(/^0(\.0){31}: bottom$/);
  });
});
