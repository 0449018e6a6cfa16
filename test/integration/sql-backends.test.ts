// The SQL both backends share (issue 25): the one migration chain, the values stores get back, text
// order, prepared reads and constraint errors, the same on SQLite and on a real PostgreSQL server
// (each on a database of its own; PostgreSQL when the run has one, test/helpers/postgres.ts).
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isUniqueViolation } from '../../src/db/backend.js';
import { runMigrations } from '../../src/db/migrations/index.js';
import type { PersonaRow } from '../../src/db/schema.js';
import { createPersonaStore } from '../../src/core/personas/personas.store.js';
import { testBackends } from '../helpers/postgres.js';
import { type OpenedBackend, openTestBackend } from '../helpers/sql-backend.js';

const AT = '2026-11-25T10:00:00.000Z';
const WS = 'ws_1';

/** Every table the stores use (schema.ts), each answering a count. */
const TABLES = [
  'workspaces', 'api_keys', 'personas', 'idempotency_keys', 'knowledge_sources', 'knowledge_chunks', 'settings', 'sessions',
  'messages', 'interactions', 'feedback', 'interaction_tools', 'ab_tests', 'channels', 'channel_inbox', 'channel_conversations',
  'channel_messages', 'mcp_servers', 'tool_executions', 'teams', 'team_members', 'oauth_clients', 'oauth_grants', 'oauth_codes',
  'oauth_tokens', 'openai_threads', 'knowledge_chunk_keys', 'knowledge_codes', 'knowledge_vector_epochs', 'change_signals', 'rate_windows',
] as const;

function persona(id: string, name: string, createdAt = AT): PersonaRow {
  return { id, workspace_id: WS, name, instructions: 'Answer.', traits: '[]', model: null, temperature: null, max_tokens: null, tools: '[]', created_at: createdAt, updated_at: createdAt, version: 1, team_id: null, handoff: '{}' };
}

