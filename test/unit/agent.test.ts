// The agent loop against a scripted model and tool hub (the ports it talks to): tool rounds,
// limits, time-outs, cancellation and retrieval falling back to keywords.
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AgentEvent, type AgentLimits, createAgent } from '../../src/core/chat/agent.js';
import type { Persona } from '../../src/core/personas/personas.schemas.js';
import type { ToolHub } from '../../src/core/tools/tool-hub.js';
import { UpstreamError } from '../../src/errors.js';
import type { Embedder } from '../../src/llm/embedder.js';
import { createHashedEmbedder } from '../../src/llm/hashed-embedder.js';
import type { ChatRequest, LlmClient, ModelEvent, ModelToolCall } from '../../src/llm/llm-client.js';
import { createTestApp, type TestApp } from '../helpers/app.js';

type Turn = { text?: string; calls?: ModelToolCall[] };

/** A model that plays `turns` in order and keeps every request it was sent. */
function scriptedModel(turns: Turn[] | ((request: ChatRequest, n: number) => Turn)) {
  const requests: ChatRequest[] = [];
  const client: LlmClient = {
    provider: 'openai',
    defaultModel: 'scripted',
    async *stream(request): AsyncGenerator<ModelEvent> {
      requests.push(request);
      const turn = typeof turns === 'function' ? turns(request, requests.length - 1) : (turns[requests.length - 1] ?? { text: 'done' });
      if (turn.text) yield { type: 'text', text: turn.text };
      yield { type: 'end', toolCalls: turn.calls ?? [], usage: { promptTokens: 10, completionTokens: 1 }, finishReason: turn.calls?.length ? 'tool_calls' : 'stop' };
    },
  };
  return { client, requests };
}

/** A hub with `echo.say` (answers at once) and `slow.wait` (answers after `ms`, honouring its signal). */
function testHub(log: string[]): ToolHub {
  return {
    list: async () => [
      { toolName: 'echo', action: 'say', description: 'Echo', inputSchema: { type: 'object' } },
      { toolName: 'slow', action: 'wait', description: 'Slow', inputSchema: { type: 'object' } },
    ],
    async call(_ws, toolName, action, parameters, options) {
      log.push(`${toolName}.${action} start`);
      if (toolName === 'slow') {
        await new Promise((resolve, reject) => {
          const timer = setTimeout(resolve, Number(parameters.ms));
          options?.signal?.addEventListener('abort', () => {
            clearTimeout(timer);
            reject(options.signal!.reason);
          });
        });
      }
      log.push(`${toolName}.${action} end`);
      return { result: { echoed: parameters }, isError: false };
    },
  };
}

const call = (id: string, name: string, args: unknown = {}): ModelToolCall => ({ id, name, arguments: typeof args === 'string' ? args : JSON.stringify(args) });

