/**
 * Channels (API.md §9), with the offline model, so what is measured is the platform. Three
 * processes: this one (load generator), the Switchboard server (`switchboard-channels`, on every
 * core with its search and checkpoint threads, as issue 18 measures the platform: one help-centre persona over a 200-article knowledge base, a webhook channel and a Slack
 * Events API channel routed to it) and the fake Slack Web API (`fake-slack.ts`, on the load
 * generator's core), which the Slack channel checks its token with and posts its replies to. Rows:
 *  - `POST /query` (the ceiling) and signed webhook messages (`POST /business/channels/:id/inbound`,
 *    answered synchronously) by `--connections` clients for `--duration` s each, the same persona and
 *    the same 50 questions in turn; every webhook message opens a new conversation (a distinct
 *    `conversationId`, so a new session, as `/query` without a sessionId) and is signed with the
 *    channel secret (`X-Switchboard-Signature`, made per request). Target: webhook req/s ≥ 80 % of
 *    `/query` req/s;
 *  - a burst of 500 signed Events API deliveries the channel ignores (no mention of the bot) at
 *    `POST /business/channels/:id/slack/events`, 50 in flight: the acknowledgement alone, with
 *    nothing answered meanwhile (no target; it tells the acknowledgement's own cost from waiting
 *    behind the answers in the row below);
 *  - a burst of 500 signed Events API deliveries (distinct event ids and message ts, each mentioning
 *    the bot, so each is stored and answered after it is acknowledged), 50 in flight: each
 *    acknowledgement's latency, request sent → HTTP 200 (target: p99 ≤ 50 ms; Slack's own limit is 3 s);
 *  - the same burst answered: until the fake Slack has a reply (chat.postMessage) in each of the
 *    500 threads (at most 120 s), how long it took from the first delivery, each message's time from
 *    its delivery to its reply, and that none was lost, doubled or an apology.
 * Knobs (environment): BENCH_CHANNELS_BURST (deliveries, default 500), BENCH_CHANNELS_IN_FLIGHT
 * (default 50).
 */
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { signature } from '../bridges/webhook/webhook-bridge.js';
import { eventCallback, messageEvent, signSlackRequest } from '../test/fakes/slack-events.js';
import { chatQuestions } from './lib/chat-corpus.js';
import { type FakeSlackProcess, startFakeSlackProcess } from './lib/fake-slack-process.js';
import { type BenchOptions, type BenchRow, expectResponse, measureWithLatencies, plainRow, round, fmt, progress, ms, cpuUs } from './lib/harness.js';
import { envInt, type FiguredRow, judge, type MetricTarget, metricTable, sampled } from './lib/in-process.js';
import { forkChild } from './lib/server-process.js';
import {
  type BenchChannels,
  CHANNELS_SLACK_SIGNING_SECRET,
  CHANNELS_SOURCE_COUNT,
  CHANNELS_WEBHOOK_SECRET,
  type ChildMessage,
  FAKE_SLACK_URL_ENV,
  type FakeSlackStats,
  type ParentMessage,
} from './lib/server-protocol.js';


export const name = 'channels';
export const description =
  'signed webhook messages answered/s vs POST /query (offline model); Slack Events API acknowledgement latency under a burst of 500, and the burst answered';

const SERVER_ENTRY = fileURLToPath(new URL('./lib/servers.js', import.meta.url));
const WEBHOOK_TARGET_RATIO = 0.8;
const ACK_P99_TARGET_MS = 50;
/** Slack retries a delivery it has no 200 for within 3 s. */
const SLACK_ACK_LIMIT_MS = 3_000;
const QUESTIONS = 50;
/** Deliveries answered before the burst (JIT, caches, the agent's sockets), not counted. */
const WARM_DELIVERIES = 50;
const ANSWER_TIMEOUT_MS = 120_000;
/** After the last reply: how long to keep watching for a second reply in any thread. */
const SETTLE_MS = 1_000;
const POLL_MS = 100;
const IPC_TIMEOUT_MS = 5_000;
/** The fake Slack's bot user (auth.test), mentioned in every message. */
const BOT_USER = 'UBOT';

export type ChannelsRow = FiguredRow;

interface ChannelsServer {
  origin: string;
  key: string;
  personaId: string;
  channels: BenchChannels;
  cpuUsage(): Promise<NodeJS.CpuUsage>;
  stop(): Promise<void>;
}





