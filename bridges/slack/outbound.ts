/**
 * What the bridge posts: progressive replies (post once, then edit at most about once a second) and
 * queued sends. Retries (429 with Retry-After, 5xx, network errors) are the WebClient's, configured
 * with bounded retries in slack-bridge.ts; a platform error (`ok: false`) is not retried.
 */
import type { webApi } from '@slack/bolt';
import type { Logger } from 'pino';
import { type ChannelSettings, FEEDBACK_ACTION, type FinishOptions, type OutboundButton, type OutboundMessage, REGENERATE_ACTION, type ReplyTarget, type ReplyWriter, type SendResult } from '../bridge.js';
import { markdownToMrkdwn, SLACK_PART_LIMIT, toSlackParts } from './format.js';
import { splitMessage } from '../split.js';

/** Minimum time between two progressive edits of one reply. */
export const PROGRESS_INTERVAL_MS = 1000;
/** Put in front of a `high` priority send, so the reader sees it is urgent. */
export const HIGH_PRIORITY_MARK = '🔴 ';
export { FEEDBACK_ACTION, REGENERATE_ACTION } from '../bridge.js';
/** At most this much of an answer is streamed as one message (markdown); the rest follows as messages. */
export const STREAM_LIMIT = 12_000;
/**
 * `chat.appendStream` calls a channel makes, all its answers together: at most this many a second
 * (a bucket of as many, refilled continuously). With many answers at once each appends less often,
 * with more text; `chat.stopStream` writes whatever is left.
 */
export const APPENDS_PER_SECOND = 10;
/**
 * What Slack answers when this workspace, plan, base URL (Enterprise Grid, GovSlack) or token cannot
 * stream or show a status: the channel falls back (post, then edit) and remembers.
 */
const REFUSALS = new Set(['unknown_method', 'not_allowed', 'not_allowed_token_type', 'missing_scope', 'feature_not_enabled', 'method_not_supported_for_channel_type', 'not_supported', 'no_permission']);
export const isRefusal = (err: unknown): boolean => REFUSALS.has(String((err as { data?: { error?: unknown } } | null)?.data?.error ?? ''));

type WebClient = webApi.WebClient;

export class SlackOutbound {
  private readonly queue: Array<{ high: boolean; run: () => Promise<void> }> = [];
  private pumping = false;
  /** Slack refused native streaming (or the status) on this channel: answers post then edit (and show no status) from now on. */
  streamingRefused = false;
  statusRefused = false;
  private appendTokens = APPENDS_PER_SECOND;
  private appendRefilled = Date.now();