describe('agent loop', () => {
  let t: TestApp;
  let workspaceId = '';
  let failVectors = false;
  const hashed = createHashedEmbedder();
  // Fails query embeddings on demand, as an embeddings endpoint that is down would.
  const embedder: Embedder = { ...hashed, embed: async (texts, signal) => {
    if (failVectors && texts.length === 1) throw new UpstreamError('Embedding failed: could not reach the endpoint.');
    return hashed.embed(texts, signal);
  } };
  const persona: Persona = { id: '', name: 'Ada', instructions: 'Help.', traits: [], model: null, temperature: null, maxTokens: null, tools: ['echo.*', 'slow.wait'], version: 1, teamId: null, handoff: { tool: false, keywords: [], lowRating: false, noKnowledge: null }, createdAt: '', updatedAt: '' };

  beforeAll(async () => {
    t = await createTestApp({ overrides: { embedder } });
    persona.id = (await t.request({ method: 'POST', url: '/personas', body: { name: 'Ada', instructions: 'Help.' } })).json().id;
    workspaceId = (t.ctx.sqlite().sqlite.prepare('SELECT workspace_id FROM personas WHERE id = ?').get(persona.id) as { workspace_id: string }).workspace_id;
    await t.request({ method: 'POST', url: '/knowledge', body: { kind: 'text', name: 'Cats', content: 'The office cat is called Miso and likes tuna.' } });
    await t.ctx.services.knowledge.idle();
  });
  afterAll(async () => t.close());

  function run(model: LlmClient, hub: ToolHub, limits: Partial<AgentLimits> = {}, input: { message?: string; signal?: AbortSignal; enableTools?: boolean } = {}) {
    const agent = createAgent({ llm: model, knowledge: t.ctx.services.knowledge, tools: hub, logger: pino({ level: 'silent' }), limits });
    const events: AgentEvent[] = [];
    const outcome = agent.run(
      { workspaceId, persona, history: [], message: input.message ?? 'What is the cat called?', enableTools: input.enableTools ?? true, signal: input.signal ?? new AbortController().signal },
      (e) => void events.push(e),
    );
    return { outcome, events };
  }

  it('runs several calls of a round concurrently and reports them in order', async () => {
    const log: string[] = [];
    const { client, requests } = scriptedModel([{ calls: [call('a', 'slow__wait', { ms: 50 }), call('b', 'echo__say', { x: 1 })] }, { text: 'Both done.' }]);
    const { outcome, events } = run(client, testHub(log));
    const result = await outcome;
    expect(result.content).toBe('Both done.');
    // echo finished while slow was still waiting: they ran at the same time.
    expect(log).toEqual(['slow.wait start', 'echo.say start', 'echo.say end', 'slow.wait end']);
    expect(events.map((e) => e.type)).toEqual(['tool_call', 'tool_call', 'tool_result', 'tool_result', 'text']);
    expect(requests[1]!.messages.filter((m) => m.role === 'tool').map((m) => (m as { toolCallId: string }).toolCallId)).toEqual(['a', 'b']);
    expect(result.usage).toEqual({ promptTokens: 20, completionTokens: 2 });
  });

  it('stops offering tools after the last round, so the model must answer', async () => {
    const { client, requests } = scriptedModel((req) => (req.tools && req.tools.length > 0 ? { calls: [call(`c${Math.random()}`, 'echo__say')] } : { text: 'Final.' }));
    const result = await run(client, testHub([]), { maxToolRounds: 2 }).outcome;
    expect(requests).toHaveLength(3);
    expect(requests.map((r) => r.tools?.length ?? 0)).toEqual([2, 2, 0]);
    expect(result.rounds).toHaveLength(2);
    expect(result.content).toBe('Final.');
  });

  it('times a slow tool out as an error result and carries on', async () => {
    const { client } = scriptedModel([{ calls: [call('s', 'slow__wait', { ms: 5_000 })] }, { text: 'It timed out.' }]);
    const started = performance.now();
    const result = await run(client, testHub([]), { toolTimeoutMs: 80 }).outcome;
    expect(performance.now() - started).toBeLessThan(4_000); // the tool itself takes 5 s
    expect(result.rounds.flat()[0]).toMatchObject({ name: 'slow.wait', isError: true, result: { error: expect.stringMatching(/timed out after 80 ms/) } });
  });

  it('answers calls beyond the per-round cap, bad JSON and unknown tools with error results', async () => {
    const { client } = scriptedModel([
      { calls: [call('1', 'echo__say'), call('2', 'echo__say', 'not json'), call('3', 'nope__x'), call('4', 'echo__say')] },
      { text: 'ok' },
    ]);
    const result = await run(client, testHub([]), { maxCallsPerRound: 3 }).outcome;
    expect(result.rounds.flat().map((c) => c.isError)).toEqual([false, true, true, true]);
    expect(result.rounds.flat()[1]!.result).toEqual({ error: 'The arguments must be a JSON object.' });
    expect(result.rounds.flat()[2]!.result).toEqual({ error: expect.stringMatching(/not available/) });
    expect(result.rounds.flat()[3]!.result).toEqual({ error: expect.stringMatching(/At most 3/) });
  });

  it('offers no tools when they are not enabled', async () => {
    const { client, requests } = scriptedModel([{ text: 'no tools' }]);
    await run(client, testHub([]), {}, { enableTools: false }).outcome;
    expect(requests[0]!.tools).toEqual([]);
  });

  it('is cancelled by its signal during a tool call', async () => {
    const controller = new AbortController();
    const { client } = scriptedModel([{ calls: [call('s', 'slow__wait', { ms: 5_000 })] }]);
    const { outcome } = run(client, testHub([]), {}, { signal: controller.signal });
    setTimeout(() => controller.abort(new Error('client gone')), 30);
    await expect(outcome).rejects.toThrow('client gone');
  });

  it('retrieves with keywords when the embeddings endpoint fails', async () => {
    failVectors = true;
    try {
      const { client, requests } = scriptedModel([{ text: 'Miso.' }]);
      const result = await run(client, testHub([]), {}, { message: 'What is the cat called?' }).outcome;
      expect(result.sources.map((s) => s.sourceName)).toEqual(['Cats']);
      expect(requests[0]!.messages[0]!.content).toContain('Miso');
    } finally {
      failVectors = false;
    }
  });
});