async function startChannelsServer(slack: FakeSlackProcess, options: BenchOptions): Promise<ChannelsServer> {
  const started = performance.now();
  const child = await forkChild<ChildMessage, ParentMessage>(SERVER_ENTRY, ['switchboard-channels'], 'switchboard-channels server', {
    cpuProfileDir: options.cpuProfileDir,
    // On every core, with its search and checkpoint threads, as the chat suite measures (issue 18: "on 2 cores").
    cpu: 'any',
    env: { [FAKE_SLACK_URL_ENV]: slack.apiUrl },
  });
  const { port, key, personaId, channels } = child.ready;
  if (!key || !personaId || !channels) {
    await child.stop();
    throw new Error('the switchboard-channels server reported no key, persona or channels');
  }
  progress(`switchboard-channels server up in ${((performance.now() - started) / 1000).toFixed(1)} s (${CHANNELS_SOURCE_COUNT} knowledge sources, offline model)`);
  return {
    origin: `http://127.0.0.1:${port}`,
    key,
    personaId,
    channels,
    cpuUsage: async () => (await child.ask({ type: 'cpu' }, 'cpu', IPC_TIMEOUT_MS)).usage,
    stop: child.stop,
  };
}

/** `POST /query` and the webhook answer what they claim to: the offline model's answer from the knowledge base. */
async function checkAnswers(server: ChannelsServer, queryBody: string, webhookBody: string): Promise<void> {
  await expectResponse('POST /query', `${server.origin}/query`, { method: 'POST', headers: { authorization: `Bearer ${server.key}`, 'content-type': 'application/json' }, body: queryBody }, (status, body) => {
    const b = body as { response?: unknown; sources?: unknown[] } | null;
    if (status !== 200) return 'expected 200';
    if (typeof b?.response !== 'string' || !b.response.startsWith('Offline model')) return "expected the offline model's answer";
    if (!Array.isArray(b.sources) || b.sources.length === 0) return 'expected retrieved sources (the knowledge base should match)';
    return undefined;
  });
  const url = `${server.origin}/business/channels/${server.channels.webhookId}/inbound`;
  await expectResponse('webhook inbound', url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-switchboard-signature': signature(CHANNELS_WEBHOOK_SECRET, webhookBody) }, body: webhookBody }, (status, body) => {
    const b = body as { sessionId?: unknown; reply?: unknown } | null;
    if (status !== 200) return 'expected 200';
    if (typeof b?.sessionId !== 'string' || typeof b.reply !== 'string' || !b.reply.startsWith('Offline model') || !b.reply.includes('[1]')) {
      return "expected a session and the offline model's answer citing the knowledge base";
    }
    return undefined;
  });
  await expectResponse('webhook inbound, unsigned', url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: webhookBody }, (status) =>
    status === 401 ? undefined : 'expected 401 without a signature',
  );
}