  /** Takes one `chat.appendStream` from the channel's budget: 0 when taken, else how long to wait for one (ms). */
  takeAppend(): number {
    const now = Date.now();
    this.appendTokens = Math.min(APPENDS_PER_SECOND, this.appendTokens + ((now - this.appendRefilled) * APPENDS_PER_SECOND) / 1000);
    this.appendRefilled = now;
    if (this.appendTokens >= 1) {
      this.appendTokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - this.appendTokens) * 1000) / APPENDS_PER_SECOND);
  }

  constructor(
    readonly web: WebClient,
    private readonly logger: Logger,
    private readonly settings: () => ChannelSettings,
  ) {}

  async post(channel: string, text: string, threadTs: string | null): Promise<string> {
    return (await this.postIn(channel, text, threadTs)).ts;
  }

  /** Posts, with buttons in an `actions` block when given; answers the ts and the channel it landed in (a user id names their DM). */
  private async postIn(channel: string, text: string, threadTs: string | null, buttons: OutboundButton[] = []): Promise<{ ts: string; channel: string }> {
    const result = await this.web.chat.postMessage({ channel, text, ...(threadTs ? { thread_ts: threadTs } : {}), ...(buttons.length > 0 ? { blocks: withButtons(text, buttons) } : {}) });
    if (!result.ts) throw new Error('Slack answered chat.postMessage without a ts.');
    return { ts: result.ts, channel: result.channel ?? channel };
  }

  async update(channel: string, ts: string, text: string, blocks?: unknown[]): Promise<void> {
    await this.web.chat.update({ channel, ts, text, ...(blocks ? { blocks: blocks as never } : {}) });
  }

  /** Posts the last part of an answer with its feedback buttons. */
  async postWithFeedback(channel: string, text: string, threadTs: string | null): Promise<string> {
    const result = await this.web.chat.postMessage({ channel, text, ...(threadTs ? { thread_ts: threadTs } : {}), blocks: answerBlocks(text) as never });
    if (!result.ts) throw new Error('Slack answered chat.postMessage without a ts.');
    return result.ts;
  }

  /**
   * Shows what the answer is doing in the thread (`assistant.threads.setStatus`), rotating
   * `loading` messages; Slack clears it when the reply arrives. Never throws; a refusal is
   * remembered, and the channel shows no status from then on.
   */
  status(channel: string, threadTs: string, status: string, loading: string[] = []): Promise<void> {
    if (this.statusRefused) return Promise.resolve();
    return this.web.assistant.threads.setStatus({ channel_id: channel, thread_ts: threadTs, status, ...(loading.length > 0 ? { loading_messages: loading } : {}) }).then(
      () => undefined,
      (err: unknown) => {
        if (isRefusal(err)) this.statusRefused = true;
        else this.logger.debug({ err, channel }, 'slack: the status could not be set');
      },
    );
  }

  /**
   * Posts a message through the bridge's queue: one send at a time, `high` priority ahead of the
   * sends still waiting (after other `high` ones) and marked with HIGH_PRIORITY_MARK.
   */
  send(message: OutboundMessage): Promise<SendResult> {
    const high = message.priority === 'high';
    const text = high ? `${HIGH_PRIORITY_MARK}${message.text}` : message.text;
    return this.enqueue(high, async () => {
      const parts = toSlackParts(text);
      const buttons = message.buttons ?? [];
      // Buttons go under the last part, where the reader finishes.
      const first = await this.postIn(message.to, parts[0] ?? '', message.threadId ?? null, parts.length === 1 ? buttons : []);
      const thread = message.threadId ?? first.ts;
      for (const [i, part] of parts.slice(1).entries()) await this.postIn(first.channel, part, thread, i === parts.length - 2 ? buttons : []);
      return { externalId: first.ts, thread: `${first.channel}:${thread}` };
    });
  }

  /**
   * A reply in `target`: streamed natively in a thread where Slack allows it (a status shown while
   * the answer is worked out), else posted then edited; with feedback buttons under it when the
   * channel's settings ask for them.
   */
  reply(target: ReplyTarget): ReplyWriter {
    const channel = typeof target.channel === 'string' ? target.channel : '';
    const threadTs = typeof target.thread_ts === 'string' ? target.thread_ts : null;
    const user = typeof target.user === 'string' ? target.user : null;
    const team = typeof target.team === 'string' ? target.team : null;
    const settings = this.settings();
    const thinking = threadTs !== null ? this.status(channel, threadTs, 'is thinking…', settings.statusMessages) : Promise.resolve();
    const progressive = () => new ProgressiveReply(this, channel, threadTs, this.logger, settings.feedbackButtons);
    // Outside a DM Slack streams to one recipient: the user who asked (and their team).
    const streamable = settings.streaming && !this.streamingRefused && threadTs !== null && (channel.startsWith('D') || (user !== null && team !== null));
    if (!streamable) return withStatus(progressive(), this, channel, threadTs, thinking);
    const stream = new StreamingReply(this, { channel, thread_ts: threadTs!, ...(channel.startsWith('D') ? {} : { recipient_user_id: user!, recipient_team_id: team! }) }, settings.feedbackButtons, progressive, this.logger);
    return withStatus(stream, this, channel, threadTs, thinking);
  }

  private enqueue<T>(high: boolean, task: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const job = { high, run: () => task().then(resolve, reject) };
      const firstNormal = high ? this.queue.findIndex((queued) => !queued.high) : -1;
      if (firstNormal === -1) this.queue.push(job);
      else this.queue.splice(firstNormal, 0, job);
      void this.pump();
    });
  }

  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    try {
      for (let job = this.queue.shift(); job; job = this.queue.shift()) await job.run();
    } finally {
      this.pumping = false;
    }
  }
}

