// The analytics stores (API.md §8) on SQLite and on a real PostgreSQL server (when the run has one,
// test/helpers/postgres.ts): the same interactions, feedback, tool calls, sessions and messages
// seeded into each, every store method checked against figures computed here from those rows, and
// then the two backends' answers compared with each other, value for value.
import type { Kysely, Selectable } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nearestRankPercentiles, type TimeWindow, windowOf } from '../../src/business/analytics/analytics.buckets.js';
import { type AnswerExportRow, type ConversationExportRow, EXPORT_BATCH, type MessageExportRow } from '../../src/business/analytics/analytics.export-store.js';
import { type AnalyticsStore, createAnalyticsStore, type Filter, type Range } from '../../src/business/analytics/analytics.store.js';
import type { Database, FeedbackTable, InteractionsTable, InteractionToolsTable, MessageRole, MessageRow, SessionRow } from '../../src/db/schema.js';
import { testBackends } from '../helpers/postgres.js';
import { type OpenedBackend, openTestBackend } from '../helpers/sql-backend.js';

type InteractionRow = Selectable<InteractionsTable>;
type FeedbackRow = Selectable<FeedbackTable>;
type ToolRow = Selectable<InteractionToolsTable>;

const NOW = Date.parse('2026-03-10T12:00:00.000Z');
const MIN = 60_000;
const DAY = 86_400_000;
const iso = (ms: number) => new Date(ms).toISOString();

const WS = 'ws_a';
const OTHER = 'ws_b';
const BULK = 'ws_bulk';
const PERSONAS = ['per_a', 'per_b', 'per_c'] as const;
const CHANNELS = ['chn_1', 'chn_2', null] as const;
const USERS = ['ann', 'bob', 'cy', null] as const;
const TOOLS = ['crm.lookup', 'knowledge.search', 'weather.get'] as const;

const W7 = windowOf(new Date(NOW), { label: '7d', ms: 7 * DAY });
const W24 = windowOf(new Date(NOW), { label: '24h', ms: DAY });
const W30 = windowOf(new Date(NOW), { label: '30d', ms: 30 * DAY });
const WINDOWS: Array<[string, TimeWindow]> = [['7d', W7], ['24h', W24], ['30d', W30]];
const FILTERS: Array<[string, Filter]> = [
  ['workspace', { workspaceId: WS }],
  ['persona', { workspaceId: WS, personaId: 'per_b' }],
  ['channel', { workspaceId: WS, channelId: 'chn_1' }],
  ['persona and channel', { workspaceId: WS, personaId: 'per_a', channelId: 'chn_2' }],
  ['unknown persona', { workspaceId: WS, personaId: 'per_missing' }],
  ['empty workspace', { workspaceId: 'ws_none' }],
];

/** Deterministic xorshift in [0, 1). */
function prng(seed: number) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 2 ** 32;
  };
}

interface Seed {
  sessions: SessionRow[];
  messages: MessageRow[];
  interactions: InteractionRow[];
  feedback: FeedbackRow[];
  tools: ToolRow[];
}

interface Exchange {
  /** Milliseconds after the session's start. */
  at: number;
  user: string | null;
  failed?: string;
  latency: number;
  ttft: number | null;
  tools?: Array<[string, boolean]>;
  ratings?: number[];
  /** The answer written at the question's time (equal times, ordered by seq). */
  sameTime?: boolean;
}

/**
 * Every row, fixed by the seed. Conversations over ten days (the 7-day window cuts through them,
 * and later exchanges of the last ones fall after now), with personas, channels, users changing
 * within a conversation, A/B variants, failed answers, tool rounds with failing calls, ratings
 * (several on one answer), sessions deleted since (their numbers stay, their ids are cleared),
 * another workspace on the same days, and a bulk workspace of runs of equal times larger than a
 * batch.
 */