async function throughputRows(server: ChannelsServer, questions: string[], options: BenchOptions): Promise<ChannelsRow[]> {
  const setup = `${options.connections} connections, ${options.warmupSeconds}s warm-up + ${options.durationSeconds}s, offline model`;
  const queryBodies = questions.map((message) => JSON.stringify({ personaId: server.personaId, message }));
  const tag = Date.now().toString(36);
  let n = 0;
  const nextWebhook = () => {
    n++;
    const body = JSON.stringify({ conversationId: `bench-${tag}-${n}`, userId: `visitor-${n % 100}`, message: questions[n % questions.length]! });
    return { body, headers: { 'x-switchboard-signature': signature(CHANNELS_WEBHOOK_SECRET, body) } };
  };
  await checkAnswers(server, queryBodies[0]!, nextWebhook().body);

  const query = sampled(
    await measureWithLatencies(
      {
        name: `POST /query (${setup})`,
        isCeiling: true,
        target: {
          url: `${server.origin}/query`,
          method: 'POST',
          headers: { authorization: `Bearer ${server.key}`, 'content-type': 'application/json' },
          bodies: queryBodies,
          serverCpu: server.cpuUsage,
        },
      },
      options,
    ),
  );
  const webhook = sampled(
    await measureWithLatencies(
      {
        name: `webhook inbound, signed, new conversation each (${setup})`,
        targetRatio: WEBHOOK_TARGET_RATIO,
        target: {
          url: `${server.origin}/business/channels/${server.channels.webhookId}/inbound`,
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          next: nextWebhook,
          serverCpu: server.cpuUsage,
        },
      },
      options,
    ),
  );
  const ratio = query.requestsPerSecond > 0 ? round(webhook.requestsPerSecond / query.requestsPerSecond, 3) : 0;
  const cpuRatio = query.serverCpuUsPerRequest && webhook.serverCpuUsPerRequest ? round(webhook.serverCpuUsPerRequest / query.serverCpuUsPerRequest, 2) : null;
  return [
    judge(
      { ...query, ratioToCeiling: 1 },
      {
        metric: 'req/s',
        value: query.requestsPerSecond,
        notes: [
          `${fmt(query.requests)} answers (new session each, ${questions.length} questions in turn, hybrid search of ${CHANNELS_SOURCE_COUNT} sources, offline model, stored); ` +
            `p50 ${query.latencyP50Ms} ms, p95 ${query.latencyP95Ms ?? '—'} ms, p99 ${query.latencyP99Ms} ms; server ${query.serverCpuPercent ?? '—'} % of a core, ${query.serverCpuUsPerRequest ?? '—'} µs/req`,
        ],
        figures: { requestsPerSecond: query.requestsPerSecond, p50Ms: query.latencyP50Ms, p95Ms: query.latencyP95Ms ?? null, p99Ms: query.latencyP99Ms, serverCpuUsPerRequest: query.serverCpuUsPerRequest },
      },
    ),
    judge(
      { ...webhook, ratioToCeiling: ratio },
      {
        metric: 'share of /query req/s',
        value: ratio,
        target: { kind: 'min', value: WEBHOOK_TARGET_RATIO },
        notes: [
          `${fmt(webhook.requests)} messages answered synchronously, each signed (HMAC-SHA256 of its body, made per request by the load generator) with a new conversationId (new session), the same questions and persona; ` +
            `${fmt(webhook.requestsPerSecond)} vs ${fmt(query.requestsPerSecond)} req/s = ${round(ratio * 100, 1)} % of /query; p50 ${webhook.latencyP50Ms} ms, p95 ${webhook.latencyP95Ms ?? '—'} ms, p99 ${webhook.latencyP99Ms} ms; ` +
            `server ${webhook.serverCpuUsPerRequest ?? '—'} µs/req (${cpuRatio ?? '—'} × /query's)`,
        ],
        figures: {
          requestsPerSecond: webhook.requestsPerSecond,
          queryRequestsPerSecond: query.requestsPerSecond,
          ratio,
          p50Ms: webhook.latencyP50Ms,
          p95Ms: webhook.latencyP95Ms ?? null,
          p99Ms: webhook.latencyP99Ms,
          serverCpuUsPerRequest: webhook.serverCpuUsPerRequest,
          serverCpuRatioToQuery: cpuRatio,
        },
      },
    ),
  ];
}

interface Delivery {
  body: string;
  headers: Record<string, string>;
  /** The message's ts: its reply is posted in this thread. */
  ts: string;
}

/**
 * Signed Events API deliveries of channel messages, each with its own event id and ts, mentioning
 * the bot (stored and answered) or not (`mention: false`: acknowledged and ignored, the channel
 * answering mentions only).
 */
function deliveries(count: number, questions: string[], tag: string, mention = true): Delivery[] {
  return Array.from({ length: count }, (_, i) => {
    const question = questions[i % questions.length]!;
    const event = messageEvent({ text: mention ? `<@${BOT_USER}> ${question}` : question, user: `U${String(i % 100).padStart(3, '0')}`, channel: 'C1' });
    const body = JSON.stringify(eventCallback(event, { botUserId: BOT_USER, eventId: `Ev${tag}${String(i).padStart(6, '0')}` }));
    return { body, headers: signSlackRequest(body, CHANNELS_SLACK_SIGNING_SECRET), ts: String(event.ts) };
  });
}

interface Ack {
  status: number;
  /** Request sent → response headers, in ms. */
  ms: number;
  /** Date.now() when it was sent. */
  sentAt: number;
  error: string | null;
}

