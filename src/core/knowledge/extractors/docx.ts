import { describeError, type Extracted, ExtractionError } from './common.js';
import { loadDocument, removeNoise, walkDom } from './dom.js';

/**
 * DOCX: mammoth turns the document into HTML (Word's Heading 1–6 styles become h1–h6), then the
 * same DOM walk as HTML reads it, over the whole body. Images are dropped, not inlined as data URIs.
 */
export async function extractDocx(data: Buffer): Promise<Extracted> {
  const mammoth = (await import('mammoth')).default;
  let html: string;
  try {
    const result = await mammoth.convertToHtml(
      { buffer: data },
      { convertImage: mammoth.images.imgElement(async () => ({ src: '' })) },
    );
    html = result.value;
  } catch (error) {
    throw new ExtractionError(`The DOCX could not be read: ${docxProblem(error)}`, { cause: error });
  }
  const document = await loadDocument(`<!doctype html><html><head></head><body>${html}</body></html>`);
  removeNoise(document.documentElement);
  return { title: null, blocks: walkDom(document.body) };
}

/** jszip's and mammoth's messages name their internals; say what is wrong with the file instead. */
function docxProblem(error: unknown): string {
  const message = describeError(error);
  if (/central directory|zip|signature/i.test(message)) return 'it is not a zip archive (a .docx file is one)';
  if (/main document part|word\/document\.xml/i.test(message)) return 'it has no word/document.xml, so it is not a Word document';
  return message;
}