function seedRows(): Seed {
  const rnd = prng(20_261_125);
  const pick = <T,>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  const out: Seed = { sessions: [], messages: [], interactions: [], feedback: [], tools: [] };
  let messageSeq = 100;
  let interactionSeq = 500;
  let feedbackSeq = 0;
  let toolSeq = 0;

  function conversation(
    ws: string,
    id: string,
    start: number,
    who: { persona: string; channel: string | null; user: string | null; abTest?: [string, 'A' | 'B'] },
    exchanges: Exchange[],
    deleted = false,
  ) {
    const messages: MessageRow[] = [];
    let opened = false;
    for (const [k, x] of exchanges.entries()) {
      const t = start + x.at;
      const message = (role: MessageRole, suffix: string, at: number, extra: Partial<MessageRow> = {}): MessageRow => {
        const m: MessageRow = { seq: ++messageSeq, id: `${id}_${k}${suffix}`, session_id: id, role, content: `${role} ${k} of ${id}`, tool_calls: null, tool_call_id: null, created_at: iso(at), author: null, ...extra };
        messages.push(m);
        return m;
      };
      message('user', 'q', t);
      if (x.tools) {
        const calls = x.tools.map(([name, isError], n) => ({ id: `call_${n}`, name, arguments: '{}', result: 'r', isError }));
        message('assistant', 'c', t, { content: '', tool_calls: JSON.stringify(calls) });
        message('tool', 't', t, { tool_call_id: 'call_0' });
        for (const [name, isError] of x.tools) {
          out.tools.push({ seq: ++toolSeq, workspace_id: ws, started_at: iso(t), persona_id: who.persona, channel_id: who.channel, tool_name: name, is_error: isError ? 1 : 0 });
        }
      }
      // Written when the answer was (capped, so exchanges keep their order in time).
      const answeredAt = x.sameTime ? t : t + Math.max(0, Math.min(x.latency, 30_000));
      const answer = x.failed ? null : message('assistant', 'a', answeredAt);
      const ratings = x.ratings ?? [];
      const newSession = !x.failed && !opened ? 1 : 0;
      if (!x.failed) opened = true;
      out.interactions.push({
        sources: null,
        seq: ++interactionSeq,
        workspace_id: ws,
        session_id: deleted ? null : id,
        message_id: deleted || answer === null ? null : answer.id,
        persona_id: who.persona,
        // Versions 1–3, and answers from before versions were kept (null).
        persona_version: interactionSeq % 4 === 0 ? null : 1 + (interactionSeq % 3),
        ab_test_id: who.abTest?.[0] ?? null,
        variant: who.abTest?.[1] ?? null,
        channel_id: who.channel,
        user_id: x.user,
        model: 'gpt-test',
        started_at: iso(t),
        latency_ms: x.latency,
        ttft_ms: x.ttft,
        prompt_tokens: x.failed ? 0 : 100 + k * 7 + (x.latency % 50),
        completion_tokens: x.failed ? 0 : 20 + (x.latency % 90),
        tool_calls: x.tools?.length ?? 0,
        error: x.failed ?? null,
        rating: ratings.length > 0 ? ratings[ratings.length - 1]! : null,
        metadata: null,
        new_session: newSession,
      });
      for (const [n, rating] of ratings.entries()) {
        out.feedback.push({
          seq: ++feedbackSeq,
          workspace_id: ws,
          session_id: deleted ? null : id,
          message_id: deleted || answer === null ? null : answer.id,
          persona_id: who.persona,
          ab_test_id: who.abTest?.[0] ?? null,
          variant: who.abTest?.[1] ?? null,
          rating,
          comment: null,
          created_at: iso(answeredAt + 30_000 + n),
          channel_id: who.channel,
        });
      }
    }
    if (deleted) return;
    out.messages.push(...messages);
    out.sessions.push({
      id,
      workspace_id: ws,
      persona_id: who.persona,
      ab_test_id: who.abTest?.[0] ?? null,
      variant: who.abTest?.[1] ?? null,
      channel_id: who.channel,
      user_id: who.user,
      title: `Conversation ${id}`,
      message_count: messages.length,
      created_at: iso(start),
      last_message_at: messages[messages.length - 1]!.created_at,
    });
  }

  const randomExchanges = (count: number, user: string | null, channel: string | null): Exchange[] =>
    Array.from({ length: count }, (_, k) => {
      const failed = rnd() < 0.12 ? pick(['upstream_error', 'cancelled', 'timeout']) : undefined;
      const latency = Math.floor(40 + rnd() ** 3 * 8_000);
      const tools = !failed && rnd() < 0.3 ? Array.from({ length: 1 + Math.floor(rnd() * 2) }, () => [pick(TOOLS), rnd() < 0.25] as [string, boolean]) : undefined;
      const ratings = !failed && rnd() < 0.35 ? Array.from({ length: rnd() < 0.2 ? 2 : 1 }, () => 1 + Math.floor(rnd() * 5)) : undefined;
      // A channel conversation has several people in it.
      const exchangeUser = channel !== null && rnd() < 0.4 ? pick(USERS) : user;
      return {
        at: k * 7 * MIN + Math.floor(rnd() * 3 * MIN),
        user: exchangeUser,
        failed,
        latency,
        ttft: rnd() < 0.3 ? null : Math.floor(latency * rnd() * 0.5),
        tools,
        ratings,
        sameTime: rnd() < 0.2,
      };
    });

  for (const [ws, count] of [[WS, 70], [OTHER, 12]] as const) {
    for (let i = 0; i < count; i++) {
      // Ten days up to now; two pairs share their start (ties by id).
      let start = NOW - 10 * DAY + Math.floor((i * 10 * DAY) / count);
      if (i === 21 || i === 41) start = NOW - 10 * DAY + Math.floor(((i - 1) * 10 * DAY) / count);
      const persona = pick(PERSONAS);
      const channel = pick(CHANNELS);
      const user = pick(USERS);
      const abTest = rnd() < 0.2 ? (['abt_1', pick(['A', 'B'] as const)] as [string, 'A' | 'B']) : undefined;
      const id = `ses_${ws}_${String(i).padStart(3, '0')}`;
      conversation(ws, id, start, { persona, channel, user, abTest }, randomExchanges(1 + Math.floor(rnd() * 4), user, channel), i % 9 === 4);
    }
  }

  // At the window's edges: at its start (in), at now (in), one millisecond after now (out).
  conversation(WS, 'ses_edge_lo', NOW - 7 * DAY, { persona: 'per_c', channel: 'chn_2', user: 'dee' }, [{ at: 0, user: 'dee', latency: 300, ttft: 100 }]);
  conversation(WS, 'ses_edge_now', NOW, { persona: 'per_a', channel: null, user: null }, [{ at: 0, user: null, latency: 250, ttft: null, sameTime: true }]);
  conversation(WS, 'ses_edge_hi', NOW + 1, { persona: 'per_a', channel: null, user: null }, [{ at: 0, user: null, latency: 260, ttft: null }]);
  // Zero, huge (beyond 32 bits) and negative times; an average latency ending in .5; eight ratings averaging 2.125.
  conversation(WS, 'ses_special', NOW - 2 * DAY, { persona: 'per_b', channel: 'chn_1', user: 'eve' }, [
    { at: 0, user: 'eve', latency: 0, ttft: -3 },
    { at: MIN, user: 'eve', latency: 5_000_000_000, ttft: null, ratings: [2, 2, 2, 3, 2, 2, 2, 2] },
    { at: 2 * MIN, user: 'eve', latency: 7, ttft: 0, tools: [['crm.lookup', true], ['crm.lookup', false]] },
    { at: 3 * MIN, user: 'eve', latency: 7, ttft: 12, failed: 'upstream_error' },
    { at: 4 * MIN, user: 'fay', latency: 8, ttft: 1 },
  ]);

  // Bulk, more than a batch of each export: 500 sessions at times of their own (a question, its
  // answer 1 ms later), so the first messages batch ends between two times; then 550 sessions in
  // runs of 7 with question and answer at one time, and 1,300 session-less answers in runs of 7, so
  // the other batches end inside runs of equal times.
  const bulkStart = NOW - 2 * DAY;
  for (let j = 0; j < 1_050; j++) {
    const start = j < 500 ? bulkStart + 2 * j : bulkStart + 1_000 + Math.floor((j - 500) / 7);
    conversation(BULK, `bulk_${String(j).padStart(4, '0')}`, start, { persona: 'per_a', channel: null, user: `u${j}` }, [
      // Some with a tool round, which the export leaves out: it must not count towards a batch either.
      j < 500 ? { at: 0, user: `u${j}`, latency: 1, ttft: null, ...(j % 10 === 3 ? { tools: [['crm.lookup', false]] as Array<[string, boolean]> } : {}) } : { at: 0, user: `u${j}`, latency: j, ttft: null, sameTime: true },
    ]);
  }
  for (let j = 0; j < 1_300; j++) {
    conversation(BULK, `gone_${j}`, bulkStart + 2_000 + Math.floor(j / 7), { persona: 'per_b', channel: null, user: null }, [{ at: 0, user: null, latency: 10_000 + j, ttft: null }], true);
  }

  // Isolation: an interaction of another workspace naming a message of this one, older than the
  // message's own; and an answer whose only interaction is another workspace's. Ids are never shared
  // across workspaces, but no query may rely on that.
  const answerOf = (session: string) => out.interactions.find((i) => i.session_id === session && i.message_id !== null)!;
  out.interactions.push({ ...answerOf('ses_ws_a_050'), seq: 1, workspace_id: OTHER, user_id: 'intruder', latency_ms: 999_999, new_session: 0 });
  answerOf('ses_ws_a_060').workspace_id = OTHER;
  return out;
}

