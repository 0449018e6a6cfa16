import { BlockList, cleanInline, describeError, type Extracted, ExtractionError } from './common.js';

/** The fields of unpdf's StructuredTextItem the layout reading needs (PDF space, origin bottom-left). */
interface TextItem {
  str: string;
  x: number;
  y: number;
  width: number;
  height: number;
  fontSize: number;
  hasEOL: boolean;
}

interface Line {
  text: string;
  y: number;
  size: number;
}

/**
 * PDF, through unpdf (pdf.js): text items are grouped into lines by position, lines into paragraphs
 * at vertical gaps clearly wider than the page's usual line spacing; within a paragraph, line breaks
 * become spaces and "inter-" + "national" becomes "international". No heading detection (headingPath
 * is always []). The title is the metadata Title (or XMP dc:title) when present.
 */
export async function extractPdf(data: Uint8Array): Promise<Extracted> {
  const { extractTextItems, getDocumentProxy, getMeta } = await import('unpdf');
  let pdf: Awaited<ReturnType<typeof getDocumentProxy>>;
  try {
    // A copy: pdf.js may transfer (detach) the buffer it is given, and the caller still owns `data`.
    pdf = await getDocumentProxy(new Uint8Array(data), { verbosity: 0 });
  } catch (error) {
    throw new ExtractionError(pdfProblem(error), { cause: error });
  }
  try {
    const title = await readTitle(() => getMeta(pdf));
    const { items } = await extractTextItems(pdf);
    const blocks = new BlockList();
    for (const pageItems of items) {
      for (const paragraph of paragraphs(lines(pageItems))) blocks.add([], joinLines(paragraph));
    }
    return { title, blocks: blocks.blocks };
  } catch (error) {
    throw new ExtractionError(pdfProblem(error), { cause: error });
  } finally {
    await pdf.loadingTask.destroy().catch(() => undefined);
  }
}

function pdfProblem(error: unknown): string {
  const name = error instanceof Error ? error.name : '';
  if (name === 'PasswordException') return 'The PDF is password-protected; upload a copy without a password.';
  return `The PDF could not be read: ${describeError(error)}`;
}

async function readTitle(readMeta: () => Promise<{ info: Record<string, unknown>; metadata: unknown }>): Promise<string | null> {
  try {
    const { info, metadata } = await readMeta();
    if (typeof info.Title === 'string' && cleanInline(info.Title)) return cleanInline(info.Title);
    const xmp = metadata as { get?: (name: string) => unknown } | null;
    const dcTitle = typeof xmp?.get === 'function' ? xmp.get('dc:title') : null;
    return typeof dcTitle === 'string' && cleanInline(dcTitle) ? cleanInline(dcTitle) : null;
  } catch {
    return null; // broken metadata should not cost the text
  }
}

/** Items to lines: a new line after an end-of-line mark or when the baseline moves by half a font size. */
function lines(items: TextItem[]): Line[] {
  const result: Line[] = [];
  let current: Line | null = null;
  let end = 0;
  for (const item of items) {
    const size = item.fontSize || item.height || 10;
    if (item.str !== '') {
      if (current && Math.abs(item.y - current.y) > Math.max(current.size, size) / 2) {
        result.push(current);
        current = null;
      }
      if (!current) current = { text: item.str, y: item.y, size };
      else {
        // Items without a space between them are pieces of one word unless the gap says otherwise.
        if (item.x - end > size * 0.15 && !/\s$/.test(current.text) && !/^\s/.test(item.str)) current.text += ' ';
        current.text += item.str;
        current.size = Math.max(current.size, size);
      }
      end = item.x + item.width;
    }
    if (item.hasEOL && current) {
      result.push(current);
      current = null;
    }
  }
  if (current) result.push(current);
  return result.filter((line) => line.text.trim() !== '');
}

/** Lines to paragraphs: break where the gap exceeds the page's usual line spacing by 40%, or two font sizes. */
function paragraphs(pageLines: Line[]): string[][] {
  const gaps: number[] = [];
  for (let i = 1; i < pageLines.length; i++) {
    const gap = (pageLines[i - 1] as Line).y - (pageLines[i] as Line).y;
    if (gap > 0) gaps.push(gap);
  }
  gaps.sort((a, b) => a - b);
  const usual = gaps[Math.floor((gaps.length - 1) / 2)] ?? 0;
  const result: string[][] = [];
  let paragraph: string[] = [];
  pageLines.forEach((line, i) => {
    const previous = pageLines[i - 1];
    if (previous) {
      const gap = previous.y - line.y;
      const size = Math.max(previous.size, line.size);
      // An upward jump is a new column or region.
      if (gap < -size || (usual > 0 && gap > usual * 1.4 + 0.5) || gap > size * 2.2) {
        result.push(paragraph);
        paragraph = [];
      }
    }
    paragraph.push(line.text);
  });
  if (paragraph.length > 0) result.push(paragraph);
  return result;
}

function joinLines(paragraphLines: string[]): string {
  let text = '';
  for (const raw of paragraphLines) {
    const line = raw.trim();
    if (!line) continue;
    const hyphenated = (text.endsWith('-') || text.endsWith('\u00AD')) && /\p{L}/u.test(text.at(-2) ?? '') && /^\p{Ll}/u.test(line);
    if (!text) text = line;
    else if (hyphenated) text = text.slice(0, -1) + line;
    else text += ` ${line}`;
  }
  return cleanInline(text);
}