/**
 * The pacing both kinds of reply share: at most one request in flight, the next no sooner than
 * PROGRESS_INTERVAL_MS after the previous one started; `flush` sends the latest text.
 */
abstract class Paced {
  protected inFlight: Promise<void> | null = null;
  protected timer: NodeJS.Timeout | null = null;
  protected lastStart = 0;
  protected done = false;

  protected abstract flush(): void;

  /** Stops progress and waits for the request in flight. */
  protected async settle(): Promise<void> {
    this.done = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.inFlight) await this.inFlight;
  }

  protected schedule(): void {
    if (this.inFlight || this.timer || this.done) return;
    const wait = Math.max(0, this.lastStart + PROGRESS_INTERVAL_MS - Date.now());
    this.timer = setTimeout(() => {
      this.timer = null;
      this.flush();
    }, wait);
  }
}

/**
 * One reply: the first `progress` text is posted, later ones edit that message, no sooner than
 * PROGRESS_INTERVAL_MS after the previous request started and never while one is in flight; only
 * the latest text is sent. `finish`/`fail` wait for the request in flight, then write the final text.
 */
class ProgressiveReply extends Paced implements ReplyWriter {
  private ts: string | null = null;
  private latest: string | null = null;
  private shown: string | null = null;

  constructor(
    private readonly out: SlackOutbound,
    private readonly channel: string,
    private readonly threadTs: string | null,
    private readonly logger: Logger,
    private readonly feedback = false,
  ) {
    super();
  }

  progress(textSoFar: string): void {
    if (this.done) return;
    this.latest = textSoFar;
    this.schedule();
  }

  async finish(text: string, options: FinishOptions = {}): Promise<string[]> {
    await this.settle();
    const parts = toSlackParts(text);
    const ids: string[] = [];
    const first = parts[0] ?? '';
    const feedback = this.feedback && options.answerButtons !== false;
    // The feedback buttons go under the last part.
    const last = parts.length === 1 && feedback;
    if (this.ts === null) ids.push(last ? await this.out.postWithFeedback(this.channel, first, this.threadTs) : await this.out.post(this.channel, first, this.threadTs));
    else {
      if (first !== this.shown || last) await this.out.update(this.channel, this.ts, first, last ? answerBlocks(first) : undefined);
      ids.push(this.ts);
    }
    const thread = this.threadTs ?? ids[0] ?? null;
    for (const [i, part] of parts.slice(1).entries()) {
      ids.push(feedback && i === parts.length - 2 ? await this.out.postWithFeedback(this.channel, part, thread) : await this.out.post(this.channel, part, thread));
    }
    return ids;
  }

  async fail(text: string): Promise<void> {
    await this.settle();
    const body = splitMessage(markdownToMrkdwn(text), SLACK_PART_LIMIT)[0] ?? '';
    try {
      if (this.ts === null) await this.out.post(this.channel, body, this.threadTs);
      else await this.out.update(this.channel, this.ts, body);
    } catch (err) {
      this.logger.warn({ err, channel: this.channel }, 'slack: could not post the failure notice');
    }
  }


  protected flush(): void {
    if (this.done || this.latest === null) return;
    const parts = toSlackParts(this.latest);
    const text = parts.length > 1 ? `${parts[0] ?? ''} …` : (parts[0] ?? '');
    if (text === this.shown || text.trim() === '') return;
    this.lastStart = Date.now();
    const ts = this.ts;
    const request = ts === null ? this.out.post(this.channel, text, this.threadTs) : this.out.update(this.channel, ts, text).then(() => ts);
    this.inFlight = request.then(
      (posted) => {
        this.ts = posted;
        this.shown = text;
      },
      (err: unknown) => this.logger.warn({ err, channel: this.channel }, 'slack: progressive update failed'),
    ).finally(() => {
      this.inFlight = null;
      if (!this.done && this.latest !== null) this.schedule();
    });
  }
}