const SEED = seedRows();

async function insertSeed(kysely: Kysely<Database>) {
  await kysely.insertInto('workspaces').values([WS, OTHER, BULK].map((id) => ({ id, name: id, created_at: iso(NOW - 30 * DAY) }))).execute();
  const chunks = <T,>(rows: T[]) => Array.from({ length: Math.ceil(rows.length / 200) }, (_, i) => rows.slice(i * 200, (i + 1) * 200));
  for (const rows of chunks(SEED.sessions)) await kysely.insertInto('sessions').values(rows).execute();
  for (const rows of chunks(SEED.messages)) await kysely.insertInto('messages').values(rows).execute();
  for (const rows of chunks(SEED.interactions)) await kysely.insertInto('interactions').values(rows).execute();
  for (const rows of chunks(SEED.feedback)) await kysely.insertInto('feedback').values(rows).execute();
  for (const rows of chunks(SEED.tools)) await kysely.insertInto('interaction_tools').values(rows).execute();
}

// ---- What each method must answer, computed from SEED ----

const within = (t: string, r: Range) => t >= r.lo && t < r.hi;
const matches = (row: { workspace_id: string; persona_id: string; channel_id: string | null }, f: Filter) =>
  row.workspace_id === f.workspaceId && (f.personaId === undefined || row.persona_id === f.personaId) && (f.channelId === undefined || row.channel_id === f.channelId);
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const ascending = (xs: ArrayLike<number>) => Array.from(xs).sort((a, b) => a - b);
const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const interactionsIn = (f: Filter, r: Range) => SEED.interactions.filter((i) => matches(i, f) && within(i.started_at, r));
const answered = (i: InteractionRow) => i.error === null;

