import { BlockList, cleanInline, decodeText, describeError, type Extracted, ExtractionError } from './common.js';

/** Data rows beyond this make the file a database export, not knowledge; the user should split it. */
export const MAX_CSV_ROWS = 100_000;

/**
 * CSV: the first row is the header; each data row is one block, "header: value; header: value"
 * (empty values left out). The delimiter (comma, semicolon or tab) is read off the first line.
 * csv-parse is imported at the first CSV, like the other extractors' libraries, not at start-up.
 */
export async function extractCsv(data: Uint8Array): Promise<Extracted> {
  const { parse } = await import('csv-parse/sync');
  const text = decodeText(data);
  let rows: string[][];
  try {
    rows = parse(text, {
      bom: true,
      relax_column_count: true,
      skip_empty_lines: true,
      delimiter: detectDelimiter(text),
      // One row past the limit is enough to know it is too long.
      to: MAX_CSV_ROWS + 2,
    }) as string[][];
  } catch (error) {
    throw new ExtractionError(`The CSV could not be read: ${describeError(error)}`, { cause: error });
  }
  if (rows.length > MAX_CSV_ROWS + 1) {
    throw new ExtractionError(`The CSV has more than ${MAX_CSV_ROWS.toLocaleString('en-US')} rows; split it into smaller files.`);
  }
  const [header = [], ...records] = rows;
  const names = header.map((name, i) => cleanInline(name) || `column ${i + 1}`);
  const blocks = new BlockList();
  for (const record of records) {
    const fields: string[] = [];
    record.forEach((raw, i) => {
      const value = cleanInline(raw);
      if (value) fields.push(`${names[i] ?? `column ${i + 1}`}: ${value}`);
    });
    blocks.add([], fields.join('; '));
  }
  return { title: null, blocks: blocks.blocks };
}

/** The most frequent of `,` `;` and tab in the first line, outside quotes; a comma when none appears. */
export function detectDelimiter(text: string): string {
  const counts = new Map<string, number>([[',', 0], [';', 0], ['\t', 0]]);
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const char = text[i] as string;
    if (char === '"') quoted = !quoted;
    else if (char === '\n' && !quoted) break;
    else if (!quoted && counts.has(char)) counts.set(char, (counts.get(char) as number) + 1);
  }
  let best = ',';
  for (const [delimiter, count] of counts) if (count > (counts.get(best) as number)) best = delimiter;
  return best;
}