describe.each(testBackends())('SQL on $kind', (which) => {
  let opened: OpenedBackend;
  beforeAll(async () => {
    opened = await openTestBackend(which);
    await opened.backend.kysely.insertInto('workspaces').values({ id: WS, name: 'default', created_at: AT }).execute();
  });
  afterAll(() => opened?.close());

  it('creates every table with the whole chain, and a second run applies nothing', async () => {
    const { kysely } = opened.backend;
    for (const table of TABLES) {
      const row = await sql<{ n: number }>`SELECT count(*) AS n FROM ${sql.table(table)}`.execute(kysely);
      expect(row.rows[0]!.n, table).toBe(table === 'workspaces' ? 1 : 0);
    }
    expect(await runMigrations(kysely, which.kind)).toEqual([]);
  });

  it('refuses a database that a newer build migrated (a migration this one does not know), up to date or not', async () => {
    const { kysely } = opened.backend;
    await sql`INSERT INTO kysely_migration (name, timestamp) VALUES ('999-from-a-newer-build', ${new Date().toISOString()})`.execute(kysely);
    try {
      await expect(runMigrations(kysely, which.kind)).rejects.toThrow(/corrupted migrations: previously executed migration 999-from-a-newer-build is missing/);
    } finally {
      await sql`DELETE FROM kysely_migration WHERE name = '999-from-a-newer-build'`.execute(kysely);
    }
    expect(await runMigrations(kysely, which.kind)).toEqual([]);
  });

  it('returns counts, sums, averages and big integers as numbers', async () => {
    const { kysely } = opened.backend;
    await kysely.insertInto('knowledge_sources').values([
      { id: 'src_1', workspace_id: WS, persona_id: null, name: 'a', kind: 'text', status: 'ready', error: null, bytes: 5_000_000_000, chunk_count: 3, metadata: '{}', url: null, filename: null, media_type: null, content: null, generation: 0, attempts: 0, created_at: AT, updated_at: AT },
      { id: 'src_2', workspace_id: WS, persona_id: null, name: 'b', kind: 'text', status: 'ready', error: null, bytes: 2, chunk_count: 4, metadata: '{}', url: null, filename: null, media_type: null, content: Buffer.from([0, 255, 7]), generation: 0, attempts: 0, created_at: AT, updated_at: AT },
    ]).execute();
    const row = await kysely
      .selectFrom('knowledge_sources')
      .select((eb) => [eb.fn.countAll<number>().as('n'), eb.fn.sum<number>('chunk_count').as('chunks'), eb.fn.avg<number>('chunk_count').as('mean'), eb.fn.max('bytes').as('largest')])
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ n: 2, chunks: 7, mean: 3.5, largest: 5_000_000_000 });
    const blob = await kysely.selectFrom('knowledge_sources').select('content').where('id', '=', 'src_2').executeTakeFirstOrThrow();
    expect(Buffer.isBuffer(blob.content) && [...blob.content]).toEqual([0, 255, 7]);
  });

  it('numbers rows on insert (seq), in order', async () => {
    const { kysely } = opened.backend;
    await kysely.insertInto('sessions').values({ id: 'ses_1', workspace_id: WS, persona_id: 'p', ab_test_id: null, variant: null, channel_id: null, user_id: null, title: 't', message_count: 0, created_at: AT, last_message_at: AT }).execute();
    for (const id of ['m1', 'm2', 'm3']) {
      await kysely.insertInto('messages').values({ id, session_id: 'ses_1', role: 'user', content: id, tool_calls: null, tool_call_id: null, created_at: AT }).execute();
    }
    const rows = await kysely.selectFrom('messages').select(['seq', 'id']).where('session_id', '=', 'ses_1').orderBy('seq').execute();
    expect(rows.map((r) => r.id)).toEqual(['m1', 'm2', 'm3']);
    expect(rows.every((r) => typeof r.seq === 'number' && r.seq > 0)).toBe(true);
    expect(rows[0]!.seq < rows[1]!.seq && rows[1]!.seq < rows[2]!.seq).toBe(true);
  });

  it('orders text byte by byte, as SQLite does, whatever the database collation', async () => {
    const { kysely } = opened.backend;
    const ids = ['b', 'B', 'a_', 'a-', 'a', 'A', 'a b', 'ä', 'Z9', 'z10', '_x', 'É', 'e'];
    await kysely.insertInto('personas').values(ids.map((id) => persona(`ord_${id}`, id))).execute();
    const rows = await kysely.selectFrom('personas').select('name').where('id', 'in', ids.map((id) => `ord_${id}`)).orderBy('name').execute();
    const bytewise = [...ids].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
    expect(rows.map((r) => r.name)).toEqual(bytewise);
    await kysely.deleteFrom('personas').where('id', 'in', ids.map((id) => `ord_${id}`)).execute();
  });

  it('binds the parameters of a prepared read and answers rows, or undefined for none', async () => {
    const { backend } = opened;
    await backend.kysely.insertInto('personas').values([persona('per_1', 'One'), persona('per_2', 'Two')]).execute();
    const byId = backend.prepare<PersonaRow>('SELECT * FROM personas WHERE workspace_id = ? AND id = ?');
    expect((await byId.first(WS, 'per_2'))?.name).toBe('Two');
    expect(await byId.first('ws_other', 'per_2')).toBeUndefined();
    expect(await byId.first(WS, 'per_1')).toMatchObject({ name: 'One', temperature: null });
    const names = backend.prepare<{ name: string }>("SELECT name FROM personas WHERE workspace_id = ? AND id IN ('per_1', 'per_2') ORDER BY name DESC");
    expect(await names.all(WS)).toEqual([{ name: 'Two' }, { name: 'One' }]);
    await backend.kysely.deleteFrom('personas').where('id', 'in', ['per_1', 'per_2']).execute();
  });

  it('reports a second row with the same unique key as a unique violation', async () => {
    const { kysely } = opened.backend;
    const err = await kysely.insertInto('workspaces').values({ id: 'ws_dup', name: 'default', created_at: AT }).execute().catch((e: unknown) => e);
    expect(isUniqueViolation(err)).toBe(true);
    const notUnique = await kysely.insertInto('personas').values(persona('per_x', 'x')).execute().then(() => kysely.insertInto('personas').values({ ...persona('per_y', 'y'), workspace_id: 'ws_missing' }).execute()).catch((e: unknown) => e);
    expect(notUnique).toBeInstanceOf(Error);
    expect(isUniqueViolation(notUnique)).toBe(false); // a foreign key, not a duplicate
    await kysely.deleteFrom('personas').where('id', '=', 'per_x').execute();
  });

  it('lists personas by name ignoring ASCII case, wildcards taken literally, pages by cursor', async () => {
    const store = createPersonaStore(opened.backend);
    const names = ['Support Bot', 'support desk', 'SUPPORT_50%', 'Sales', 'Ärger support', 'ärger'];
    for (const [i, name] of names.entries()) await store.insert(persona(`lst_${i}`, name, `2026-11-25T10:00:0${i % 2}.000Z`), null);
    const found = async (text: string) => (await store.list(WS, { limit: 100 }, text)).data.map((p) => p.name).sort();
    expect(await found('SUPPORT')).toEqual(['SUPPORT_50%', 'Support Bot', 'support desk', 'Ärger support'].sort());
    expect(await found('_50%')).toEqual(['SUPPORT_50%']);
    expect(await found('Bo_')).toEqual([]); // '_' is not a wildcard: 'Support Bot' would match it
    expect(await found('ärger')).toEqual(['ärger']); // beyond ASCII, case counts (as SQLite's LIKE)
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await store.list(WS, { limit: 2, cursor });
      seen.push(...page.data.map((p) => p.id));
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined);
    // newest first, then id descending among equal times
    expect(seen).toEqual(['lst_5', 'lst_3', 'lst_1', 'lst_4', 'lst_2', 'lst_0']);
  });
});