function expectedAnswerTotals(f: Filter, ranges: Range[]) {
  const per = ranges.map((r) => interactionsIn(f, r));
  return {
    totals: per.map((rows) => ({
      conversations: sum(rows.map((i) => i.new_session)),
      answers: rows.filter(answered).length,
      latencySum: sum(rows.filter(answered).map((i) => i.latency_ms)),
    })),
    latencies: ascending(per.flat().filter(answered).map((i) => i.latency_ms)),
  };
}

function expectedPerformance(f: Filter, r: Range) {
  const rows = interactionsIn(f, r);
  return {
    all: rows.length,
    errors: rows.filter((i) => !answered(i)).length,
    promptTokens: sum(rows.map((i) => i.prompt_tokens)),
    completionTokens: sum(rows.map((i) => i.completion_tokens)),
    latencies: ascending(rows.filter(answered).map((i) => i.latency_ms)),
    firstTokens: ascending(rows.filter((i) => answered(i) && i.ttft_ms !== null).map((i) => i.ttft_ms!)),
  };
}

/** Groups rows by key, counted (and summed), most first, ties by key. */
function grouped<T>(rows: T[], key: (row: T) => string, failed?: (row: T) => number) {
  const counts = new Map<string, [number, number]>();
  for (const row of rows) {
    const c = counts.get(key(row)) ?? [0, 0];
    counts.set(key(row), [c[0] + 1, c[1] + (failed?.(row) ?? 0)]);
  }
  return [...counts.entries()].sort(([a, x], [b, y]) => y[0] - x[0] || byText(a, b));
}

const nearestRank = (sorted: number[], qs: number[]) => qs.map((q) => (sorted.length === 0 ? null : sorted[Math.max(1, Math.ceil(q * sorted.length)) - 1]!));

function expectedAnswerRows(ws: string, r: Range): AnswerExportRow[] {
  return SEED.interactions
    .filter((i) => i.workspace_id === ws && within(i.started_at, r))
    .sort((a, b) => byText(a.started_at, b.started_at) || a.seq - b.seq)
    .map((i) => ({
      startedAt: i.started_at,
      sessionId: i.session_id,
      personaId: i.persona_id,
      personaVersion: i.persona_version,
      abTestId: i.ab_test_id,
      variant: i.variant,
      channelId: i.channel_id,
      userId: i.user_id,
      model: i.model,
      latencyMs: i.latency_ms,
      ttftMs: i.ttft_ms,
      promptTokens: i.prompt_tokens,
      completionTokens: i.completion_tokens,
      toolCalls: i.tool_calls,
      error: i.error,
      rating: i.rating,
    }));
}

const sessionById = new Map(SEED.sessions.map((s) => [s.id, s]));
const messagesBySession = new Map<string, MessageRow[]>();
for (const m of SEED.messages) messagesBySession.set(m.session_id, [...(messagesBySession.get(m.session_id) ?? []), m]);
const interactionsByMessage = new Map<string, InteractionRow[]>();
for (const i of SEED.interactions) if (i.message_id !== null) interactionsByMessage.set(i.message_id, [...(interactionsByMessage.get(i.message_id) ?? []), i]);

