/**
 * Foundation HTTP overhead: authenticated `GET /personas` (20 personas) and `GET /health` against a
 * bare fastify hello-world on the same machine. Target: the authenticated list at ≥ 50 % of the
 * ceiling, with the rate limiter off and on (raised so it never trips: its bookkeeping is measured).
 * A reference row (plain fastify + one prepared better-sqlite3 statement, same rows, same JSON)
 * shows what any database-backed list of this size costs here; it has no target. Repeated reads
 * of an unchanged list are served from the response cache; the `no-cache` row bypasses it and
 * shows the cost of a read from the database.
 */
import { type BenchOptions, type BenchRow, compareWithCeiling, expectResponse, measure } from './lib/harness.js';
import { type ServerProcess, startServerProcess } from './lib/server-process.js';
import { HIGH_RATE_LIMIT, PERSONA_COUNT, type ServerKind } from './lib/server-protocol.js';

export const name = 'http-foundation';
export const description = `authenticated GET /personas (${PERSONA_COUNT}) and GET /health vs a bare fastify hello-world`;

const TARGET_RATIO = 0.5;

async function withServer<T>(kind: ServerKind, options: BenchOptions, fn: (server: ServerProcess) => Promise<T>): Promise<T> {
  const server = await startServerProcess(kind, { cpuProfileDir: options.cpuProfileDir, cpu: options.pinning?.server });
  try {
    return await fn(server);
  } finally {
    await server.stop();
  }
}

function bearer(server: ServerProcess): Record<string, string> {
  if (!server.key) throw new Error(`${server.kind} server reported no API key`);
  return { authorization: `Bearer ${server.key}` };
}

function isPersonaPage(body: unknown): string | undefined {
  const data = (body as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) return 'the body has no data[]';
  if (data.length !== PERSONA_COUNT) return `expected ${PERSONA_COUNT} personas, got ${data.length}`;
  return undefined;
}

/** Authenticated list: 200 and exactly the seeded personas; the limiter present or absent as the variant says. */
async function checkPersonaList(server: ServerProcess, limited: boolean): Promise<void> {
  const url = `${server.origin}/personas`;
  await expectResponse(`${server.kind} GET /personas without a key`, url, {}, (status) =>
    status === 401 ? undefined : 'expected 401',
  );
  await expectResponse(`${server.kind} GET /personas`, url, { headers: bearer(server) }, (status, body, headers) => {
    if (status !== 200) return 'expected 200';
    const limit = headers.get('ratelimit-limit');
    if (limited && limit !== String(HIGH_RATE_LIMIT)) return `expected ratelimit-limit ${HIGH_RATE_LIMIT}, got ${limit}`;
    if (!limited && limit !== null) return `expected no rate limiting, got ratelimit-limit ${limit}`;
    return isPersonaPage(body);
  });
}

export async function run(options: BenchOptions): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];

  await withServer('bare', options, async (server) => {
    const url = `${server.origin}/`;
    await expectResponse('bare GET /', url, {}, (status, body) =>
      status === 200 && (body as { hello?: unknown } | null)?.hello === 'world' ? undefined : 'expected {"hello":"world"}',
    );
    rows.push(
      await measure(
        { name: 'bare fastify GET / (ceiling)', isCeiling: true, target: { url, serverCpu: server.cpuUsage } },
        options,
      ),
    );
  });

  await withServer('reference', options, async (server) => {
    const url = `${server.origin}/personas`;
    await expectResponse('reference GET /personas', url, {}, (status, body) =>
      status === 200 ? isPersonaPage(body) : 'expected 200',
    );
    rows.push(
      await measure(
        { name: `reference: bare fastify + better-sqlite3 list (${PERSONA_COUNT})`, target: { url, serverCpu: server.cpuUsage } },
        options,
      ),
    );
  });

  await withServer('switchboard', options, async (server) => {
    const healthUrl = `${server.origin}/health`;
    await expectResponse('switchboard GET /health', healthUrl, {}, (status, body) =>
      status === 200 && (body as { status?: unknown } | null)?.status === 'ok' ? undefined : 'expected 200 {"status":"ok"}',
    );
    rows.push(await measure({ name: 'switchboard GET /health', target: { url: healthUrl, serverCpu: server.cpuUsage } }, options));

    await checkPersonaList(server, false);
    rows.push(
      await measure(
        {
          name: `switchboard GET /personas (auth, ${PERSONA_COUNT})`,
          targetRatio: TARGET_RATIO,
          target: { url: `${server.origin}/personas`, headers: bearer(server), serverCpu: server.cpuUsage },
        },
        options,
      ),
    );
    // The same list read from the database every time: what a page costs when it changed since the last read.
    rows.push(
      await measure(
        {
          name: `switchboard GET /personas (auth, ${PERSONA_COUNT}, no-cache)`,
          target: {
            url: `${server.origin}/personas`,
            headers: { ...bearer(server), 'cache-control': 'no-cache' },
            serverCpu: server.cpuUsage,
          },
        },
        options,
      ),
    );
  });

  await withServer('switchboard-limited', options, async (server) => {
    await checkPersonaList(server, true);
    rows.push(
      await measure(
        {
          name: `switchboard GET /personas (auth, ${PERSONA_COUNT}, rate limit on)`,
          targetRatio: TARGET_RATIO,
          target: { url: `${server.origin}/personas`, headers: bearer(server), serverCpu: server.cpuUsage },
        },
        options,
      ),
    );
  });

  return compareWithCeiling(rows);
}
