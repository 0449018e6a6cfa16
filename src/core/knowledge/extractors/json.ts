import { type Block, cleanInline, decodeText, describeError, type Extracted, ExtractionError } from './common.js';

/** Keys deeper than this are not spelled out in the path (the values are still read). */
const MAX_PATH_DEPTH = 32;
/** An object that flattens to at most this many lines is one block; a bigger one is split per top-level key. */
const SMALL_OBJECT_LINES = 20;

type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

/**
 * JSON: values are flattened to "a.b.c: value" lines, one block's lines joined by "\n"; an array of
 * scalars is one line ("tags: a, b"). A top-level array gives one block per element; a small
 * top-level object one block; a bigger one a block of its scalar fields plus, per other key, one block
 * (one per element when it holds an array of objects) with headingPath [key]. Iterative throughout.
 */
export function extractJson(data: Uint8Array): Extracted {
  const source = decodeText(data);
  let value: Json;
  try {
    value = JSON.parse(source) as Json;
  } catch (error) {
    throw new ExtractionError(`The JSON could not be read: ${withLineAndColumn(describeError(error), source)}`, { cause: error });
  }
  const blocks: Block[] = [];
  const add = (headingPath: string[], lines: string[]): void => {
    const text = lines.join('\n');
    if (text) blocks.push({ headingPath, text });
  };

  if (Array.isArray(value)) {
    for (const element of value) add([], flatten(element));
  } else if (!isObject(value)) {
    add([], flatten(value));
  } else if (flatten(value, SMALL_OBJECT_LINES + 1).length <= SMALL_OBJECT_LINES) {
    add([], flatten(value));
  } else {
    const scalars: string[] = [];
    const sections: Block[] = [];
    for (const [key, field] of Object.entries(value)) {
      const heading = cleanInline(key);
      if (Array.isArray(field) && field.some(isContainer)) {
        for (const element of field) {
          const text = flatten(element).join('\n');
          if (text) sections.push({ headingPath: [heading], text });
        }
      } else if (isContainer(field)) {
        const text = flatten(field).join('\n');
        if (text) sections.push({ headingPath: [heading], text });
      } else {
        scalars.push(...flatten(field, Number.POSITIVE_INFINITY, heading));
      }
    }
    add([], scalars);
    blocks.push(...sections);
  }
  return { title: null, blocks };
}

/** Node 20's messages give an offset ("at position 812"); a line and column are what an editor shows. */
function withLineAndColumn(message: string, source: string): string {
  const at = /at position (\d+)/.exec(message);
  if (!at || /line \d+/.test(message)) return message;
  const position = Number(at[1]);
  const before = source.slice(0, position);
  const line = before.split('\n').length;
  return `${message} (line ${line}, column ${position - before.lastIndexOf('\n')})`;
}

function isObject(value: Json): value is { [key: string]: Json } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isContainer(value: Json): boolean {
  return typeof value === 'object' && value !== null;
}

function scalarText(value: Json): string {
  return value === null ? '' : cleanInline(String(value));
}

/** "path: value" lines, depth first in document order, with an explicit stack; stops after `limit` lines. */
function flatten(root: Json, limit = Number.POSITIVE_INFINITY, rootPath = ''): string[] {
  const lines: string[] = [];
  const stack: { value: Json; path: string; depth: number }[] = [{ value: root, path: rootPath, depth: 0 }];
  const line = (path: string, text: string): void => {
    if (text) lines.push(path ? `${path}: ${text}` : text);
  };
  const child = (path: string, key: string, depth: number): string =>
    depth >= MAX_PATH_DEPTH ? path : path ? `${path}.${cleanInline(key)}` : cleanInline(key);

  while (stack.length > 0 && lines.length < limit) {
    const { value, path, depth } = stack.pop() as { value: Json; path: string; depth: number };
    if (Array.isArray(value)) {
      if (!value.some(isContainer)) {
        line(path, value.map(scalarText).filter((text) => text !== '').join(', '));
        continue;
      }
      for (let i = value.length - 1; i >= 0; i--) {
        stack.push({ value: value[i] as Json, path: child(path, String(i), depth), depth: depth + 1 });
      }
    } else if (isObject(value)) {
      const entries = Object.entries(value);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, field] = entries[i] as [string, Json];
        stack.push({ value: field, path: child(path, key, depth), depth: depth + 1 });
      }
    } else {
      line(path, scalarText(value));
    }
  }
  return lines;
}