describe.each(testBackends())('migrations on $kind carry the rows they find', (which) => {
  let opened: OpenedBackend;
  beforeAll(async () => {
    opened = await openTestBackend(which, { migrateTo: '005-tool-hub' });
  });
  afterAll(() => opened?.close());

  it('marks the answer that opened each session (006) and files feedback under its session’s channel (009)', async () => {
    const { kysely } = opened.backend;
    await sql`INSERT INTO workspaces (id, name, created_at) VALUES (${WS}, 'default', ${AT})`.execute(kysely);
    await sql`INSERT INTO sessions (id, workspace_id, persona_id, channel_id, title, message_count, created_at, last_message_at)
      VALUES ('ses_a', ${WS}, 'p', 'chn_1', 't', 2, ${AT}, ${AT})`.execute(kysely);
    for (const [error, session] of [['boom', 'ses_a'], [null, 'ses_a'], [null, 'ses_a'], [null, null]] as const) {
      await sql`INSERT INTO interactions (workspace_id, session_id, persona_id, model, started_at, latency_ms, prompt_tokens, completion_tokens, tool_calls, error)
        VALUES (${WS}, ${session}, 'p', 'm', ${AT}, 1, 1, 1, 0, ${error})`.execute(kysely);
    }
    await sql`INSERT INTO feedback (workspace_id, session_id, persona_id, rating, created_at) VALUES (${WS}, 'ses_a', 'p', 5, ${AT})`.execute(kysely);

    await runMigrations(kysely, which.kind);

    const interactions = await sql<{ new_session: number }>`SELECT new_session FROM interactions ORDER BY seq`.execute(kysely);
    expect(interactions.rows.map((r) => r.new_session)).toEqual([0, 1, 0, 0]);
    const feedback = await sql<{ channel_id: string | null }>`SELECT channel_id FROM feedback`.execute(kysely);
    expect(feedback.rows).toEqual([{ channel_id: 'chn_1' }]);
  });
});

