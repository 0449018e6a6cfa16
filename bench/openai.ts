/**
 * Issue 16: the OpenAI-compatible `/v1/chat/completions` against `POST /query` on the same server
 * child (`switchboard-channels`: the offline model, one help-centre persona over 200 articles; its
 * fake Slack runs beside, unused here) and the same persona. Rows:
 *  - `POST /query` (the ceiling) and `POST /v1/chat/completions` (non-streamed; one user message,
 *    so a new conversation each, as /query without a sessionId) by `--connections` clients, the same
 *    50 questions in turn. Target: completions/s ≥ 90 % of /query's;
 *  - time to the first text chunk by one sequential client, alternating `POST /query/stream` (first
 *    `text` chunk) and a streamed completion (first non-empty `delta.content`). Target: p50 within
 *    1 ms of /query/stream's.
 * Knob (environment): BENCH_OPENAI_SAMPLES (first-chunk pairs, default 300).
 */
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { chatQuestions } from './lib/chat-corpus.js';
import { startFakeSlackProcess } from './lib/fake-slack-process.js';
import { type BenchOptions, type BenchRow, expectResponse, measureWithLatencies, nearestRank, plainRow, round, fmt, progress, ms } from './lib/harness.js';
import { envInt, type FiguredRow, judge, metricTable, sampled } from './lib/in-process.js';
import { forkChild } from './lib/server-process.js';
import { CHANNELS_SOURCE_COUNT, type ChildMessage, FAKE_SLACK_URL_ENV, type ParentMessage } from './lib/server-protocol.js';
import { classifyModel, classifyPlatform, type EventKind, openSse } from './lib/sse-client.js';


export const name = 'openai';
export const description = 'POST /v1/chat/completions answers/s vs POST /query (offline model), and its first-chunk latency vs /query/stream';

const SERVER_ENTRY = fileURLToPath(new URL('./lib/servers.js', import.meta.url));
const RATIO_TARGET = 0.9;
const FIRST_CHUNK_DELTA_TARGET_MS = 1;
const QUESTIONS = 50;
const IPC_TIMEOUT_MS = 5_000;
const IDLE_TIMEOUT_MS = 30_000;

type OpenAiRow = FiguredRow;





interface Server {
  origin: string;
  key: string;
  personaId: string;
  cpuUsage(): Promise<NodeJS.CpuUsage>;
  stop(): Promise<void>;
}

async function startServer(slackUrl: string, options: BenchOptions): Promise<Server> {
  const child = await forkChild<ChildMessage, ParentMessage>(SERVER_ENTRY, ['switchboard-channels'], 'switchboard-channels server', {
    cpuProfileDir: options.cpuProfileDir,
    cpu: options.pinning?.server,
    env: { [FAKE_SLACK_URL_ENV]: slackUrl },
  });
  const { port, key, personaId } = child.ready;
  if (!key || !personaId) {
    await child.stop();
    throw new Error('the server reported no key or persona');
  }
  return { origin: `http://127.0.0.1:${port}`, key, personaId, cpuUsage: async () => (await child.ask({ type: 'cpu' }, 'cpu', IPC_TIMEOUT_MS)).usage, stop: child.stop };
}

async function throughputRows(server: Server, questions: string[], options: BenchOptions): Promise<OpenAiRow[]> {
  const setup = `${options.connections} connections, ${options.warmupSeconds}s warm-up + ${options.durationSeconds}s, offline model`;
  const headers = { authorization: `Bearer ${server.key}`, 'content-type': 'application/json' };
  const queryBodies = questions.map((message) => JSON.stringify({ personaId: server.personaId, message }));
  const completionBodies = questions.map((message) => JSON.stringify({ model: server.personaId, messages: [{ role: 'user', content: message }] }));
  await expectResponse('POST /v1/chat/completions', `${server.origin}/v1/chat/completions`, { method: 'POST', headers, body: completionBodies[0]! }, (status, body) => {
    const b = body as { object?: unknown; choices?: { message?: { content?: unknown } }[] } | null;
    if (status !== 200) return 'expected 200';
    if (b?.object !== 'chat.completion' || typeof b.choices?.[0]?.message?.content !== 'string' || !b.choices[0].message.content.startsWith('Offline model')) return 'expected a chat.completion with the offline answer';
    return undefined;
  });
  const query = sampled(await measureWithLatencies({ name: `POST /query (${setup})`, isCeiling: true, target: { url: `${server.origin}/query`, method: 'POST', headers, bodies: queryBodies, serverCpu: server.cpuUsage } }, options));
  const v1 = sampled(
    await measureWithLatencies(
      { name: `POST /v1/chat/completions, non-streamed (${setup})`, targetRatio: RATIO_TARGET, target: { url: `${server.origin}/v1/chat/completions`, method: 'POST', headers, bodies: completionBodies, serverCpu: server.cpuUsage } },
      options,
    ),
  );
  const ratio = query.requestsPerSecond > 0 ? round(v1.requestsPerSecond / query.requestsPerSecond, 3) : 0;
  return [
    judge({ ...query, ratioToCeiling: 1 }, { metric: 'req/s', value: query.requestsPerSecond, notes: [`${fmt(query.requests)} answers, new session each; p50 ${query.latencyP50Ms} ms, p95 ${query.latencyP95Ms ?? '—'} ms; server ${query.serverCpuUsPerRequest ?? '—'} µs/req`], figures: { requestsPerSecond: query.requestsPerSecond, p50Ms: query.latencyP50Ms, serverCpuUsPerRequest: query.serverCpuUsPerRequest } }),
    judge(
      { ...v1, ratioToCeiling: ratio },
      {
        metric: 'share of /query req/s',
        value: ratio,
        target: { kind: 'min', value: RATIO_TARGET },
        notes: [`${fmt(v1.requestsPerSecond)} vs ${fmt(query.requestsPerSecond)} req/s = ${round(ratio * 100, 1)} % of /query; p50 ${v1.latencyP50Ms} ms, p95 ${v1.latencyP95Ms ?? '—'} ms; server ${v1.serverCpuUsPerRequest ?? '—'} µs/req`],
        figures: { requestsPerSecond: v1.requestsPerSecond, queryRequestsPerSecond: query.requestsPerSecond, ratio, p50Ms: v1.latencyP50Ms, serverCpuUsPerRequest: v1.serverCpuUsPerRequest },
      },
    ),
  ];
}

