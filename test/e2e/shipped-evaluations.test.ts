// Datasets and evaluation runs as shipped (DESIGN.md "Tests run what ships"): the built server
// (`node dist/src/main.js serve`) on the fake OpenAI-compatible model, which echoes the question.
// A case with a JSON schema is accepted on every path that creates one (POST /datasets, POST
// /datasets/:id/cases, JSONL and CSV import), a schema Ajv cannot compile is a 400 naming the case
// and field on each of them, and a run over JSON-schema and regex cases completes with both scorers.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeySecret } from '../../src/core/auth/keys.js';
import { FAKE_OPENAI_KEY, type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-server.js';
import { type Requester, tempDir } from '../helpers/app.js';
import { builtClient, builtServers, MAIN } from '../helpers/built-server.js';
import { createPersona } from '../helpers/factories.js';
import { waitFor } from '../helpers/mcp-tools.js';
import { expectProblem } from '../helpers/problem.js';

/** The fake model answers `Echo: <question>`, so this question's answer holds a ```json block. */
const JSON_QUESTION = 'Reply with ```json\n{"refund": true, "days": 5}\n```';
const SCHEMA = { type: 'object', required: ['refund', 'days'], properties: { refund: { type: 'boolean' }, days: { type: 'integer' } } };
const INVALID_SCHEMA = { type: 5 };

describe('datasets and evaluation runs on the built server', { timeout: 60_000 }, () => {
  const dataDir = tempDir('switchboard-shipped-evals-');
  const key = generateKeySecret();
  let fake: FakeOpenAi;
  let killAll: () => void;
  let api: Requester;

  beforeAll(async () => {
    expect(fs.existsSync(MAIN), 'dist/ is built by npm test (or npx tsc -p tsconfig.json)').toBe(true);
    fake = await startFakeOpenAi();
    const servers = builtServers({ dataDir, adminKey: key, env: { OPENAI_API_KEY: FAKE_OPENAI_KEY, OPENAI_BASE_URL: fake.url, SWITCHBOARD_MODEL: 'gpt-test' } });
    killAll = servers.killAll;
    api = builtClient(await servers.serve(), key);
  });

  afterAll(async () => {
    killAll?.();
    await fake?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const post = (url: string, body: unknown) => api.request({ method: 'POST', url, body });
  const get = (url: string) => api.request({ method: 'GET', url });
  let datasetId: string;

  it('creates a dataset with JSON-schema and regex cases, adds one, and imports JSONL and CSV', async () => {
    const created = await post('/datasets', {
      name: 'Shipped',
      cases: [
        { input: JSON_QUESTION, jsonSchema: SCHEMA },
        { input: 'How long do refunds take?', regex: '/^echo: how long/i' },
      ],
    });
    expect(created.statusCode, created.body).toBe(201);
    datasetId = created.json().id;
    expect(created.json()).toMatchObject({ caseCount: 2 });

    const added = await post(`/datasets/${datasetId}/cases`, { input: 'Anything', jsonSchema: { type: 'object' } });
    expect(added.statusCode, added.body).toBe(201);

    const jsonl = `${JSON.stringify({ input: JSON_QUESTION, jsonSchema: { $schema: 'http://json-schema.org/draft-07/schema#', ...SCHEMA } })}\n`;
    const fromJsonl = await post(`/datasets/${datasetId}/import`, { format: 'jsonl', content: jsonl });
    expect(fromJsonl.statusCode, fromJsonl.body).toBe(200);
    expect(fromJsonl.json()).toMatchObject({ imported: 1, dataset: { caseCount: 4 } });

    const csv = `input,jsonSchema,regex\r\nShip it,"{""type"":""object""}",\r\nWhen?,,^Echo: When\r\n`;
    const fromCsv = await post(`/datasets/${datasetId}/import`, { format: 'csv', content: csv });
    expect(fromCsv.statusCode, fromCsv.body).toBe(200);
    expect(fromCsv.json()).toMatchObject({ imported: 2, dataset: { caseCount: 6 } });

    const exported = await get(`/datasets/${datasetId}/export?format=jsonl`);
    expect(exported.statusCode).toBe(200);
    expect(exported.body.trim().split('\n').map((l) => JSON.parse(l).jsonSchema ?? null)).toEqual([SCHEMA, null, { type: 'object' }, { $schema: 'http://json-schema.org/draft-07/schema#', ...SCHEMA }, { type: 'object' }, null]);
  });

  it('refuses a schema that does not compile with a 400 naming the case and field, on every path', async () => {
    const onCreate = expectProblem(await post('/datasets', { name: 'Bad', cases: [{ input: 'ok' }, { input: 'x', jsonSchema: INVALID_SCHEMA }] }), 400, 'validation_failed', 'cases.1.jsonSchema');
    expect(onCreate.errors?.[0]?.message).toMatch(/^must compile: /);
    expectProblem(await post(`/datasets/${datasetId}/cases`, { input: 'x', jsonSchema: INVALID_SCHEMA }), 400, 'validation_failed', 'jsonSchema');
    const onJsonl = expectProblem(await post(`/datasets/${datasetId}/import`, { format: 'jsonl', content: `{"input":"ok"}\n${JSON.stringify({ input: 'x', jsonSchema: INVALID_SCHEMA })}\n` }), 400, 'validation_failed', 'cases.1.jsonSchema');
    expect(onJsonl.errors?.[0]?.message).toMatch(/^line 2: must compile: /);
    const onCsv = expectProblem(await post(`/datasets/${datasetId}/import`, { format: 'csv', content: 'input,jsonSchema\r\nx,"{""type"":5}"\r\n' }), 400, 'validation_failed', 'cases.0.jsonSchema');
    expect(onCsv.errors?.[0]?.message).toMatch(/^row 2: must compile: /);
    // Nothing of the refused imports was added.
    expect((await get(`/datasets/${datasetId}`)).json()).toMatchObject({ caseCount: 6 });
  });

  it('runs the dataset to completion, scoring JSON schemas and regular expressions', async () => {
    const persona = await createPersona(api, { name: 'Shipped' });
    const started = await post('/evaluations/runs', { datasetId, personaId: `${persona.id}@1` });
    expect(started.statusCode, started.body).toBe(201);
    const runId = started.json().id as string;
    const run = await waitFor(async () => {
      const r = (await get(`/evaluations/runs/${runId}`)).json();
      return r.status === 'queued' || r.status === 'running' ? null : r;
    }, 30_000, 'the run to finish');
    expect(run).toMatchObject({ status: 'completed', progress: { done: 6, total: 6 }, error: null, summary: { cases: 6, errors: 0 } });
    const scorer = (name: string) => run.summary.scorers.find((s: { scorer: string }) => s.scorer === name);
    // Cases 1, 4 answer with a valid ```json block; 3 and 5 answer plain text, which is not JSON.
    expect(scorer('json_schema')).toMatchObject({ cases: 4, passed: 2 });
    expect(scorer('regex')).toMatchObject({ cases: 2, passed: 2 });
    const results = (await get(`/evaluations/runs/${runId}/results?limit=100`)).json().data as Array<{ position: number; passed: boolean }>;
    expect(results.map((r) => [r.position, r.passed])).toEqual([[1, true], [2, true], [3, false], [4, true], [5, false], [6, true]]);
  });
});
