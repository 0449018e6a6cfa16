/**
 * What the bridge posts: progressive replies (post once, then edit at most about once a second) and
 * queued sends. Retries (429 with Retry-After, 5xx, network errors) are the WebClient's, configured
 * with bounded retries in slack-bridge.ts; a platform error (`ok: false`) is not retried.
 */
import type { webApi } from '@slack/bolt';
import type { Logger } from 'pino';
import type { OutboundButton, OutboundMessage, ReplyTarget, ReplyWriter, SendResult } from '../bridge.js';
import { markdownToMrkdwn, SLACK_PART_LIMIT, toSlackParts } from './format.js';
import { splitMessage } from '../split.js';

/** Minimum time between two progressive edits of one reply. */
export const PROGRESS_INTERVAL_MS = 1000;
/** Put in front of a `high` priority send, so the reader sees it is urgent. */
export const HIGH_PRIORITY_MARK = '🔴 ';

type WebClient = webApi.WebClient;

export class SlackOutbound {
  private readonly queue: Array<{ high: boolean; run: () => Promise<void> }> = [];
  private pumping = false;

  constructor(
    private readonly web: WebClient,
    private readonly logger: Logger,
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

  async update(channel: string, ts: string, text: string): Promise<void> {
    await this.web.chat.update({ channel, ts, text });
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

  reply(target: ReplyTarget): ReplyWriter {
    const channel = typeof target.channel === 'string' ? target.channel : '';
    const threadTs = typeof target.thread_ts === 'string' ? target.thread_ts : null;
    return new ProgressiveReply(this, channel, threadTs, this.logger);
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
 * One reply: the first `progress` text is posted, later ones edit that message, no sooner than
 * PROGRESS_INTERVAL_MS after the previous request started and never while one is in flight; only
 * the latest text is sent. `finish`/`fail` wait for the request in flight, then write the final text.
 */
class ProgressiveReply implements ReplyWriter {
  private ts: string | null = null;
  private latest: string | null = null;
  private shown: string | null = null;
  private inFlight: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private lastStart = 0;
  private done = false;

  constructor(
    private readonly out: SlackOutbound,
    private readonly channel: string,
    private readonly threadTs: string | null,
    private readonly logger: Logger,
  ) {}

  progress(textSoFar: string): void {
    if (this.done) return;
    this.latest = textSoFar;
    this.schedule();
  }

  async finish(text: string): Promise<string[]> {
    await this.settle();
    const parts = toSlackParts(text);
    const ids: string[] = [];
    const first = parts[0] ?? '';
    if (this.ts === null) ids.push(await this.out.post(this.channel, first, this.threadTs));
    else {
      if (first !== this.shown) await this.out.update(this.channel, this.ts, first);
      ids.push(this.ts);
    }
    const thread = this.threadTs ?? ids[0] ?? null;
    for (const part of parts.slice(1)) ids.push(await this.out.post(this.channel, part, thread));
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

  /** Stops progress and waits for the request in flight. */
  private async settle(): Promise<void> {
    this.done = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.inFlight) await this.inFlight;
  }

  private schedule(): void {
    if (this.inFlight || this.timer || this.done) return;
    const wait = Math.max(0, this.lastStart + PROGRESS_INTERVAL_MS - Date.now());
    this.timer = setTimeout(() => {
      this.timer = null;
      this.flush();
    }, wait);
  }

  private flush(): void {
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
