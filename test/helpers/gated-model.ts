// A model for tests of work that takes a while (MCP tasks, resumed streams): it answers at once,
// except a message containing "slowly", which waits until the test releases it or the call is aborted.
import type { ChatRequest, LlmClient, ModelEvent } from '../../src/llm/llm-client.js';

/**
 * A model that answers at once, except a message containing "slowly": that one waits until released or cancelled.
 * `asked` holds the last message of every call, in the order the calls came.
 */
export function gatedModel() {
  const state = { waiting: 0, aborted: 0, asked: [] as string[], release: () => {} };
  let opened = new Promise<void>((resolve) => (state.release = resolve));
  const llm: LlmClient = {
    provider: 'openai',
    defaultModel: 'gated',
    async *stream(request: ChatRequest): AsyncIterable<ModelEvent> {
      const last = request.messages.at(-1)?.content ?? '';
      state.asked.push(last);
      if (last.includes('slowly')) {
        state.waiting++;
        await new Promise<void>((resolve, reject) => {
          request.signal?.addEventListener('abort', () => (state.aborted++, reject(request.signal!.reason)), { once: true });
          void opened.then(resolve);
        });
      }
      yield { type: 'text', text: 'Answered.' };
      yield { type: 'end', toolCalls: [], usage: { promptTokens: 1, completionTokens: 1 }, finishReason: 'stop' };
    },
  };
  return { llm, state, reset: () => (opened = new Promise<void>((resolve) => (state.release = resolve))) };
}

