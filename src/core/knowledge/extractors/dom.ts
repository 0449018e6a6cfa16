import { BlockList, type Block, cleanInline, cleanVerbatim, HeadingTrail } from './common.js';

/** The part of the DOM (linkedom's) the walk reads; the project compiles without the DOM lib. */
export interface DomNode {
  nodeType: number;
  nodeName: string;
  nodeValue: string | null;
  textContent: string | null;
  childNodes: ArrayLike<DomNode>;
  getAttribute?(name: string): string | null;
}

export interface DomElement extends DomNode {
  firstChild: DomNode | null;
  remove(): void;
  setAttribute(name: string, value: string): void;
  appendChild(node: DomNode): void;
  insertBefore(node: DomNode, reference: DomNode | null): void;
  querySelectorAll(selector: string): ArrayLike<DomElement>;
}

export interface HtmlDocument extends DomNode {
  documentElement: DomElement;
  body: DomElement;
  title: string;
  createElement(name: string): DomElement;
  querySelectorAll(selector: string): ArrayLike<DomElement>;
}

// Elements that belong in <head> when a page leaves its <head> and <body> tags out.
const HEAD_ONLY = new Set(['title', 'meta', 'link', 'base', 'style', 'script']);

/**
 * Parses HTML with linkedom. linkedom is not an HTML5 tree builder: a fragment without <html> gets a
 * random element as documentElement, and content without <body> is left beside an empty body (which
 * readability would read). So the input is wrapped in <html> when needed and the missing
 * <head>/<body> are rebuilt, keeping the document order.
 */
export async function loadDocument(html: string): Promise<HtmlDocument> {
  const { parseHTML } = await import('linkedom');
  const source = /<html[\s>]/i.test(html) ? html : `<!doctype html><html>${html}</html>`;
  const document = parseHTML(source).document as unknown as HtmlDocument;
  const root = document.documentElement;
  const children = Array.from(root.childNodes);
  const named = (name: string): DomElement | undefined =>
    children.find((node) => node.nodeName.toLowerCase() === name) as DomElement | undefined;
  let head = named('head');
  let body = named('body');
  if (!head) {
    head = document.createElement('head');
    root.insertBefore(head, root.firstChild);
  }
  if (!body) {
    body = document.createElement('body');
    root.appendChild(body);
  }
  const beforeBody: DomNode[] = [];
  let pastBody = false;
  for (const node of children) {
    if (node === head) continue;
    if (node === body) {
      pastBody = true;
      continue;
    }
    if (!pastBody && HEAD_ONLY.has(node.nodeName.toLowerCase())) head.appendChild(node);
    else if (pastBody) body.appendChild(node);
    else beforeBody.push(node);
  }
  const first = body.firstChild;
  for (const node of beforeBody) body.insertBefore(node, first);
  return document;
}

/** Elements that never hold document text: removed before reading. */
export const NOISE_SELECTOR = [
  'script', 'style', 'noscript', 'template', 'nav', 'header', 'footer', 'aside', 'form', 'iframe', 'svg',
  'canvas', 'object', 'embed', 'audio', 'video', 'select', 'button', 'dialog', '[hidden]',
].join(',');

/** Set on headings before readability runs, which renames h1 to h2; the walk prefers it to the tag. */
export const LEVEL_ATTRIBUTE = 'data-switchboard-level';

const ELEMENT = 1;
const TEXT = 3;
const CDATA = 4;

// Elements that end the current run of inline text. Anything else (span, a, b, custom elements) is inline.
const BLOCK = new Set([
  'address', 'article', 'aside', 'blockquote', 'body', 'caption', 'center', 'dd', 'details', 'dialog', 'dir',
  'div', 'dl', 'dt', 'fieldset', 'figcaption', 'figure', 'footer', 'form', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6',
  'header', 'hgroup', 'hr', 'html', 'legend', 'li', 'main', 'menu', 'nav', 'ol', 'p', 'pre', 'section',
  'summary', 'table', 'tbody', 'td', 'tfoot', 'th', 'thead', 'tr', 'ul',
]);
const HEADING = /^h([1-6])$/;

type Capture =
  | { kind: 'heading'; node: DomNode; level: number; parts: string[] }
  | { kind: 'pre'; node: DomNode; parts: string[] }
  | { kind: 'row'; node: DomNode; cells: string[]; cell: DomNode | null; parts: string[] };

