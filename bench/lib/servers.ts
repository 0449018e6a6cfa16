/**
 * Child-process entry for the servers under test (`fork(dist/bench/lib/servers.js, [kind])`), so the
 * server has a core to itself while autocannon runs in the parent. Listens on 127.0.0.1, port 0,
 * and reports `{ type: 'ready', port, key, personaId }` (and `channels` for `switchboard-channels`) over IPC. Answers `{ type: 'cpu' }` with its
 * CPU time and `{ type: 'memory' }` with `process.memoryUsage()` (after a full GC when forked with
 * `--expose-gc`); `{ type: 'stop' }` or losing the parent closes everything and exits (which also
 * writes a `--cpu-prof` profile when one was asked for).
 */
import { systemActor } from '../../src/core/auth/actor.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { type AppContext, createContext } from '../../src/context.js';
import type { PersonaRow } from '../../src/db/schema.js';
import { toPersona } from '../../src/core/personas/personas.service.js';
import { vacuumAnalyzeIfPostgres, DATABASE_VARIABLES } from './backends.js';
import { chatSources } from './chat-corpus.js';
import {
  type BenchChannels,
  CHANNELS_SLACK_BOT_TOKEN,
  CHANNELS_SLACK_SIGNING_SECRET,
  CHANNELS_SOURCE_COUNT,
  CHANNELS_WEBHOOK_SECRET,
  CHAT_SOURCE_COUNT,
  type ChildMessage,
  FAKE_MODEL_URL_ENV,
  FAKE_SLACK_URL_ENV,
  HIGH_RATE_LIMIT,
  type ParentMessage,
  PERSONA_COUNT,
  SERVER_KINDS,
  type ServerKind,
} from './server-protocol.js';

interface Running {
  app: FastifyInstance;
  key: string | null;
  personaId: string | null;
  channels?: BenchChannels;
  close(): Promise<void>;
}

interface Seeded {
  ctx: AppContext;
  key: string;
  workspaceId: string;
  /** Closes the context and deletes the data directory. */
  close(): Promise<void>;
}

function personaInput(i: number) {
  const n = String(i + 1).padStart(2, '0');
  return {
    name: `Benchmark persona ${n}`,
    instructions:
      `You are persona ${n}, a support agent for a mid-sized software company. Answer briefly, cite the ` +
      'knowledge passages you were given, say when you do not know, and never invent product features. ' +
      'Escalate billing disputes to a human.',
    traits: ['concise', 'friendly', `specialist-${i % 5}`],
    model: i % 2 === 0 ? 'gpt-4o-mini' : null,
    temperature: i % 3 === 0 ? 0.3 : null,
    maxTokens: i % 4 === 0 ? 800 : null,
    tools: i % 2 === 0 ? ['search.query', 'tickets.*'] : [],
  };
}

/**
 * The database the parent chose for this child (bench/lib/backends.ts): SWITCHBOARD_DATABASE_URL
 * and SWITCHBOARD_SECRET in its environment for PostgreSQL, nothing for SQLite. run.ts removes them
 * from its own environment first, so they are only ever the parent's choice.
 */
function databaseEnv(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of DATABASE_VARIABLES) {
    const value = process.env[name];
    if (value !== undefined) out[name] = value;
  }
  return out;
}

/**
 * A Switchboard context on a fresh temporary data directory (and the database the parent chose):
 * the default workspace, its admin key, 20 personas. `env` adds configuration variables (the chat
 * server's model endpoint).
 */
async function seed(rateLimit: number, env: Record<string, string> = {}): Promise<Seeded> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchboard-bench-'));
  const removeDir = () => fs.rmSync(dataDir, { recursive: true, force: true });
  let ctx: AppContext | undefined;
  try {
    // An explicit environment: nothing from the caller's shell (an OPENAI_API_KEY, a HOST) leaks in.
    const config = loadConfig({
      SWITCHBOARD_DATA_DIR: dataDir,
      LOG_LEVEL: 'silent',
      SWITCHBOARD_RATE_LIMIT: String(rateLimit),
      ...databaseEnv(),
      ...env,
    });
    ctx = await createContext(config);
    const boot = await ctx.services.auth.bootstrap(undefined);
    if (!boot) throw new Error('bootstrap created no admin key on an empty database');
    for (let i = 0; i < PERSONA_COUNT; i++) await ctx.services.personas.create(systemActor(boot.workspace.id), personaInput(i));
    const opened = ctx;
    return {
      ctx,
      key: boot.key,
      workspaceId: boot.workspace.id,
      async close() {
        try {
          await opened.close();
        } finally {
          removeDir();
        }
      },
    };
  } catch (err) {
    await ctx?.close();
    removeDir();
    throw err;
  }
}