function expectedMessageRows(ws: string, r: Range): MessageExportRow[] {
  return SEED.messages
    .filter((m) => sessionById.get(m.session_id)?.workspace_id === ws && within(m.created_at, r) && m.role !== 'tool' && m.tool_calls === null)
    .sort((a, b) => byText(a.created_at, b.created_at) || a.seq - b.seq)
    .map((m) => {
      const s = sessionById.get(m.session_id)!;
      // The exchange's answer: the first final answer at or after the message in its session.
      const answer = messagesBySession
        .get(m.session_id)!
        .filter((a) => a.seq >= m.seq && a.role === 'assistant' && a.tool_calls === null)
        .sort((a, b) => a.seq - b.seq)[0];
      const interaction = answer && (interactionsByMessage.get(answer.id) ?? []).filter((i) => i.workspace_id === s.workspace_id).sort((a, b) => a.seq - b.seq)[0];
      const own = interaction?.message_id === m.id ? interaction : undefined;
      return {
        createdAt: m.created_at,
        sessionId: m.session_id,
        messageId: m.id,
        role: m.role as MessageExportRow['role'],
        content: m.content,
        personaId: s.persona_id,
        abTestId: s.ab_test_id,
        variant: s.variant,
        channelId: s.channel_id,
        userId: interaction?.user_id ?? s.user_id,
        latencyMs: own?.latency_ms ?? null,
        promptTokens: own?.prompt_tokens ?? null,
        completionTokens: own?.completion_tokens ?? null,
        rating: own?.rating ?? null,
      };
    });
}

function expectedConversationRows(ws: string, r: Range): ConversationExportRow[] {
  return SEED.sessions
    .filter((s) => s.workspace_id === ws && within(s.created_at, r))
    .sort((a, b) => byText(a.created_at, b.created_at) || byText(a.id, b.id))
    .map((s) => {
      const rows = SEED.interactions.filter((i) => i.session_id === s.id);
      const ok = rows.filter(answered);
      const ratings = SEED.feedback.filter((f) => f.session_id === s.id).map((f) => f.rating);
      return {
        sessionId: s.id,
        personaId: s.persona_id,
        abTestId: s.ab_test_id,
        variant: s.variant,
        channelId: s.channel_id,
        userId: s.user_id,
        title: s.title,
        messageCount: s.message_count,
        createdAt: s.created_at,
        lastMessageAt: s.last_message_at,
        answers: ok.length,
        errors: rows.length - ok.length,
        avgLatencyMs: ok.length > 0 ? Math.round(sum(ok.map((i) => i.latency_ms)) / ok.length) : null,
        promptTokens: sum(rows.map((i) => i.prompt_tokens)),
        completionTokens: sum(rows.map((i) => i.completion_tokens)),
        averageRating: ratings.length > 0 ? Math.round((sum(ratings) / ratings.length) * 100) / 100 : null,
      };
    });
}

/** Every batch of an export: the rows and each batch's size. */
async function drain<T>(batches: AsyncGenerator<T[]>): Promise<{ rows: T[]; sizes: number[] }> {
  const rows: T[] = [];
  const sizes: number[] = [];
  for await (const batch of batches) {
    sizes.push(batch.length);
    rows.push(...batch);
  }
  return { rows, sizes };
}
const batchSizes = (n: number) => Array.from({ length: Math.ceil(n / EXPORT_BATCH) }, (_, i) => Math.min(EXPORT_BATCH, n - i * EXPORT_BATCH));

/** What each backend answered, by method and case, for the comparison at the end. */
const results: Partial<Record<'sqlite' | 'postgres', Record<string, unknown>>> = {};

