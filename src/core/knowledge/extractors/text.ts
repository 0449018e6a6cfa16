import { BlockList, cleanInline, decodeText, type Extracted } from './common.js';

/** Plain text: paragraphs are separated by blank lines; a single newline inside one is a space. */
export function extractPlainText(data: Uint8Array): Extracted {
  const blocks = new BlockList();
  for (const paragraph of decodeText(data).split(/\n[ \t]*\n/)) blocks.add([], cleanInline(paragraph));
  return { title: null, blocks: blocks.blocks };
}