async function startBare(): Promise<Running> {
  const app = Fastify({ logger: false });
  app.get('/', async () => ({ hello: 'world' }));
  return { app, key: null, personaId: null, close: () => app.close() };
}

/**
 * The least a database-backed list can cost: plain fastify, one prepared better-sqlite3 statement,
 * the same rows mapped to the same JSON. No auth, no Kysely, no schemas.
 */
async function startReference(): Promise<Running> {
  const seeded = await seed(0);
  const list = seeded.ctx.sqlite().sqlite.prepare(
    'SELECT * FROM personas WHERE workspace_id = ? ORDER BY created_at DESC, id DESC LIMIT ?',
  );
  const app = Fastify({ logger: false });
  app.get('/personas', async () => {
    const rows = list.all(seeded.workspaceId, PERSONA_COUNT) as PersonaRow[];
    const data = rows.map(toPersona);
    return { data, nextCursor: null };
  });
  return {
    app,
    key: null,
    personaId: null,
    async close() {
      try {
        await app.close();
      } finally {
        await seeded.close();
      }
    },
  };
}

async function startSwitchboard(rateLimit: number): Promise<Running> {
  const seeded = await seed(rateLimit);
  return serve(seeded, null);
}

/**
 * The app with the rate limit off, a chat persona and a help-centre knowledge base of
 * CHAT_SOURCE_COUNT short articles (shared by every persona, so each question runs a real hybrid
 * search), answering with the OpenAI-compatible model at FAKE_MODEL_URL_ENV (the offline model without it).
 */
async function startSwitchboardChat(): Promise<Running> {
  // Without a fake model's URL: the offline model (the `offline` case of the chat suite).
  const baseUrl = process.env[FAKE_MODEL_URL_ENV];
  const seeded = await seed(0, baseUrl ? { OPENAI_API_KEY: 'sk-bench-not-a-real-key', OPENAI_BASE_URL: baseUrl } : {});
  try {
    const expected = baseUrl ? 'openai' : 'offline';
    if (seeded.ctx.llm.provider !== expected) throw new Error(`expected the ${expected} model client, got ${seeded.ctx.llm.provider}`);
    const persona = await seeded.ctx.services.personas.create(systemActor(seeded.workspaceId), {
      name: 'Help-centre assistant',
      instructions:
        'You answer customers of a project-management product from the help-centre articles you are given. Answer in ' +
        'at most five sentences, cite the passages you use, and say when the articles do not cover the question.',
      traits: ['concise', 'friendly'],
      model: baseUrl ? 'gpt-4o-mini' : null,
      temperature: 0.2,
      maxTokens: 400,
      tools: [],
    });
    for (const source of chatSources(CHAT_SOURCE_COUNT)) {
      const created = await seeded.ctx.services.knowledge.create(systemActor(seeded.workspaceId), source);
      if (created.status === 'failed') throw new Error(`knowledge source "${source.name}" failed: ${created.error}`);
    }
    await seeded.ctx.services.knowledge.idle();
    return await serve(seeded, persona.id);
  } catch (err) {
    await seeded.close();
    throw err;
  }
}

/**
 * The app with the rate limit off and the offline model: one help-centre persona over a knowledge
 * base of CHANNELS_SOURCE_COUNT short articles, a webhook channel and a Slack Events API channel
 * routed to it. The Slack Web API (auth.test when the channel starts, the replies) is the fake
 * Slack at FAKE_SLACK_URL_ENV.
 */
