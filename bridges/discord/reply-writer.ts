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
import type { DiscordTransport } from './transport.js';

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
}

export interface DiscordReplyWriter extends ReplyWriter {
  /** Stops the timers (bridge stopped); later calls do nothing or fail. */
  dispose(): void;
}

export function createReplyWriter(target: ReplyTarget, transport: DiscordTransport, tuning: ReplyTuning, logger: Logger, onDone: () => void): DiscordReplyWriter {
  const { channelId, messageId } = target;
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

  const typingStarted = Date.now();
  const typing = () => {
    if (Date.now() - typingStarted > tuning.typingMaxMs) return stopTyping();
    transport.typing(channelId).catch((err: unknown) => logger.debug({ err, channelId }, 'discord typing indicator failed'));
  };
  const stopTyping = () => {
    if (typingTimer) clearInterval(typingTimer);
    typingTimer = null;
  };
  typing();
  typingTimer = setInterval(typing, tuning.typingIntervalMs);
  typingTimer.unref();

  /** Posts the first text or edits the message to `text`. */
  async function show(text: string): Promise<void> {
    if (firstId === null) {
      stopTyping(); // the text is on its way: no "typing…" after it, however long the post takes
      firstId = await transport.post(channelId, text, messageId);
    } else {
      await transport.edit(channelId, firstId, text);
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
  async function end(text: string): Promise<string[]> {
    closed = true;
    if (timer) clearTimeout(timer);
    timer = null;
    stopTyping();
    try {
      await inFlight;
      const [first = '', ...rest] = toDiscordParts(text);
      const ids: string[] = [];
      if (firstId !== null) {
        try {
          if (shown !== first) await transport.edit(channelId, firstId, first);
          ids.push(firstId);
        } catch (err) {
          // The progressive message is gone (deleted?): post the answer anew.
          logger.warn({ err, channelId }, 'discord reply edit failed; posting instead');
          ids.push(await transport.post(channelId, first, messageId));
        }
      } else {
        ids.push(await transport.post(channelId, first, messageId));
      }
      for (const part of rest) ids.push(await transport.post(channelId, part, null));
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
    finish(text) {
      ending ??= end(text);
      return ending;
    },
    async fail(text) {
      ending ??= end(text);
      await ending.catch((err: unknown) => logger.warn({ err, channelId }, 'discord failure notice could not be posted'));
    },
    dispose() {
      closed = true;
      if (timer) clearTimeout(timer);
      timer = null;
      stopTyping();
    },
  };
}