describe.each(testBackends().filter((b) => b.kind === 'postgres'))('migration 016 on $kind', (which) => {
  let opened: OpenedBackend;
  beforeAll(async () => {
    opened = await openTestBackend(which, { migrateTo: '015-change-signals' });
  });
  afterAll(() => opened?.close());

  it('copies each posting’s workspace, scope and length from its chunk, and keys the postings by term and workspace', async () => {
    const { kysely } = opened.backend;
    await sql`INSERT INTO workspaces (id, name, created_at) VALUES (${WS}, 'default', ${AT})`.execute(kysely);
    await sql`INSERT INTO knowledge_sources (id, workspace_id, persona_id, name, kind, status, bytes, chunk_count, metadata, generation, attempts, created_at, updated_at)
      VALUES ('src_1', ${WS}, NULL, 's', 'text', 'ready', 1, 2, '{}', 0, 0, ${AT}, ${AT})`.execute(kysely);
    const chunks = await sql<{ rowid: number; scope: string }>`
      INSERT INTO knowledge_chunks (id, workspace_id, source_id, scope, position, text, heading_path, tokens, embedding)
      VALUES ('chk_1', ${WS}, 'src_1', 'shared', 0, 'a b', '[]', 2, ${Buffer.alloc(4)}), ('chk_2', ${WS}, 'src_1', 'per_1', 1, 'a', '[]', 1, ${Buffer.alloc(4)})
      RETURNING rowid, scope`.execute(kysely);
    const [first, second] = chunks.rows;
    await sql`INSERT INTO knowledge_documents (rowid, tokens, title) VALUES (${first!.rowid}, 2, ''), (${second!.rowid}, 1, '')`.execute(kysely);
    await sql`INSERT INTO knowledge_postings (term, rowid, title_freq, body_freq)
      VALUES ('a', ${first!.rowid}, 0, 1), ('b', ${first!.rowid}, 0, 1), ('a', ${second!.rowid}, 0, 1)`.execute(kysely);

    expect(await runMigrations(kysely, which.kind, '016-postgres-postings-keys')).toEqual(['016-postgres-postings-keys']);

    const postings = await sql`SELECT term, rowid, workspace_id, scope, tokens FROM knowledge_postings ORDER BY term, rowid`.execute(kysely);
    expect(postings.rows).toEqual([
      { term: 'a', rowid: first!.rowid, workspace_id: WS, scope: 'shared', tokens: 2 },
      { term: 'a', rowid: second!.rowid, workspace_id: WS, scope: 'per_1', tokens: 1 },
      { term: 'b', rowid: first!.rowid, workspace_id: WS, scope: 'shared', tokens: 2 },
    ]);
    const key = await sql<{ def: string }>`SELECT pg_get_indexdef('knowledge_postings_pkey'::regclass) AS def`.execute(kysely);
    expect(key.rows[0]!.def).toContain('(term, workspace_id, rowid) INCLUDE (scope, title_freq, body_freq, tokens)');
    const documents = await sql`SELECT rowid, terms FROM knowledge_documents ORDER BY rowid`.execute(kysely);
    expect(documents.rows).toEqual([
      { rowid: first!.rowid, terms: expect.arrayContaining(['a', 'b']) },
      { rowid: second!.rowid, terms: ['a'] },
    ]);

    // A deleted chunk takes its postings (found through its document's terms), its document and its share of the totals.
    await sql`UPDATE knowledge_keyword_totals SET rows = 2, tokens = 3 WHERE id = 1`.execute(kysely);
    await sql`DELETE FROM knowledge_chunks WHERE id = 'chk_1'`.execute(kysely);
    const left = await sql`SELECT term, rowid FROM knowledge_postings ORDER BY term`.execute(kysely);
    expect(left.rows).toEqual([{ term: 'a', rowid: second!.rowid }]);
    const totals = await sql`SELECT rows, tokens FROM knowledge_keyword_totals`.execute(kysely);
    expect(totals.rows).toEqual([{ rows: 1, tokens: 1 }]);
  });
});
