/**
 * Discord text shaping (DESIGN.md "Channels"). Discord Markdown is Markdown already, so an answer
 * is kept as written: it is only made safe (no mass mentions) and split at Discord's 2,000-character
 * limit with the shared code-fence-aware splitter (`bridges/split.ts`). Inbound, platform markup
 * (`<@id>`, `<#id>`, `<@&id>`, custom emoji, timestamps) becomes readable text.
 */
import { fenceStateAfter, splitMessage } from '../split.js';

/** Discord's limit on a message's `content`. */
export const DISCORD_MESSAGE_LIMIT = 2000;

/** Put in front of a `high` priority outbound message (API.md §9 `priority`), so the reader sees it stands out. */
export const HIGH_PRIORITY_MARK = '🔴 ';

/** Shown instead of an empty answer: Discord refuses a message without content. */
export const EMPTY_TEXT = '…';

/**
 * `@everyone` / `@here` written in an answer: a zero-width space after the `@` keeps them from
 * rendering as (or being taken for) a mass mention. Fenced code is left untouched, since it never
 * renders mentions and its text may be copied. `allowed_mentions: { parse: [] }` on every request
 * is the real guard; this is the visible one.
 */
export function neutralizeMassMentions(text: string): string {
  let open: string | null = null;
  return text
    .split('\n')
    .map((line) => {
      const inCode = open !== null;
      open = fenceStateAfter(line, open);
      return inCode || open !== null ? line : line.replace(/@(everyone|here)\b/g, '@\u200b$1');
    })
    .join('\n');
}

/** An answer as the Discord messages that carry it: made safe, never empty, each part ≤ 2,000 characters with balanced fences. */
export function toDiscordParts(text: string, limit = DISCORD_MESSAGE_LIMIT): string[] {
  const safe = neutralizeMassMentions(text);
  const parts = safe.trim() === '' ? [] : splitMessage(safe, limit);
  return parts.length > 0 ? parts : [EMPTY_TEXT];
}

/** How a message's mentions read as text; `null` removes the mention (the bot's own). */
export interface MentionNames {
  botId: string;
  user(id: string): string | undefined;
  /** A role: `null` for the bot's managed role (a mention of the bot). */
  role(id: string): string | null | undefined;
  channel(id: string): string | undefined;
}

/**
 * A message's content as plain text for the model: the bot's mention removed, other user, role
 * and channel mentions as `@name` / `#name`, custom emoji as `:name:`, timestamps as ISO dates.
 */
export function toPlainText(content: string, names: MentionNames): string {
  const text = content
    .replace(/<@!?(\d{1,20})>[ \t]*/g, (whole, id: string) => (id === names.botId ? '' : `@${names.user(id) ?? 'unknown-user'}${whole.slice(whole.indexOf('>') + 1)}`))
    .replace(/<@&(\d{1,20})>[ \t]*/g, (whole, id: string) => {
      const name = names.role(id);
      return name === null ? '' : `@${name ?? 'unknown-role'}${whole.slice(whole.indexOf('>') + 1)}`;
    })
    .replace(/<#(\d{1,20})>/g, (_, id: string) => `#${names.channel(id) ?? 'unknown-channel'}`)
    .replace(/<a?:(\w{1,32}):\d{1,20}>/g, ':$1:')
    .replace(/<t:(-?\d{1,13})(?::[tTdDfFR])?>/g, (whole, seconds: string) => {
      const date = new Date(Number(seconds) * 1000);
      return Number.isNaN(date.getTime()) ? whole : date.toISOString();
    });
  // "<@bot>, what is…" reads "what is…".
  return text.trim().replace(/^[,:;]\s*/, '');
}

/** Whether `content` mentions the user `botId` in Discord markup (`<@id>` or the legacy `<@!id>`). */
export function mentionsUser(content: string, botId: string): boolean {
  return content.includes(`<@${botId}>`) || content.includes(`<@!${botId}>`);
}

/** 👍 → 5, 👎 → 1 (any skin tone); anything else → null. */
export function ratingOf(emoji: string | null | undefined): 5 | 1 | null {
  if (!emoji) return null;
  if (emoji.startsWith('👍')) return 5;
  if (emoji.startsWith('👎')) return 1;
  return null;
}