async function firstChunk(agent: http.Agent, url: URL, headers: Record<string, string>, body: string, classify: (data: string) => EventKind): Promise<number> {
  const outcome = await openSse({ url, headers, body, agent, classify, idleTimeoutMs: IDLE_TIMEOUT_MS }).result;
  if (outcome.status !== 200 || outcome.error || outcome.firstMs === null || !outcome.doneMarker) throw new Error(`${url.pathname}: ${outcome.status} ${outcome.error ?? 'no first chunk or no [DONE]'}`);
  return outcome.firstMs;
}

/** Ends a native stream's wait at `done` too (classifyPlatform's), an OpenAI one at its finish chunk. */
async function firstChunkRow(server: Server, questions: string[]): Promise<OpenAiRow> {
  const samples = envInt('BENCH_OPENAI_SAMPLES', 300, 10);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const headers = { authorization: `Bearer ${server.key}`, 'content-type': 'application/json' };
  const queryUrl = new URL(`${server.origin}/query/stream`);
  const v1Url = new URL(`${server.origin}/v1/chat/completions`);
  const q: number[] = [];
  const v: number[] = [];
  try {
    for (let i = -20; i < samples; i++) {
      const message = questions[(i + questions.length) % questions.length]!;
      const a = await firstChunk(agent, queryUrl, headers, JSON.stringify({ personaId: server.personaId, message }), classifyPlatform);
      const b = await firstChunk(agent, v1Url, headers, JSON.stringify({ model: server.personaId, stream: true, messages: [{ role: 'user', content: message }] }), classifyModel);
      if (i >= 0) {
        q.push(a);
        v.push(b);
      }
    }
  } finally {
    agent.destroy();
  }
  const sorted = (xs: number[]) => [...xs].sort((x, y) => x - y);
  const qP50 = ms(nearestRank(sorted(q), 0.5));
  const vP50 = ms(nearestRank(sorted(v), 0.5));
  const delta = ms(vP50 - qP50);
  const base = plainRow(`first text chunk, streamed completion vs /query/stream (1 sequential client, ${samples} pairs)`, { latencies: v, requests: v.length, elapsedMs: v.reduce((s, x) => s + x, 0), serverCpuUs: null });
  return judge(base, {
    metric: 'p50 ms over /query/stream',
    value: delta,
    target: { kind: 'max', value: FIRST_CHUNK_DELTA_TARGET_MS },
    notes: [`first content chunk p50 ${vP50} ms (p95 ${ms(nearestRank(sorted(v), 0.95))}) vs /query/stream first text chunk p50 ${qP50} ms (p95 ${ms(nearestRank(sorted(q), 0.95))})`],
    figures: { p50Ms: vP50, queryStreamP50Ms: qP50, deltaMs: delta },
  });
}

export async function run(options: BenchOptions): Promise<BenchRow[]> {
  const questions = chatQuestions(QUESTIONS);
  const rows: OpenAiRow[] = [];
  const slack = await startFakeSlackProcess({ cpu: options.pinning?.load });
  try {
    const started = performance.now();
    const server = await startServer(slack.apiUrl, options);
    progress(`switchboard-channels server up in ${((performance.now() - started) / 1000).toFixed(1)} s (${CHANNELS_SOURCE_COUNT} knowledge sources, offline model)`);
    try {
      rows.push(...(await throughputRows(server, questions, options)));
      rows.push(await firstChunkRow(server, questions));
    } finally {
      await server.stop();
    }
  } finally {
    await slack.stop();
  }
  console.log(`\n${metricTable(rows)}`);
  return rows;
}
