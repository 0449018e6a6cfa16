/**
 * A reply being written to Discord (bridge.ts `ReplyWriter`): "typing…" until the first text, then
 * one message posted and edited as the answer grows, the final text split into parts.
 *
 * Throttle: at most one platform request in flight, and a new one starts no sooner than
 * `editIntervalMs` after the previous one started; `progress` only records the latest text, so the
 * text shown is always the newest and intermediate texts are skipped, never queued.
 */
import type { Logger } from 'pino';
import type { ReplyWriter } from '../bridge.js';
import { toDiscordParts } from './format.js';
import { type Components, type DiscordTransport, feedbackComponents } from './transport.js';

export interface ReplyTuning {
  /** Minimum time between the starts of two posts/edits of the progressive message. */
  editIntervalMs: number;
  /** Discord shows "typing…" for about 10 s per request: repeat it this often. */
  typingIntervalMs: number;
  /** Stop repeating "typing…" after this long without any text. */
  typingMaxMs: number;
}

export interface ReplyTarget {
  channelId: string;
  /** The message replied to; null = a plain message in the channel. */
  messageId: string | null;
  /** A slash command's deferred response: the answer edits it (no "typing…": Discord shows it thinking). */
  interaction?: { applicationId: string; token: string } | undefined;
  /** Start a thread with this name on the answer once it is written (a slash command's follow-ups go there). */
  threadName?: string | undefined;
  /** 👍 / 👎 buttons under the answer. */
  feedback?: boolean | undefined;
}

export interface DiscordReplyWriter extends ReplyWriter {
  /** Stops the timers (bridge stopped); later calls do nothing or fail. */
  dispose(): void;
}

export function createReplyWriter(target: ReplyTarget, transport: DiscordTransport, tuning: ReplyTuning, logger: Logger, onDone: () => void): DiscordReplyWriter {
  const { channelId, messageId, interaction } = target;
  const components: Components | undefined = target.feedback ? feedbackComponents() : undefined;
  // Where the text goes: the channel (a reply to the message), or a slash command's own response.
  const ops = interaction
    ? {
        first: (text: string, c?: Components) => transport.editOriginal(interaction.applicationId, interaction.token, text, c),
        edit: (_id: string, text: string, c?: Components) => transport.editOriginal(interaction.applicationId, interaction.token, text, c).then(() => undefined),
        more: (text: string, c?: Components) => transport.followUp(interaction.applicationId, interaction.token, text, c),
      }
    : {
        first: (text: string, c?: Components) => transport.post(channelId, text, messageId, c),
        edit: (id: string, text: string, c?: Components) => transport.edit(channelId, id, text, c),
        more: (text: string, c?: Components) => transport.post(channelId, text, null, c),
      };
  let firstId: string | null = null;
  /** The text the progressive message shows now. */
  let shown: string | null = null;
  let pending: string | null = null;
  let inFlight: Promise<void> | null = null;
  let lastStart = Number.NEGATIVE_INFINITY;
  let timer: NodeJS.Timeout | null = null;
  let typingTimer: NodeJS.Timeout | null = null;
  let closed = false;
  let ending: Promise<string[]> | null = null;
  let failing = false;

  const typingStarted = Date.now();
  const typing = () => {
    if (Date.now() - typingStarted > tuning.typingMaxMs) return stopTyping();
    transport.typing(channelId).catch((err: unknown) => logger.debug({ err, channelId }, 'discord typing indicator failed'));
  };
  const stopTyping = () => {
    if (typingTimer) clearInterval(typingTimer);
    typingTimer = null;
  };
  if (!interaction) {
    typing();
    typingTimer = setInterval(typing, tuning.typingIntervalMs);
    typingTimer.unref();
  }

  /** Posts the first text or edits the message to `text`. */
  async function show(text: string): Promise<void> {
    if (firstId === null) {
      stopTyping(); // the text is on its way: no "typing…" after it, however long the post takes
      firstId = await ops.first(text);
    } else {
      await ops.edit(firstId, text);
    }
    shown = text;
  }

  function schedule(): void {
    if (timer || inFlight || closed || pending === null) return;
    timer = setTimeout(flush, Math.max(0, lastStart + tuning.editIntervalMs - Date.now()));
    timer.unref();
  }

  function flush(): void {
    timer = null;
    if (closed || pending === null) return;
    const text = toDiscordParts(pending)[0] ?? '';
    pending = null;
    if (text === shown) return;
    lastStart = Date.now();
    inFlight = show(text)
      .catch((err: unknown) => logger.warn({ err, channelId }, 'discord progressive reply failed'))
      .finally(() => {
        inFlight = null;
        schedule();
      });
  }

  /** Ends the reply with `text`: the progressive message becomes the first part, the rest follow. */
  async function end(text: string, buttons: boolean): Promise<string[]> {
    closed = true;
    if (timer) clearTimeout(timer);
    timer = null;
    stopTyping();
    try {
      await inFlight;
      const [first = '', ...rest] = toDiscordParts(text);
      const ids: string[] = [];
      // The buttons go under the last part.
      const under = buttons ? components : undefined;
      const firstComponents = rest.length === 0 ? under : undefined;
      if (firstId !== null) {
        try {
          if (shown !== first || firstComponents) await ops.edit(firstId, first, firstComponents);
          ids.push(firstId);
        } catch (err) {
          // The progressive message is gone (deleted?): post the answer anew.
          logger.warn({ err, channelId }, 'discord reply edit failed; posting instead');
          ids.push(await ops.more(first, firstComponents));
        }
      } else {
        ids.push(await ops.first(first, firstComponents));
      }
      for (const [i, part] of rest.entries()) ids.push(await ops.more(part, i === rest.length - 1 ? under : undefined));
      // A slash command's answer opens a thread for the follow-ups (in a server channel).
      if (target.threadName && !failing) {
        await transport.startThread(channelId, ids[0]!, target.threadName).catch((err: unknown) => logger.warn({ err, channelId }, 'discord: the thread for the follow-ups could not be started'));
      }
      return ids;
    } finally {
      onDone();
    }
  }

  return {
    progress(textSoFar) {
      if (closed) return;
      pending = textSoFar;
      schedule();
    },
    finish(text, options) {
      // A notice (a handoff's) is not an answer: nothing to rate or regenerate under it.
      ending ??= end(text, options?.answerButtons !== false);
      return ending;
    },
    async fail(text) {
      if (!ending) failing = true;
      ending ??= end(text, false);
      await ending.catch((err: unknown) => logger.warn({ err, channelId }, 'discord failure notice could not be posted'));
    },
    async discard() {
      // A person has the conversation: nothing will be written, so "typing…" stops now.
      if (ending || closed) return;
      closed = true;
      if (timer) clearTimeout(timer);
      timer = null;
      stopTyping();
      onDone();
    },
    dispose() {
      closed = true;
      if (timer) clearTimeout(timer);
      timer = null;
      stopTyping();
    },
  };
}