describe('the seed', () => {
  it('holds what every figure needs: failures, tool failures, ratings, deleted sessions, ties, rows beyond one batch', () => {
    const mine = SEED.interactions.filter((i) => i.workspace_id === WS && within(i.started_at, W7));
    expect(mine.length).toBeGreaterThan(100);
    expect(mine.filter((i) => i.error !== null).length).toBeGreaterThan(5);
    expect(mine.filter((i) => i.session_id === null).length).toBeGreaterThan(3);
    expect(SEED.tools.filter((t) => t.workspace_id === WS && t.is_error === 1).length).toBeGreaterThan(3);
    expect(SEED.feedback.filter((f) => f.workspace_id === WS).length).toBeGreaterThan(20);
    expect(new Set(SEED.interactions.filter((i) => i.workspace_id === WS).map((i) => i.user_id)).size).toBeGreaterThan(3);
    expect(expectedMessageRows(WS, W7).filter((m) => m.role === 'user' && m.userId !== sessionById.get(m.sessionId)!.user_id).length).toBeGreaterThan(0);
    expect(expectedAnswerRows(BULK, W7)).toHaveLength(2_350);
    expect(expectedMessageRows(BULK, W7)).toHaveLength(2_100);
    expect(expectedConversationRows(BULK, W7)).toHaveLength(1_050);
    expect(SEED.messages.filter((m) => m.session_id.startsWith('bulk_') && m.role === 'tool')).toHaveLength(50);
    // The intruder is another workspace's, and the message whose only interaction moved away has no figures.
    const exported = expectedMessageRows(WS, W7);
    expect(exported.some((m) => m.userId === 'intruder' || m.latencyMs === 999_999)).toBe(false);
    const moved = SEED.interactions.find((i) => i.session_id === 'ses_ws_a_060' && i.workspace_id === OTHER)!;
    expect(exported.find((m) => m.messageId === moved.message_id)).toMatchObject({ latencyMs: null, promptTokens: null });
    // Where the batches end: between two times, then inside runs of equal times.
    const times = (rows: Array<{ createdAt?: string; startedAt?: string }>, at: number) => rows.slice(at - 1, at + 1).map((r) => r.createdAt ?? r.startedAt);
    const [m999, m1000] = times(expectedMessageRows(BULK, W7), 999);
    expect(m999).not.toBe(m1000);
    expect(new Set(times(expectedMessageRows(BULK, W7), 2_000)).size).toBe(1);
    expect(new Set(times(expectedAnswerRows(BULK, W7), 1_000)).size).toBe(1);
    expect(new Set(times(expectedAnswerRows(BULK, W7), 2_000)).size).toBe(1);
    expect(new Set(times(expectedConversationRows(BULK, W7), 1_000)).size).toBe(1);
  });
});