async function startSwitchboardChannels(): Promise<Running> {
  const slackUrl = process.env[FAKE_SLACK_URL_ENV];
  if (!slackUrl) throw new Error(`switchboard-channels needs the fake Slack's Web API URL in ${FAKE_SLACK_URL_ENV}`);
  const seeded = await seed(0, { SWITCHBOARD_SLACK_API_URL: slackUrl });
  try {
    if (seeded.ctx.llm.provider !== 'offline') throw new Error(`expected the offline model, got ${seeded.ctx.llm.provider}`);
    const persona = await seeded.ctx.services.personas.create(systemActor(seeded.workspaceId), {
      name: 'Help-centre assistant',
      instructions: 'You answer customers of a project-management product from the help-centre articles you are given, briefly, citing the passages you use.',
      traits: ['concise', 'friendly'],
      model: null,
      temperature: null,
      maxTokens: 400,
      tools: [],
    });
    for (const source of chatSources(CHANNELS_SOURCE_COUNT)) {
      const created = await seeded.ctx.services.knowledge.create(systemActor(seeded.workspaceId), source);
      if (created.status === 'failed') throw new Error(`knowledge source "${source.name}" failed: ${created.error}`);
    }
    await seeded.ctx.services.knowledge.idle();
    const channels = seeded.ctx.services.channels;
    const webhook = await channels.create(systemActor(seeded.workspaceId), {
      type: 'webhook',
      name: 'Bench webhook',
      personaId: persona.id,
      credentials: { secret: CHANNELS_WEBHOOK_SECRET },
    });
    const slack = await channels.create(systemActor(seeded.workspaceId), {
      type: 'slack',
      name: 'Bench Slack',
      personaId: persona.id,
      credentials: { botToken: CHANNELS_SLACK_BOT_TOKEN, signingSecret: CHANNELS_SLACK_SIGNING_SECRET },
    });
    for (const c of [webhook, slack]) {
      if (c.status !== 'connected') throw new Error(`the ${c.type} channel is ${c.status}: ${c.statusDetail ?? 'no detail'}`);
    }
    return await serve(seeded, persona.id, { webhookId: webhook.id, slackId: slack.id });
  } catch (err) {
    await seeded.close();
    throw err;
  }
}

async function serve(seeded: Seeded, personaId: string | null, channels?: BenchChannels): Promise<Running> {
  try {
    await vacuumAnalyzeIfPostgres(seeded.ctx.db);
    const app = await buildApp(seeded.ctx);
    return {
      app,
      key: seeded.key,
      personaId,
      ...(channels ? { channels } : {}),
      async close() {
        try {
          await app.close();
        } finally {
          await seeded.close();
        }
      },
    };
  } catch (err) {
    await seeded.close();
    throw err;
  }
}

function start(kind: ServerKind): Promise<Running> {
  switch (kind) {
    case 'bare':
      return startBare();
    case 'reference':
      return startReference();
    case 'switchboard':
      return startSwitchboard(0);
    case 'switchboard-limited':
      return startSwitchboard(HIGH_RATE_LIMIT);
    case 'switchboard-chat':
      return startSwitchboardChat();
    case 'switchboard-channels':
      return startSwitchboardChannels();
  }
}

function send(message: ChildMessage) {
  process.send?.(message);
}

async function main() {
  const kind = process.argv[2] as ServerKind;
  if (!process.send) throw new Error('servers.js runs as a forked child of bench/run.js');
  if (!SERVER_KINDS.includes(kind)) throw new Error(`unknown server kind "${kind}"; one of ${SERVER_KINDS.join(', ')}`);

  const running = await start(kind);
  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= running
      .close()
      .catch((err: unknown) => console.error('bench server: close failed', err))
      .finally(() => process.exit(0));
    return stopping;
  };
  process.on('message', (raw) => {
    const message = raw as ParentMessage;
    if (message.type === 'cpu') send({ type: 'cpu', usage: process.cpuUsage() });
    else if (message.type === 'memory') {
      const gc = (globalThis as { gc?: () => void }).gc;
      gc?.();
      send({ type: 'memory', usage: process.memoryUsage(), gc: gc !== undefined });
    } else if (message.type === 'stop') void stop();
  });
  process.on('disconnect', () => void stop());
  // Ctrl-C reaches the whole process group: close and clean up rather than die with the data directory left behind.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => void stop());

  try {
    await running.app.listen({ host: '127.0.0.1', port: 0 });
  } catch (err) {
    await running.close();
    throw err;
  }
  const address = running.app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no TCP address');
  send({ type: 'ready', port: address.port, key: running.key, personaId: running.personaId, ...(running.channels ? { channels: running.channels } : {}) });
}

main().catch((err: unknown) => {
  send({ type: 'failed', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  process.exit(1);
});