function post(url: URL, agent: http.Agent, d: Delivery): Promise<Ack> {
  return new Promise((resolve) => {
    const sentAt = Date.now();
    const started = performance.now();
    const req = http.request(url, { method: 'POST', agent, headers: { ...d.headers, 'content-length': String(Buffer.byteLength(d.body)) } }, (res) => {
      const elapsed = performance.now() - started;
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: elapsed, sentAt, error: null }));
      res.on('error', (err) => resolve({ status: res.statusCode ?? 0, ms: elapsed, sentAt, error: err.message }));
    });
    req.on('error', (err) => resolve({ status: 0, ms: performance.now() - started, sentAt, error: err.message }));
    req.end(d.body);
  });
}

/** Every delivery, `inFlight` at a time, as fast as they are acknowledged. */
async function fire(url: URL, agent: http.Agent, list: Delivery[], inFlight: number): Promise<Ack[]> {
  const acks = new Array<Ack>(list.length);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < list.length; i = next++) acks[i] = await post(url, agent, list[i]!);
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, list.length) }, worker));
  return acks;
}

/** Polls the fake Slack until every thread of `list` has a reply (or the time-out), then watches SETTLE_MS longer for doubles. */
async function waitForAnswers(slack: FakeSlackProcess, list: Delivery[], timeoutMs: number): Promise<{ stats: FakeSlackStats; timedOut: boolean }> {
  const deadline = performance.now() + timeoutMs;
  const answered = (s: FakeSlackStats) => list.filter((d) => s.threads[d.ts] !== undefined).length;
  let stats = await slack.stats();
  let lastReport = performance.now();
  while (answered(stats) < list.length && performance.now() < deadline) {
    await new Promise((r) => setTimeout(r, POLL_MS));
    stats = await slack.stats();
    if (performance.now() - lastReport > 2_000) {
      lastReport = performance.now();
      progress(`${fmt(answered(stats))} of ${fmt(list.length)} answered so far`);
    }
  }
  const timedOut = answered(stats) < list.length;
  await new Promise((r) => setTimeout(r, SETTLE_MS));
  return { stats: await slack.stats(), timedOut };
}

/** A row of acknowledgement latencies (request sent → HTTP response) of one burst. */
function ackRow(name: string, acks: Ack[], burstMs: number, serverCpuUs: number, target: MetricTarget | undefined, extraNotes: string[]): ChannelsRow {
  const ok = acks.filter((a) => a.status === 200);
  const non2xx = acks.filter((a) => a.status !== 0 && a.status !== 200).length;
  const transport = acks.filter((a) => a.status === 0).length;
  const ackMs = acks.map((a) => a.ms);
  const maxAck = ms(Math.max(...ackMs));
  const overLimit = acks.filter((a) => a.ms >= SLACK_ACK_LIMIT_MS).length;
  const base = plainRow(name, { latencies: ackMs, requests: ok.length, elapsedMs: burstMs, serverCpuUs, non2xx, errors: transport });
  const failures: string[] = [];
  if (non2xx > 0) failures.push(`${non2xx} deliveries not answered 200 (first: ${acks.find((a) => a.status !== 0 && a.status !== 200)?.status})`);
  if (transport > 0) failures.push(`${transport} deliveries failed (${acks.find((a) => a.status === 0)?.error})`);
  if (overLimit > 0) failures.push(`${overLimit} acknowledgements took ≥ ${SLACK_ACK_LIMIT_MS / 1000} s (Slack retries those)`);
  return judge(base, {
    metric: 'ack p99 ms',
    value: base.latencyP99Ms,
    ...(target ? { target } : {}),
    notes: [
      `${fmt(ok.length)} of ${fmt(acks.length)} signed deliveries (distinct event_id and ts) acknowledged 200 in ${(burstMs / 1000).toFixed(2)} s (${fmt(base.requestsPerSecond)}/s); ` +
        `request sent → response: p50 ${base.latencyP50Ms} ms, p95 ${base.latencyP95Ms} ms, p99 ${base.latencyP99Ms} ms, max ${maxAck} ms (Slack's limit ${SLACK_ACK_LIMIT_MS / 1000} s); ` +
        `server ${base.serverCpuPercent ?? '—'} % of a core, ${base.serverCpuUsPerRequest ?? '—'} µs/delivery`,
      ...extraNotes,
    ],
    figures: { deliveries: acks.length, acknowledged: ok.length, p50Ms: base.latencyP50Ms, p95Ms: base.latencyP95Ms ?? null, p99Ms: base.latencyP99Ms, maxMs: maxAck, burstSeconds: round(burstMs / 1000, 3) },
    failures,
  });
}

