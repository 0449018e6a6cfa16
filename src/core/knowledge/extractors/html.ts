import { cleanInline, decodeText, type Extracted, HeadingTrail } from './common.js';
import { type HtmlDocument, LEVEL_ATTRIBUTE, loadDocument, measureDom, removeNoise, walkDom } from './dom.js';

// Readability's article is used only when it keeps a fair share of the page; otherwise it has picked
// a fragment (a short page, a list of links) and the whole body reads better.
const MIN_ARTICLE_CHARS = 500;
const MIN_ARTICLE_SHARE = 0.25;
// Readability slows down badly on huge or deeply nested pages (worse than quadratic in depth: a
// 1,000-deep chain of divs takes seconds, 5,000 minutes); past these limits the linear body walk takes
// over. Its own maxElemsToParse cannot do this: it counts getElementsByTagName('*'), empty in linkedom.
const MAX_READABILITY_ELEMENTS = 50_000;
const MAX_READABILITY_DEPTH = 256;

interface Article {
  title?: string | null;
  content?: string | null;
  textContent?: string | null;
}

/**
 * HTML: readability's main content when it finds an article, else the body; noise elements
 * (script, style, nav, header, footer, aside, form...) removed either way. Headings set the heading
 * path. The title is readability's (from <title>, meta tags or JSON-LD) or <title>, never a bare h1.
 */
export async function extractHtml(data: Uint8Array): Promise<Extracted> {
  const html = decodeText(data);
  const page = await loadDocument(html);
  removeNoise(page.documentElement);
  const pageTitle = cleanInline(page.title ?? '');
  const bodyChars = cleanInline(page.body.textContent ?? '').length;
  const h1s = Array.from(page.body.querySelectorAll('h1')).map((h1) => cleanInline(h1.textContent ?? ''));
  for (const heading of Array.from(page.body.querySelectorAll('h1,h2,h3,h4,h5,h6'))) {
    heading.setAttribute(LEVEL_ATTRIBUTE, heading.nodeName.slice(1));
  }

  const article = await readArticle(page);
  let title = cleanInline(article?.title ?? '') || pageTitle;
  // Without a <title>, readability falls back to the page's single h1: that is a heading, not a title.
  if (!pageTitle && h1s.includes(title)) title = '';

  const articleChars = cleanInline(article?.textContent ?? '').length;
  if (article?.content && articleChars > 0 && (articleChars >= MIN_ARTICLE_CHARS || articleChars >= bodyChars * MIN_ARTICLE_SHARE)) {
    const content = await loadDocument(`<!doctype html><html><head></head><body>${article.content}</body></html>`);
    removeNoise(content.documentElement);
    const trail = new HeadingTrail();
    // Readability drops the h1 that repeats the title; keep it as the top of the heading path.
    const keptTopHeading = content.body.querySelectorAll(`[${LEVEL_ATTRIBUTE}="1"]`).length > 0;
    if (!keptTopHeading && h1s.length === 1) trail.enter(1, h1s[0] as string);
    return { title: title || null, blocks: walkDom(content.body, trail) };
  }

  const fallback = await loadDocument(html);
  removeNoise(fallback.documentElement);
  return { title: title || null, blocks: walkDom(fallback.body) };
}

async function readArticle(page: HtmlDocument): Promise<Article | null> {
  const { elements, depth } = measureDom(page.documentElement);
  if (elements > MAX_READABILITY_ELEMENTS || depth > MAX_READABILITY_DEPTH) return null;
  const { Readability } = await import('@mozilla/readability');
  try {
    // The cast: the project compiles without the DOM lib, and linkedom's document is close enough at run time.
    return new Readability(page as unknown as ConstructorParameters<typeof Readability>[0]).parse();
  } catch {
    return null; // too deep or too odd for readability: read the body instead
  }
}
