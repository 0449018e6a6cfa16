// Document extraction: a file's kind, then its text as blocks under their headings. One extractor per
// kind lives in ./extractors/ and loads at the first file of its kind, with its library (pdf.js,
// mammoth, linkedom, readability), so importing this module stays cheap: a server start that reads
// no file loads none of them (issue 40 item 19).
import { UnsupportedMediaTypeError } from '../../errors.js';
import { describeError, type Extracted, ExtractionError } from './extractors/common.js';

export { ExtractionError } from './extractors/common.js';
export type { Block, Extracted } from './extractors/common.js';

/** A file kind the extractors read (the knowledge source kinds minus "url"). */
export type FileKind = 'text' | 'markdown' | 'html' | 'pdf' | 'docx' | 'csv' | 'json';
export const FILE_KINDS: readonly FileKind[] = Object.freeze(['text', 'markdown', 'html', 'pdf', 'docx', 'csv', 'json']);

const MEDIA_TYPES: Record<string, FileKind> = {
  'text/plain': 'text',
  'text/markdown': 'markdown',
  'text/x-markdown': 'markdown',
  'text/html': 'html',
  'application/xhtml+xml': 'html',
  'application/pdf': 'pdf',
  'application/x-pdf': 'pdf',
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document': 'docx',
  'text/csv': 'csv',
  'application/csv': 'csv',
  'text/x-csv': 'csv',
  'application/json': 'json',
  'text/json': 'json',
};

const EXTENSIONS: Record<string, FileKind> = {
  txt: 'text',
  text: 'text',
  md: 'markdown',
  markdown: 'markdown',
  html: 'html',
  htm: 'html',
  pdf: 'pdf',
  docx: 'docx',
  csv: 'csv',
  json: 'json',
};

// Many servers (raw file hosts among them) label every text file text/plain; the extension knows better.
const REFINES_PLAIN_TEXT = new Set<FileKind>(['markdown', 'csv', 'json']);

/**
 * The kind of an uploaded file or fetched URL body, from its media type (parameters ignored), then
 * its file name extension, then its magic bytes (%PDF-, a zip holding word/document.xml). A generic
 * or unknown media type (application/octet-stream, none) defers to the name and bytes; text/plain is
 * refined by a .md, .csv or .json name. Returns null when unsupported.
 */
export function detectKind(input: { mediaType?: string | null; filename?: string | null; bytes?: Uint8Array }): FileKind | null {
  const mediaType = (input.mediaType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  const fromExtension = kindOfFilename(input.filename);
  const fromMediaType = MEDIA_TYPES[mediaType] ?? (mediaType.endsWith('+json') ? 'json' : undefined);
  if (fromMediaType === 'text') return fromExtension && REFINES_PLAIN_TEXT.has(fromExtension) ? fromExtension : 'text';
  if (fromMediaType) return fromMediaType;
  return fromExtension ?? (input.bytes ? kindOfBytes(input.bytes) : null);
}

function kindOfFilename(filename: string | null | undefined): FileKind | null {
  if (!filename) return null;
  // Works for a URL path too: the query and fragment are not part of the name.
  const name = filename.split(/[?#]/)[0]?.split(/[/\\]/).pop() ?? '';
  const dot = name.lastIndexOf('.');
  if (dot < 0) return null;
  return EXTENSIONS[name.slice(dot + 1).toLowerCase()] ?? null;
}

const PDF_MAGIC = Buffer.from('%PDF-');
const ZIP_MAGIC = Buffer.from([0x50, 0x4b, 0x03, 0x04]);
const DOCX_PART = Buffer.from('word/document.xml');

function kindOfBytes(bytes: Uint8Array): FileKind | null {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  // pdf.js, like most readers, accepts a little junk before the header.
  const pdfAt = buffer.subarray(0, 1024).indexOf(PDF_MAGIC);
  if (pdfAt >= 0) return 'pdf';
  // Zip entry names are stored uncompressed, in the local headers and the central directory.
  if (buffer.subarray(0, 4).equals(ZIP_MAGIC) && buffer.includes(DOCX_PART)) return 'docx';
  return null;
}

const LABELS: Record<FileKind, string> = {
  text: 'text file',
  markdown: 'Markdown file',
  html: 'HTML page',
  pdf: 'PDF',
  docx: 'DOCX',
  csv: 'CSV',
  json: 'JSON',
};

const EXTRACTORS: Record<FileKind, (data: Buffer) => Promise<Extracted>> = {
  text: async (data) => (await import('./extractors/text.js')).extractPlainText(data),
  markdown: async (data) => (await import('./extractors/markdown.js')).extractMarkdown(data),
  html: async (data) => (await import('./extractors/html.js')).extractHtml(data),
  pdf: async (data) => (await import('./extractors/pdf.js')).extractPdf(data),
  docx: async (data) => (await import('./extractors/docx.js')).extractDocx(data),
  csv: async (data) => (await import('./extractors/csv.js')).extractCsv(data),
  json: async (data) => (await import('./extractors/json.js')).extractJson(data),
};

/**
 * Extracts text blocks. `data` is a Buffer for every kind (text kinds are UTF-8; a BOM is stripped).
 * Throws ExtractionError for unreadable content, UnsupportedMediaTypeError for a kind not in FILE_KINDS.
 */
export async function extract(kind: FileKind, data: Buffer): Promise<Extracted> {
  if (!FILE_KINDS.includes(kind)) throw new UnsupportedMediaTypeError(`Files of kind "${String(kind)}" cannot be read.`);
  try {
    return await EXTRACTORS[kind](data);
  } catch (error) {
    if (error instanceof ExtractionError) throw error;
    // A library's surprise (or a stack overflow on a pathological file) still reads as this file's problem.
    throw new ExtractionError(`The ${LABELS[kind]} could not be read: ${describeError(error)}`, { cause: error });
  }
}