describe.each(testBackends())('analytics stores on $kind', (which) => {
  let opened: OpenedBackend;
  let store: AnalyticsStore;
  const got: Record<string, unknown> = {};
  results[which.kind] = got;

  beforeAll(async () => {
    // One connection: a store that held one while asking for another would hang here.
    opened = await openTestBackend(which, { poolSize: 1 });
    await insertSeed(opened.backend.kysely);
    store = createAnalyticsStore(opened.backend, opened.analyticsReads());
  });
  afterAll(() => opened?.close());

  it('sums each bucket’s conversations, answers and latencies, and returns every latency once (overview)', async () => {
    for (const [w, window] of WINDOWS) {
      for (const [name, f] of FILTERS) {
        const { totals, latencies } = await store.answerTotals(f, window.buckets);
        const expected = expectedAnswerTotals(f, window.buckets);
        expect(totals, `${w} ${name}`).toEqual(expected.totals);
        expect(ascending(latencies), `${w} ${name}`).toEqual(expected.latencies);
        const percentiles = nearestRankPercentiles(latencies, [0.5, 0.95]);
        expect(percentiles).toEqual(nearestRank(expected.latencies, [0.5, 0.95]));
        got[`answerTotals ${w} ${name}`] = { totals, latencies: ascending(latencies), percentiles };
      }
    }
    const week = expectedAnswerTotals({ workspaceId: WS }, W7.buckets);
    expect(week.totals.filter((t) => t.conversations > 0).length).toBeGreaterThan(5);
    expect(week.latencies).toContain(5_000_000_000);
  });

  it('counts conversations opened and ratings given in each bucket', async () => {
    for (const [w, window] of WINDOWS) {
      for (const [name, f] of FILTERS) {
        const counts = await store.conversationCounts(f, window.buckets);
        expect(counts, `${w} ${name}`).toEqual(expectedAnswerTotals(f, window.buckets).totals.map((t) => t.conversations));
        const ratings = await store.ratingTotals(f, window.buckets);
        const expected = window.buckets.map((r) => {
          const rows = SEED.feedback.filter((x) => matches(x, f) && within(x.created_at, r));
          return { count: rows.length, sum: sum(rows.map((x) => x.rating)) };
        });
        expect(ratings, `${w} ${name}`).toEqual(expected);
        got[`buckets ${w} ${name}`] = { counts, ratings };
      }
    }
    expect(sum((await store.ratingTotals({ workspaceId: WS }, W7.buckets)).map((r) => r.count))).toBeGreaterThan(10);
  });

  it('reads a window’s counts, tokens and the nearest-rank percentiles of its latencies and first-token times in one scan (performance)', async () => {
    // Every rank from the first to the last, and fractions whose rank q·n is whole or just past it.
    const fractions = { latency: [0.01, 0.1, 0.25, 1 / 3, 0.5, 0.9, 0.95, 0.99, 1], firstToken: [0.001, 0.5, 0.75, 0.95, 1] };
    for (const [w, window] of WINDOWS) {
      for (const [name, f] of FILTERS) {
        const t = await store.performanceTotals(f, window, fractions);
        const { latencies, firstTokens, ...wantCounts } = expectedPerformance(f, window);
        const { latency, firstToken, ...counts } = t;
        expect(counts, `${w} ${name}`).toEqual(wantCounts);
        expect(latency, `${w} ${name}`).toEqual(nearestRank(latencies, fractions.latency));
        expect(firstToken, `${w} ${name}`).toEqual(nearestRank(firstTokens, fractions.firstToken));
        got[`performance ${w} ${name}`] = t;
      }
    }
    const week = await store.performanceTotals({ workspaceId: WS }, W7, fractions);
    expect(week.errors).toBeGreaterThan(0);
    expect(week.firstToken[0]).toBe(-3);
    expect(new Set(week.latency).size).toBeGreaterThan(3);
    // A window with nothing in it: every percentile null.
    const empty = await store.performanceTotals({ workspaceId: WS }, { lo: '2000-01-01T00:00:00.000Z', hi: '2000-01-02T00:00:00.000Z' }, fractions);
    expect(empty).toEqual({ all: 0, errors: 0, promptTokens: 0, completionTokens: 0, latency: fractions.latency.map(() => null), firstToken: fractions.firstToken.map(() => null) });
  });

  it('breaks conversations down by persona and channel, and tool calls by tool, most first', async () => {
    for (const [w, window] of WINDOWS) {
      for (const [name, f] of FILTERS) {
        const openers = SEED.interactions.filter((i) => matches(i, f) && within(i.started_at, window) && i.new_session === 1);
        const personas = await store.conversationsBy(f, window, 'persona');
        expect(personas, `${w} ${name}`).toEqual(grouped(openers, (i) => i.persona_id).map(([id, [n]]) => [id, n]));
        const channels = await store.conversationsBy(f, window, 'channel');
        expect(channels, `${w} ${name}`).toEqual(grouped(openers.filter((i) => i.channel_id !== null), (i) => i.channel_id!).map(([id, [n]]) => [id, n]));
        const tools = await store.toolCalls(f, window);
        const calls = SEED.tools.filter((x) => matches(x, f) && within(x.started_at, window));
        expect(tools, `${w} ${name}`).toEqual(grouped(calls, (x) => x.tool_name, (x) => x.is_error).map(([tool, [n, failed]]) => [tool, n, failed]));
        got[`breakdowns ${w} ${name}`] = { personas, channels, tools };
      }
    }
    const week = await store.toolCalls({ workspaceId: WS }, W7);
    expect(week.length).toBe(TOOLS.length);
    expect(sum(week.map(([, , failures]) => failures))).toBeGreaterThan(0);
  });

  it('breaks one persona’s answers down by the version that gave them', async () => {
    let compared = 0;
    for (const [w, window] of WINDOWS) {
      for (const ws of [WS, OTHER, BULK]) {
        for (const persona of ['per_a', 'per_b', 'per_none']) {
          const mine = SEED.interactions.filter((i) => i.workspace_id === ws && i.persona_id === persona && within(i.started_at, window));
          const versions = [...new Set(mine.map((i) => i.persona_version))];
          const expected = versions.map((version) => {
            const of = mine.filter((i) => i.persona_version === version);
            const ok = of.filter((i) => i.error === null);
            const rated = of.filter((i) => i.rating !== null);
            return {
              version,
              all: of.length,
              errors: of.length - ok.length,
              rated: rated.length,
              ratingSum: sum(rated.map((i) => i.rating!)),
              promptTokens: sum(of.map((i) => i.prompt_tokens)),
              completionTokens: sum(of.map((i) => i.completion_tokens)),
              latencySum: sum(ok.map((i) => i.latency_ms)),
              latencies: ok.map((i) => i.latency_ms).sort((a, b) => a - b),
            };
          });
          const got = (await store.byVersion(ws, persona, window)).map((r) => ({ ...r, latencies: [...r.latencies].sort((a, b) => a - b) }));
          const order = (x: { version: number | null }) => x.version ?? 0;
          expect(got.sort((a, b) => order(a) - order(b)), `${ws} ${persona} ${w}`).toEqual(expected.sort((a, b) => order(a) - order(b)));
          compared += expected.length;
        }
      }
    }
    expect(compared).toBeGreaterThan(10);
  });

  it('lists the newest sessions of the window, ties by id', async () => {
    for (const [w, window] of WINDOWS) {
      for (const [name, f] of FILTERS) {
        for (const limit of [3, 10]) {
          const recent = await store.recentSessions(f, window, limit);
          const expected = SEED.sessions
            .filter((s) => matches(s, f) && within(s.created_at, window))
            .sort((a, b) => byText(b.created_at, a.created_at) || byText(b.id, a.id))
            .slice(0, limit);
          expect(recent, `${w} ${name} ${limit}`).toEqual(expected);
          got[`recent ${w} ${name} ${limit}`] = recent;
        }
      }
    }
    expect((await store.recentSessions({ workspaceId: WS }, W7, 1))[0]!.id).toBe('ses_edge_now');
  });

  it('exports answers oldest first, in batches, without losing or repeating rows at equal times', async () => {
    for (const [ws, [w, window]] of [WS, OTHER, BULK, 'ws_none'].flatMap((ws) => WINDOWS.map((pair) => [ws, pair] as const))) {
      const { rows, sizes } = await drain(store.answerRows(ws, window));
      const expected = expectedAnswerRows(ws, window);
      expect(rows, `${ws} ${w}`).toEqual(expected);
      expect(sizes).toEqual(batchSizes(expected.length));
      got[`answers ${ws} ${w}`] = { rows, sizes };
    }
    expect((await drain(store.answerRows(BULK, W7))).sizes).toEqual([1_000, 1_000, 350]);
  });

  it('exports messages with their session’s columns and their exchange’s answer, in batches', async () => {
    for (const [ws, [w, window]] of [WS, OTHER, BULK, 'ws_none'].flatMap((ws) => WINDOWS.map((pair) => [ws, pair] as const))) {
      const { rows, sizes } = await drain(store.messageRows(ws, window));
      const expected = expectedMessageRows(ws, window);
      expect(rows, `${ws} ${w}`).toEqual(expected);
      expect(sizes).toEqual(batchSizes(expected.length));
      got[`messages ${ws} ${w}`] = { rows, sizes };
    }
    const { rows, sizes } = await drain(store.messageRows(BULK, W7));
    expect(sizes).toEqual([1_000, 1_000, 100]);
    expect(new Set(rows.map((r) => r.messageId)).size).toBe(2_100);
    // A question carries its exchange's user; only the answer carries the figures.
    const special = (await drain(store.messageRows(WS, W7))).rows.filter((r) => r.sessionId === 'ses_special');
    expect(special.map((r) => [r.role, r.userId, r.latencyMs, r.rating])).toEqual([
      ['user', 'eve', null, null], ['assistant', 'eve', 0, null],
      ['user', 'eve', null, null], ['assistant', 'eve', 5_000_000_000, 2],
      ['user', 'eve', null, null], ['assistant', 'eve', 7, null],
      // The failed exchange has no answer: its question takes the next exchange's.
      ['user', 'fay', null, null],
      ['user', 'fay', null, null], ['assistant', 'fay', 8, null],
    ]);
  });

  it('exports conversations that still exist with their numbers, in batches', async () => {
    for (const [ws, [w, window]] of [WS, OTHER, BULK, 'ws_none'].flatMap((ws) => WINDOWS.map((pair) => [ws, pair] as const))) {
      const { rows, sizes } = await drain(store.conversationRows(ws, window));
      const expected = expectedConversationRows(ws, window);
      expect(rows, `${ws} ${w}`).toEqual(expected);
      expect(sizes).toEqual(batchSizes(expected.length));
      got[`conversations ${ws} ${w}`] = { rows, sizes };
    }
    expect((await drain(store.conversationRows(BULK, W7))).sizes).toEqual([1_000, 50]);
    const special = (await drain(store.conversationRows(WS, W7))).rows.find((r) => r.sessionId === 'ses_special')!;
    expect(special).toMatchObject({ answers: 4, errors: 1, avgLatencyMs: 1_250_000_004, averageRating: 2.13 });
  });
});

describe('SQLite and PostgreSQL', () => {
  it.skipIf(testBackends().length < 2)('answer every store method identically', () => {
    const { sqlite, postgres } = results;
    expect(Object.keys(postgres!).length).toBeGreaterThan(100);
    expect(Object.keys(postgres!)).toEqual(Object.keys(sqlite!));
    for (const key of Object.keys(sqlite!)) expect(postgres![key], key).toStrictEqual(sqlite![key]);
  });
});
