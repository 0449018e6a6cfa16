/**
 * What a signed Events API delivery may hold before it reaches Bolt. Bolt's helpers trust Slack's
 * shapes (`'channel' in event`, `event.user.id`, `authorizations[0].team_id`) and throw a TypeError
 * on anything else, so a body Slack would never send (an `event` that is null or a string, `[]`)
 * is refused here, as the HTTP API refuses any bad body: a 400 naming the field.
 */
import { z } from 'zod';
import { validationErrorOf, zodFieldErrors } from '../../src/errors.js';
import { parseJsonBody } from '../../src/lib/json-depth.js';

const text = z.string().optional();

/** An event as Bolt and the bridge read it: the fields they dereference have Slack's types, the rest is free. */
const eventSchema = z
  .looseObject({
    type: z.string(),
    // A user id, or a user object (user_change); a channel id, or a channel object (channel_created).
    user: z.union([z.string(), z.looseObject({})]).optional(),
    channel: z.union([z.string(), z.looseObject({})]).optional(),
    item: z.looseObject({ type: text, channel: text, ts: text }).optional(),
    subteam: z.looseObject({}).optional(),
    subtype: text,
    bot_id: text,
    text,
    ts: text,
    thread_ts: text,
    channel_type: text,
    reaction: text,
    item_user: text,
  })
  .superRefine((event, ctx) => {
    // The bridge reads a message's channel and author as ids.
    if (event.type !== 'message' && event.type !== 'app_mention') return;
    for (const field of ['user', 'channel'] as const) {
      if (event[field] !== undefined && typeof event[field] !== 'string') ctx.addIssue({ code: 'custom', path: [field], message: 'must be a string' });
    }
  });

/** Every delivery says what it is; these two are read further. */
const envelopeSchema = z.looseObject({ type: z.string() });
const urlVerificationSchema = z.looseObject({ challenge: z.string() });
const eventCallbackSchema = z.looseObject({
  event: eventSchema,
  event_id: text,
  team_id: text,
  authorizations: z.array(z.looseObject({})).optional(),
});

/** A button click (`block_actions`) as Bolt and the bridge read it. */
const blockActionsSchema = z.looseObject({
  type: z.literal('block_actions'),
  user: z.looseObject({ id: z.string() }),
  channel: z.looseObject({ id: z.string() }).optional(),
  container: z.looseObject({ channel_id: text, message_ts: text, thread_ts: text }).optional(),
  message: z.looseObject({ ts: text, thread_ts: text }).optional(),
  team: z.looseObject({ id: text }).nullable().optional(),
  actions: z.array(z.looseObject({ action_id: z.string(), value: text, type: text })).max(25),
});

/** A slash command (a form of plain fields) as Bolt and the bridge read it. */
const slashCommandSchema = z.looseObject({
  command: z.string().startsWith('/'),
  text: z.string(),
  user_id: z.string().min(1),
  channel_id: z.string().min(1),
  team_id: z.string(),
  trigger_id: z.string().min(1),
  response_url: z.string(),
});

export type SlackDelivery =
  | { kind: 'url_verification'; challenge: string }
  | { kind: 'ssl_check' }
  | { kind: 'event'; body: Record<string, unknown> }
  /** Well formed, but nothing the bridge listens to: acknowledged without Bolt. */
  | { kind: 'other' };

/**
 * A delivery's body: JSON (Events API), or a form with a JSON `payload` (interactivity) or plain
 * fields (a slash command, ssl_check). Throws the AppError to answer for a body that is not JSON or not a delivery.
 */
export function readSlackDelivery(raw: string, contentType: string): SlackDelivery {
  let body: unknown;
  let where = 'body';
  if (contentType.toLowerCase().includes('application/x-www-form-urlencoded')) {
    const form = new URLSearchParams(raw);
    const payload = form.get('payload');
    if (payload === null) {
      if (form.has('ssl_check')) return { kind: 'ssl_check' };
      body = Object.fromEntries(form);
      // A slash command names no `type`: its `command` says what it is.
      if (form.has('command')) return { kind: 'event', body: check(slashCommandSchema, body, where) };
    } else {
      where = 'payload';
      body = parseJsonBody(payload, 'payload');
    }
  } else {
    body = parseJsonBody(raw);
  }
  const envelope = check(envelopeSchema, body, where);
  if (envelope.type === 'url_verification') return { kind: 'url_verification', challenge: check(urlVerificationSchema, body, where).challenge };
  if (envelope.type === 'event_callback' && where === 'body') {
    check(eventCallbackSchema, body, where);
    return { kind: 'event', body: envelope };
  }
  // Button clicks go to Bolt's action listeners; other interactivity has none: acknowledged, not handed on.
  if (envelope.type === 'block_actions' && where === 'payload') {
    check(blockActionsSchema, body, where);
    return { kind: 'event', body: envelope };
  }
  return { kind: 'other' };
}

function check<T extends z.ZodType>(schema: T, body: unknown, where: string): z.output<T> {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  throw validationErrorOf(where, zodFieldErrors(parsed.error.issues, where === 'body' ? undefined : where, where));
}