/** How many elements `root` holds and how deeply they nest, without recursion. */
export function measureDom(root: DomNode): { elements: number; depth: number } {
  let elements = 0;
  let depth = 0;
  const stack: [DomNode, number][] = [[root, 0]];
  while (stack.length > 0) {
    const [node, level] = stack.pop() as [DomNode, number];
    if (node.nodeType !== ELEMENT) continue;
    elements++;
    if (level > depth) depth = level;
    const children = node.childNodes;
    for (let i = 0; i < children.length; i++) stack.push([children[i] as DomNode, level + 1]);
  }
  return { elements, depth };
}

/** Removes the elements matched by NOISE_SELECTOR under `root`. */
export function removeNoise(root: DomElement): void {
  for (const element of Array.from(root.querySelectorAll(NOISE_SELECTOR))) element.remove();
}

/**
 * Reads blocks from a DOM in document order. h1–h6 set the heading path (a level taken from
 * LEVEL_ATTRIBUTE when present); p, li, dt, dd, figcaption, blockquote and each run of loose text in a
 * container become blocks; pre is one verbatim block; a table row is one block, cells joined by " | ".
 * Iterative, so a very deep DOM cannot overflow the stack. `trail` lets a caller seed the path.
 */
export function walkDom(root: DomNode, trail: HeadingTrail = new HeadingTrail()): Block[] {
  const blocks = new BlockList();
  let run: string[] = [];
  let capture: Capture | null = null;

  const flushRun = (): void => {
    if (run.length > 0) blocks.add(trail.path(), cleanInline(run.join('')));
    run = [];
  };
  const write = (text: string): void => {
    if (capture) capture.parts.push(text);
    else run.push(text);
  };

  const enter = (node: DomNode, name: string): void => {
    if (name === 'br') return write('\n');
    if (!BLOCK.has(name)) return;
    if (capture) {
      if (capture.kind === 'row' && (name === 'td' || name === 'th') && capture.cell === null) capture.cell = node;
      else write(capture.kind === 'pre' ? '\n' : ' ');
      return;
    }
    flushRun();
    const heading = HEADING.exec(name);
    if (heading) {
      const level = Number(node.getAttribute?.(LEVEL_ATTRIBUTE) ?? heading[1]);
      capture = { kind: 'heading', node, level: level >= 1 && level <= 6 ? level : Number(heading[1]), parts: [] };
    } else if (name === 'pre') capture = { kind: 'pre', node, parts: [] };
    else if (name === 'tr') capture = { kind: 'row', node, cells: [], cell: null, parts: [] };
  };

  const exit = (node: DomNode, name: string): void => {
    if (!capture) {
      if (BLOCK.has(name)) flushRun();
      return;
    }
    if (capture.kind === 'row' && node === capture.cell) {
      capture.cells.push(cleanInline(capture.parts.join('')));
      capture.parts = [];
      capture.cell = null;
      return;
    }
    if (node !== capture.node) return;
    const done = capture;
    capture = null;
    if (done.kind === 'heading') trail.enter(done.level, cleanInline(done.parts.join('')));
    else if (done.kind === 'pre') blocks.add(trail.path(), cleanVerbatim(done.parts.join('')));
    else {
      const loose = cleanInline(done.parts.join('')); // text in a row outside any cell
      blocks.add(trail.path(), [...done.cells, loose].filter((cell) => cell !== '').join(' | '));
    }
  };

  // Each node is visited twice: on the way in (children pushed after it) and on the way out.
  const stack: { node: DomNode; leaving: boolean }[] = [{ node: root, leaving: false }];
  while (stack.length > 0) {
    const { node, leaving } = stack.pop() as { node: DomNode; leaving: boolean };
    if (node.nodeType === TEXT || node.nodeType === CDATA) {
      write(node.nodeValue ?? '');
      continue;
    }
    if (node.nodeType !== ELEMENT && node !== root) continue;
    const name = node.nodeName.toLowerCase();
    if (leaving) {
      exit(node, name);
      continue;
    }
    enter(node, name);
    stack.push({ node, leaving: true });
    const children = node.childNodes;
    for (let i = children.length - 1; i >= 0; i--) stack.push({ node: children[i] as DomNode, leaving: false });
  }
  flushRun();
  return blocks.blocks;
}