async function slackRows(server: ChannelsServer, slack: FakeSlackProcess, questions: string[]): Promise<ChannelsRow[]> {
  const burst = envInt('BENCH_CHANNELS_BURST', 500, 1);
  const inFlight = envInt('BENCH_CHANNELS_IN_FLIGHT', 50, 1);
  const setup = `burst of ${fmt(burst)}, ${inFlight} in flight, offline model`;
  const url = new URL(`/business/channels/${server.channels.slackId}/slack/events`, server.origin);
  const agent = new http.Agent({ keepAlive: true, maxSockets: inFlight });
  const tag = Date.now().toString(36).toUpperCase();
  try {
    // Warm-up: deliveries answered before the burst, so JIT, caches and the sockets are as in use.
    const warm = deliveries(Math.min(WARM_DELIVERIES, burst), questions, `W${tag}`);
    const warmAcks = await fire(url, agent, warm, inFlight);
    const refused = warmAcks.find((a) => a.status !== 200);
    if (refused) throw new Error(`Slack Events API warm-up: HTTP ${refused.status} ${refused.error ?? ''}`);
    const warmed = await waitForAnswers(slack, warm, 30_000);
    if (warmed.timedOut) throw new Error(`Slack Events API warm-up: only ${warm.filter((d) => warmed.stats.threads[d.ts]).length} of ${warm.length} messages answered within 30 s`);
    await slack.reset();

    // The acknowledgement alone: the same burst of messages the channel ignores (no mention), so nothing is answered meanwhile.
    const ignored = deliveries(burst, questions, `I${tag}`, false);
    process.stdout.write(`  Slack Events API, ${setup}, not mentioning the bot: `);
    const ignoredCpu = await server.cpuUsage();
    const ignoredStarted = performance.now();
    const ignoredAcks = await fire(url, agent, ignored, inFlight);
    const ignoredMs = performance.now() - ignoredStarted;
    const ignoredServer = cpuUs(await server.cpuUsage()) - cpuUs(ignoredCpu);
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const ignoredStats = await slack.stats();
    const ignoredAnswered = ignored.filter((d) => ignoredStats.threads[d.ts] !== undefined).length;
    const ignoredRow = ackRow(`Slack Events API ack, messages ignored: acknowledgement alone (${setup})`, ignoredAcks, ignoredMs, ignoredServer, undefined, [
      `the same burst of signed deliveries not mentioning the bot (the channel answers mentions only): acknowledged and dropped, nothing stored or answered (${ignoredAnswered} replies seen), ` +
        'so this is the acknowledgement path on a server with nothing else to do (no target)',
    ]);
    if (ignoredAnswered > 0) ignoredRow.failures.push(`${ignoredAnswered} ignored messages were answered`);
    ignoredRow.pass = ignoredRow.failures.length === 0;
    process.stdout.write(`p50 ${ignoredRow.latencyP50Ms} ms, p99 ${ignoredRow.latencyP99Ms} ms\n`);
    await slack.reset();

    const list = deliveries(burst, questions, `B${tag}`);
    process.stdout.write(`  Slack Events API, ${setup}: `);
    const serverBefore = await server.cpuUsage();
    const slackBefore = await slack.cpuUsage();
    const startedAt = Date.now();
    const started = performance.now();
    const acks = await fire(url, agent, list, inFlight);
    const burstMs = performance.now() - started;
    const serverBurst = cpuUs(await server.cpuUsage()) - cpuUs(serverBefore);
    process.stdout.write(`${fmt(burst)} acknowledged in ${(burstMs / 1000).toFixed(2)} s; waiting for the answers...\n`);
    const { stats, timedOut } = await waitForAnswers(slack, list, ANSWER_TIMEOUT_MS);
    const serverAll = cpuUs(await server.cpuUsage()) - cpuUs(serverBefore);
    const slackCpu = cpuUs(await slack.cpuUsage()) - cpuUs(slackBefore);

    const acked = ackRow(`Slack Events API ack (${setup})`, acks, burstMs, serverBurst, { kind: 'max', value: ACK_P99_TARGET_MS }, [
      'each message mentions the bot, so it is stored and answered after its acknowledgement: the answers share the server\'s core with the acknowledgements still coming in',
    ]);

    // Answers.
    const threads = list.map((d) => stats.threads[d.ts]);
    const answered = threads.filter((t) => t !== undefined);
    const lost = burst - answered.length;
    const doubled = answered.filter((t) => t.posts > 1).length;
    const apologies = answered.filter((t) => t.apologies > 0).length;
    const lastAt = answered.length > 0 ? Math.max(...answered.map((t) => t.lastAt)) : startedAt;
    const answeredMs = lastAt - startedAt;
    const replyMs = list.flatMap((d, i) => {
      const t = stats.threads[d.ts];
      return t ? [Math.max(0, t.firstAt - acks[i]!.sentAt)] : [];
    });
    const answerBase = plainRow(`Slack burst answered in threads (${setup})`, { latencies: replyMs, requests: answered.length, elapsedMs: answeredMs, serverCpuUs: serverAll });
    const answerFailures: string[] = [];
    if (timedOut) answerFailures.push(`only ${fmt(answered.length)} of ${fmt(burst)} answered within ${ANSWER_TIMEOUT_MS / 1000} s`);
    else if (lost > 0) answerFailures.push(`${lost} messages never answered`);
    if (doubled > 0) answerFailures.push(`${doubled} threads answered more than once`);
    if (apologies > 0) answerFailures.push(`${apologies} answers were the apology (answering failed)`);
    if (stats.errors > 0) answerFailures.push(`${stats.errors} Slack API calls failed`);
    const answerRow = judge(answerBase, {
      metric: 'answered in s',
      value: round(answeredMs / 1000, 2),
      notes: [
        `first delivery sent → last reply in Slack (chat.postMessage, or its last chat.update): ${(answeredMs / 1000).toFixed(2)} s for ${fmt(answered.length)} of ${fmt(burst)} messages ` +
          `(${fmt(answerBase.requestsPerSecond)} answers/s); each message's delivery → first reply posted (ms resolution): p50 ${answerBase.latencyP50Ms} ms, p95 ${answerBase.latencyP95Ms} ms, p99 ${answerBase.latencyP99Ms} ms`,
        `lost ${lost}, doubled ${doubled} (distinct thread_ts: ${fmt(answered.length)}; chat.postMessage ${fmt(stats.posts)}, chat.update ${fmt(stats.updates)}), apologies ${apologies}, Slack API errors ${stats.errors}; ` +
          `server CPU ${(serverAll / 1000).toFixed(0)} ms over burst and answers (${answerBase.serverCpuUsPerRequest ?? '—'} µs/message), fake Slack ${(slackCpu / 1000).toFixed(0)} ms`,
      ],
      figures: {
        messages: burst,
        answered: answered.length,
        lost,
        doubled,
        apologies,
        distinctThreads: answered.length,
        postMessageCalls: stats.posts,
        updateCalls: stats.updates,
        slackErrors: stats.errors,
        answeredSeconds: round(answeredMs / 1000, 3),
        answersPerSecond: answerBase.requestsPerSecond,
        replyP50Ms: answerBase.latencyP50Ms,
        replyP95Ms: answerBase.latencyP95Ms ?? null,
        replyP99Ms: answerBase.latencyP99Ms,
      },
      failures: answerFailures,
    });
    process.stdout.write(`  Slack burst answered: ${fmt(answered.length)} of ${fmt(burst)} in ${(answeredMs / 1000).toFixed(2)} s, lost ${lost}, doubled ${doubled}\n`);
    return [ignoredRow, acked, answerRow];
  } finally {
    agent.destroy();
  }
}

export async function run(options: BenchOptions): Promise<BenchRow[]> {
  const questions = chatQuestions(QUESTIONS);
  const rows: ChannelsRow[] = [];
  const slack = await startFakeSlackProcess({ cpu: options.pinning?.load });
  try {
    const server = await startChannelsServer(slack, options);
    try {
      rows.push(...(await throughputRows(server, questions, options)));
      rows.push(...(await slackRows(server, slack, questions)));
    } finally {
      await server.stop();
    }
  } finally {
    await slack.stop();
  }
  console.log(`\n${metricTable(rows)}`);
  return rows;
}