/**
 * Shows a writer's tool statuses in the thread until its first text; the answer is written once the
 * status asked for first is settled (so a refusal is known before the next reply).
 */
function withStatus(writer: ReplyWriter, out: SlackOutbound, channel: string, threadTs: string | null, thinking: Promise<void>): ReplyWriter {
  if (threadTs === null) return writer;
  let texted = false;
  // Text waits for the status call: Slack clears a status when the reply arrives, so it must come first.
  let ready = false;
  let pending: string | null = null;
  void thinking.then(() => {
    ready = true;
    if (pending !== null) writer.progress(pending);
  });
  return {
    progress: (soFar) => {
      texted = true;
      if (ready) writer.progress(soFar);
      else pending = soFar;
    },
    finish: async (text, options) => {
      await thinking;
      return writer.finish(text, options);
    },
    fail: async (text) => {
      await thinking;
      return writer.fail(text);
    },
    status: (text) => {
      if (!texted) void out.status(channel, threadTs, text);
    },
    // No reply will clear the status (Slack does when one arrives): an empty status does.
    discard: async () => {
      await thinking;
      await out.status(channel, threadTs, '');
    },
  };
}

/**
 * One reply streamed natively: `chat.startStream` with the first text, `chat.appendStream` with
 * what came since, at most about once a second (so 50 answers at once stay within Slack's limits),
 * `chat.stopStream` with the rest and the feedback buttons. When Slack refuses to start a stream,
 * the reply (and every later one on the channel) is posted then edited instead.
 */
class StreamingReply extends Paced implements ReplyWriter {
  private ts: string | null = null;
  private sent = '';
  private latest = '';
  private fallback: ReplyWriter | null = null;

  constructor(
    private readonly out: SlackOutbound,
    private readonly target: { channel: string; thread_ts: string; recipient_user_id?: string; recipient_team_id?: string },
    private readonly feedback: boolean,
    private readonly progressive: () => ReplyWriter,
    private readonly logger: Logger,
  ) {
    super();
  }

  progress(textSoFar: string): void {
    if (this.done) return;
    this.latest = textSoFar;
    if (this.fallback) return this.fallback.progress(textSoFar);
    this.schedule();
  }

  async finish(text: string, options: FinishOptions = {}): Promise<string[]> {
    await this.settle();
    const [streamed = '', ...rest] = splitMessage(text, STREAM_LIMIT);
    if (!this.fallback && this.ts === null) await this.start(streamed);
    if (this.fallback) return this.fallback.finish(text, options);
    const delta = streamed.startsWith(this.sent) ? streamed.slice(this.sent.length) : '';
    const buttons = this.feedback && options.answerButtons !== false;
    await this.out.web.chat.stopStream({ channel: this.target.channel, ts: this.ts!, ...(delta ? { markdown_text: delta } : {}), ...(buttons ? { blocks: answerButtons() as never } : {}) });
    const ids = [this.ts!];
    for (const part of rest.flatMap((r) => toSlackParts(r))) ids.push(await this.out.post(this.target.channel, part, this.target.thread_ts));
    return ids;
  }

  async fail(text: string): Promise<void> {
    await this.settle();
    if (this.fallback) return this.fallback.fail(text);
    try {
      if (this.ts === null) await this.out.post(this.target.channel, splitMessage(markdownToMrkdwn(text), SLACK_PART_LIMIT)[0] ?? '', this.target.thread_ts);
      else await this.out.web.chat.stopStream({ channel: this.target.channel, ts: this.ts, markdown_text: `\n\n${text}` });
    } catch (err) {
      this.logger.warn({ err, channel: this.target.channel }, 'slack: could not post the failure notice');
    }
  }

