/**
 * One encoder per streaming protocol, both fed the agent's events: the native chunks of API.md §6
 * and the AI SDK UI message stream (`x-vercel-ai-ui-message-stream: v1`) that `useChat` reads.
 */
import type { AgentEvent } from './agent.js';
import type { Answer } from './chat.schemas.js';

export interface StreamError {
  code: string;
  message: string;
}

export interface StreamEncoder {
  /** Response headers beyond the event-stream ones. */
  headers: Record<string, string>;
  start(): string;
  event(event: AgentEvent): string;
  done(answer: Answer): string;
  error(error: StreamError): string;
  /** The last event: `[DONE]`. */
  end(): string;
}

/** API.md §6: every event numbered in `id:`, no `event:` field, `[DONE]` last. */
export function nativeEncoder(): StreamEncoder {
  let seq = 0;
  const send = (data: string) => `id: ${++seq}\ndata: ${data}\n\n`;
  return {
    headers: {},
    start: () => '',
    event: (event) => send(JSON.stringify(event)),
    done: (a) => send(JSON.stringify({ type: 'done', sessionId: a.sessionId, messageId: a.messageId, usage: a.usage, sources: a.sources, ...(a.handoff ? { handoff: a.handoff } : {}) })),
    error: (error) => send(JSON.stringify({ type: 'error', error })),
    end: () => send('[DONE]'),
  };
}

/**
 * The AI SDK UI message stream. Tools are `dynamic` (the client does not define them); the session
 * and the stored answer's id arrive as message metadata, the passages as `source-document` parts.
 */
export function uiMessageEncoder(): StreamEncoder {
  const send = (chunk: Record<string, unknown>) => `data: ${JSON.stringify(chunk)}\n\n`;
  let textId: string | null = null;
  let texts = 0;
  let afterTools = false;
  const closeText = () => {
    if (textId === null) return '';
    const out = send({ type: 'text-end', id: textId });
    textId = null;
    return out;
  };
  return {
    headers: { 'x-vercel-ai-ui-message-stream': 'v1' },
    start: () => send({ type: 'start' }) + send({ type: 'start-step' }),
    event(event) {
      switch (event.type) {
        case 'text': {
          let out = '';
          if (afterTools) {
            out += send({ type: 'finish-step' }) + send({ type: 'start-step' });
            afterTools = false;
          }
          if (textId === null) {
            textId = `text-${++texts}`;
            out += send({ type: 'text-start', id: textId });
          }
          return out + send({ type: 'text-delta', id: textId, delta: event.content });
        }
        case 'tool_call':
          return (
            closeText() +
            send({ type: 'tool-input-available', toolCallId: event.toolCall.id, toolName: event.toolCall.name, input: event.toolCall.arguments, dynamic: true })
          );
        case 'tool_result':
          afterTools = true;
          return event.isError
            ? send({ type: 'tool-output-error', toolCallId: event.toolCallId, errorText: JSON.stringify(event.result), dynamic: true })
            : send({ type: 'tool-output-available', toolCallId: event.toolCallId, output: event.result, dynamic: true });
      }
    },
    done: (a) =>
      closeText() +
      a.sources.map((s) => send({ type: 'source-document', sourceId: s.chunkId, mediaType: 'text/plain', title: s.sourceName })).join('') +
      send({ type: 'finish-step' }) +
      send({ type: 'finish', finishReason: a.finishReason, messageMetadata: { sessionId: a.sessionId, messageId: a.messageId, usage: a.usage, ...(a.handoff ? { handoff: a.handoff } : {}) } }),
    error: (error) => closeText() + send({ type: 'error', errorText: error.message }),
    end: () => 'data: [DONE]\n\n',
  };
}
