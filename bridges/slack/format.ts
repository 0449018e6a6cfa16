/**
 * Text conversions for Slack: the model's Markdown to Slack's mrkdwn for what the bot posts, Slack's
 * markup to plain text for what users send, and splitting at Slack's message limit.
 */
import { splitMessage } from '../split.js';

/** Characters per posted message: under the 4,000 Slack recommends, with room for a closing fence. */
export const SLACK_PART_LIMIT = 3900;

/** Markdown → mrkdwn, split into parts of at most SLACK_PART_LIMIT characters, code fences balanced. */
export function toSlackParts(markdown: string): string[] {
  return splitMessage(markdownToMrkdwn(markdown), SLACK_PART_LIMIT);
}

const FENCE = /^ {0,3}(`{3,}|~{3,})(.*)$/;
const HEADING = /^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/;
const BULLET = /^(\s*)[-*+]\s+(.*)$/;
const RULE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;

/**
 * Markdown → Slack mrkdwn: `**bold**`/`__bold__` → `*bold*`, `*it*`/`_it_` → `_it_`, `~~s~~` →
 * `~s~`, `[label](url)` → `<url|label>`, headings → bold lines, `-`/`*` bullets → `•`, `>` quotes
 * kept. Code spans and blocks are not reformatted (a block's language tag is dropped: Slack would
 * show it as code). `&`, `<` and `>` become entities everywhere, code included: Slack reads `<…>`
 * control sequences before formatting, so a literal `Vec<String>` would otherwise be eaten.
 */
export function markdownToMrkdwn(markdown: string): string {
  const out: string[] = [];
  let fence: string | null = null;
  for (const line of markdown.replace(/\r\n?/g, '\n').split('\n')) {
    const fenceMatch = FENCE.exec(line);
    if (fence !== null) {
      const marker = fenceMatch?.[1] ?? '';
      if (fenceMatch && marker[0] === fence[0] && marker.length >= fence.length && (fenceMatch[2] ?? '').trim() === '') {
        fence = null;
        out.push('```');
      } else {
        out.push(escapeEntities(line));
      }
      continue;
    }
    if (fenceMatch) {
      fence = fenceMatch[1] ?? '```';
      out.push('```');
      continue;
    }
    out.push(convertLine(line));
  }
  if (fence !== null) out.push('```');
  return out.join('\n');
}

function convertLine(line: string): string {
  if (RULE.test(line)) return '──────────';
  const heading = HEADING.exec(line);
  if (heading) {
    const content = inline(heading[1] ?? '').replace(/(^|[^\\])\*/g, '$1').trim();
    return content === '' ? '' : `*${content}*`;
  }
  const bullet = BULLET.exec(line);
  if (bullet) return `${bullet[1] ?? ''}• ${inline(bullet[2] ?? '')}`;
  const quote = QUOTE.exec(line);
  if (quote) return `> ${inline(quote[1] ?? '')}`;
  return inline(line);
}

const CODE_SPAN = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g;
const LINK = /!?\[([^\]\n]*)\]\(\s*<?([^\s()<>]+(?:\([^\s()<>]*\))?)>?(?:\s+"[^"\n]*")?\s*\)|<((?:https?|mailto):[^\s<>]+)>|<@([UW][A-Z0-9]{2,20})>/g;

/** One line outside code blocks: code spans kept, links converted, the rest restyled and escaped. */
function inline(text: string): string {
  let out = '';
  let last = 0;
  for (const match of text.matchAll(CODE_SPAN)) {
    out += links(text.slice(last, match.index));
    out += escapeEntities(match[0]);
    last = match.index + match[0].length;
  }
  return out + links(text.slice(last));
}

function links(text: string): string {
  let out = '';
  let last = 0;
  for (const match of text.matchAll(LINK)) {
    out += style(escapeEntities(text.slice(last, match.index)));
    last = match.index + match[0].length;
    // A user mention (`<@U…>`, as a handoff desk names a member) stays one: Slack notifies them.
    if (match[4] !== undefined) {
      out += `<@${match[4]}>`;
      continue;
    }
    const url = escapeEntities(match[2] ?? match[3] ?? '');
    const label = match[1] === undefined ? '' : style(escapeEntities(match[1])).replace(/\|/g, '¦');
    out += label === '' || label === url ? `<${url}>` : `<${url}|${label}>`;
  }
  return out + style(escapeEntities(text.slice(last)));
}

/** Emphasis: bold goes through a placeholder so the italic rule does not see its asterisks. */
function style(text: string): string {
  return text
    .replace(/\*\*(?=\S)([^\n]*?\S)\*\*/g, '\u0001$1\u0001')
    .replace(/(^|[^\w])__(?=\S)([^\n]*?\S)__(?!\w)/g, '$1\u0001$2\u0001')
    .replace(/(^|[^\w*\\])\*(?=[^\s*])([^*\n]*?[^\s*\\])?\*(?![\w*])/g, (_m, before: string, body: string | undefined) => `${before}_${body ?? ''}_`)
    .replace(/~~(?=\S)([^\n]*?\S)~~/g, '~$1~')
    .replace(/\u0001/g, '*');
}

export function escapeEntities(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/**
 * Slack markup → plain text: the bot's own mention is removed; `<@U1|ann>` → `@ann` (`@U1` without a
 * label), `<#C1|general>` → `#general`, `<!here>` → `@here`, `<url|label>` → `label (url)` (just the
 * label when it is the URL without its scheme, as Slack writes bare domains), `<url>` → `url`, and
 * `&amp;` `&lt;` `&gt;` decoded.
 */
export function slackToPlain(text: string, botUserId: string | null): string {
  let plain = text;
  if (botUserId) plain = plain.replace(new RegExp(`<@${escapeRegExp(botUserId)}(?:\\|[^>]*)?>[ \\t]*`, 'g'), '');
  plain = plain.replace(/<([^<>\n]*)>/g, (_match, inner: string) => {
    const bar = inner.indexOf('|');
    const target = bar === -1 ? inner : inner.slice(0, bar);
    const label = bar === -1 ? '' : inner.slice(bar + 1);
    if (target.startsWith('@')) return label ? `@${label.replace(/^@/, '')}` : target;
    if (target.startsWith('#')) return `#${label || target.slice(1)}`;
    if (target.startsWith('!')) {
      const special = target.slice(1).split('^')[0] ?? '';
      if (['here', 'channel', 'everyone'].includes(special)) return `@${special}`;
      return label;
    }
    if (!label) return target;
    const bare = target.replace(/^(?:https?:\/\/|mailto:)/, '').replace(/\/$/, '');
    return label === bare || label === target ? label : `${label} (${target})`;
  });
  return plain.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&').trim();
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