  /** Starts the stream with `text`; a refusal switches this reply (and the channel) to post-then-edit. */
  private async start(text: string): Promise<void> {
    if (text.trim() === '') return;
    try {
      const started = await this.out.web.chat.startStream({ ...this.target, markdown_text: text });
      if (!started.ts) throw new Error('Slack answered chat.startStream without a ts.');
      this.ts = started.ts;
      this.sent = text;
    } catch (err) {
      if (!isRefusal(err)) throw err;
      this.out.streamingRefused = true;
      this.logger.info({ channel: this.target.channel, error: (err as { data?: { error?: string } }).data?.error }, 'slack: streaming refused here; answers post then edit');
      this.fallback = this.progressive();
      if (this.latest !== '' && !this.done) this.fallback.progress(this.latest);
    }
  }


  protected flush(): void {
    if (this.done || this.fallback) return;
    const text = this.latest.slice(0, STREAM_LIMIT);
    if (text.trim() === '' || text === this.sent || !text.startsWith(this.sent)) return;
    if (this.ts !== null) {
      // The channel's append budget is spent: try again when there is one (the text keeps growing meanwhile).
      const wait = this.out.takeAppend();
      if (wait > 0) {
        this.timer = setTimeout(() => {
          this.timer = null;
          this.flush();
        }, wait);
        return;
      }
    }
    this.lastStart = Date.now();
    const request =
      this.ts === null
        ? this.start(text)
        : this.out.web.chat.appendStream({ channel: this.target.channel, ts: this.ts, markdown_text: text.slice(this.sent.length) }).then(() => {
            this.sent = text;
          });
    this.inFlight = request
      .catch((err: unknown) => this.logger.warn({ err, channel: this.target.channel }, 'slack: streaming an answer failed'))
      .finally(() => {
        this.inFlight = null;
        if (!this.done && !this.fallback && this.latest !== this.sent) this.schedule();
      });
  }
}

/**
 * The buttons under an answer: 👍/👎 (`feedback_buttons` in a `context_actions` block), then
 * Regenerate (a button in an `actions` block: Slack documents no "regenerate" icon for an
 * `icon_button`, and a block Slack does not know would refuse the whole answer).
 */
export function answerButtons() {
  return [feedbackBlock(), { type: 'actions', elements: [{ type: 'button', action_id: REGENERATE_ACTION, value: 'regenerate', text: { type: 'plain_text', text: 'Regenerate' } }] }];
}

function feedbackBlock() {
  const button = (text: string, value: string, label: string) => ({ text: { type: 'plain_text', text }, value, accessibility_label: label });
  return {
    type: 'context_actions',
    elements: [
      {
        type: 'feedback_buttons',
        action_id: FEEDBACK_ACTION,
        positive_button: button('Good answer', 'positive', 'Rate this answer as good'),
        negative_button: button('Bad answer', 'negative', 'Rate this answer as bad'),
      },
    ],
  };
}

/** An answer part's text as sections (each within Slack's limit), then the feedback buttons. */
function answerBlocks(text: string) {
  return [...splitMessage(text, SECTION_LIMIT).map((part) => ({ type: 'section', text: { type: 'mrkdwn', text: part } })), ...answerButtons()];
}

/** Slack's limit for a section block's text; the message's `text` keeps all of it (notifications, clients without blocks). */
const SECTION_LIMIT = 3000;

/** The text as a section, then the buttons in an `actions` block. */
function withButtons(text: string, buttons: OutboundButton[]) {
  const section = text.length > SECTION_LIMIT ? `${text.slice(0, SECTION_LIMIT - 1)}…` : text;
  return [
    { type: 'section', text: { type: 'mrkdwn', text: section } },
    {
      type: 'actions',
      elements: buttons.map((b) => ({ type: 'button', action_id: b.id, value: b.value, text: { type: 'plain_text', text: b.label }, ...(b.style ? { style: b.style } : {}) })),
    },
  ];
}
