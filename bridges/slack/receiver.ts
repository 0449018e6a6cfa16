/**
 * A Bolt Receiver for the Events API that listens on no port: the channels service's route hands
 * each delivery to `handle()`, which verifies it with Bolt's own `verifySlackRequest`, refuses a
 * body that is no Slack delivery (events-body.ts), answers `url_verification`, and passes event
 * callbacks to `app.processEvent`, answering as soon as Bolt acks
 * (Bolt acks events before running the listeners, so the answer leaves well within Slack's 3 s).
 */
import { verifySlackRequest, type App, type Receiver, type ReceiverEvent } from '@slack/bolt';
import type { Logger } from 'pino';
import { InternalError, UnauthorizedError, UnavailableError } from '../../src/errors.js';
import type { RawHttpRequest, RawHttpResponse } from '../bridge.js';
import { readSlackDelivery } from './events-body.js';

/** A delivery Bolt has not acknowledged by then is answered 200 anyway, so Slack does not retry it. */
const ACK_DEADLINE_MS = 2500;
/** Slack's replay window, both ways (Bolt's check covers only the past). */
const MAX_SKEW_SEC = 5 * 60;

export class EventsApiReceiver implements Receiver {
  private app: App | undefined;

  constructor(
    private readonly signingSecret: string,
    private readonly logger: Logger,
  ) {}

  init(app: App): void {
    this.app = app;
  }

  async start(): Promise<void> {}

  async stop(): Promise<void> {}

  /**
   * Throws UnauthorizedError for a missing or wrong signature or a timestamp over 5 minutes off, and
   * the 400 of `readSlackDelivery` for a signed body that is not a Slack delivery (it never reaches Bolt).
   */
  async handle(request: RawHttpRequest): Promise<RawHttpResponse> {
    const rawBody = request.rawBody.toString('utf8');
    this.verify(rawBody, request.headers);
    const delivery = readSlackDelivery(rawBody, header(request.headers, 'content-type') ?? '');
    if (delivery.kind === 'url_verification') {
      return { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ challenge: delivery.challenge }) };
    }
    if (delivery.kind !== 'event') return { status: 200, body: '' };
    const app = this.app;
    if (!app) throw new UnavailableError('The Slack bridge is not started.');
    const body = delivery.body;

    const retryNum = Number(header(request.headers, 'x-slack-retry-num'));
    const retryReason = header(request.headers, 'x-slack-retry-reason');
    return new Promise<RawHttpResponse>((resolve, reject) => {
      let settled = false;
      const settle = (outcome: () => void): void => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        outcome();
      };
      const answer = (response: RawHttpResponse): void => settle(() => resolve(response));
      const deadline = setTimeout(() => answer({ status: 200, body: '' }), ACK_DEADLINE_MS);
      const event: ReceiverEvent = {
        body,
        ...(Number.isInteger(retryNum) ? { retryNum } : {}),
        ...(retryReason !== undefined ? { retryReason } : {}),
        ack: async (response?: unknown) => {
          if (response === undefined || response === '') answer({ status: 200, body: '' });
          else if (typeof response === 'string') answer({ status: 200, headers: { 'content-type': 'text/plain' }, body: response });
          else answer({ status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify(response) });
        },
      };
      app.processEvent(event).then(
        () => answer({ status: 200, body: '' }),
        (err: unknown) => {
          this.logger.error({ err }, 'slack: processing an Events API delivery failed');
          settle(() => reject(new InternalError()));
        },
      );
    });
  }

  private verify(rawBody: string, headers: RawHttpRequest['headers']): void {
    const signature = header(headers, 'x-slack-signature');
    const timestamp = header(headers, 'x-slack-request-timestamp');
    if (!signature || !timestamp) throw new UnauthorizedError('Missing X-Slack-Signature or X-Slack-Request-Timestamp.');
    const seconds = Number(timestamp);
    if (!Number.isFinite(seconds) || Math.abs(Date.now() / 1000 - seconds) > MAX_SKEW_SEC) {
      throw new UnauthorizedError('The Slack request timestamp is more than 5 minutes off.');
    }
    try {
      verifySlackRequest({
        signingSecret: this.signingSecret,
        body: rawBody,
        headers: { 'x-slack-signature': signature, 'x-slack-request-timestamp': seconds },
      });
    } catch (err) {
      throw new UnauthorizedError(`The Slack request signature is not valid (${err instanceof Error ? err.message : String(err)}).`);
    }
  }
}

function header(headers: RawHttpRequest['headers'], name: string): string | undefined {
  const value = headers[name] ?? headers[name.toLowerCase()] ?? findHeader(headers, name);
  return Array.isArray(value) ? value[0] : value;
}

function findHeader(headers: RawHttpRequest['headers'], name: string): string | string[] | undefined {
  const key = Object.keys(headers).find((k) => k.toLowerCase() === name);
  return key === undefined ? undefined : headers[key];
}
