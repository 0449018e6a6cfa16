/** MCP tools of conversations (API.md §10): asking a persona, and reading its sessions. */
import { z } from 'zod';
import { idInput, pageInput, pageOutput } from '../../mcp/common-schemas.js';
import { defineTool, type McpFeature, READ_ONLY } from '../../mcp/tool-definition.js';
import { answerSchema, MESSAGE_MAX, sessionDetailSchema, sessionSchema } from './chat.schemas.js';

export const chatFeature: McpFeature = {
  tools: [
    defineTool({
      name: 'ask_persona',
      title: 'Ask a persona',
      description:
        'Asks a persona a question and returns its answer with the knowledge sources it drew on and the `sessionId`. ' +
        'Pass that `sessionId` back to continue the same conversation. The answer streams as progress notifications when you send a progress token.',
      input: z.strictObject({
        personaId: z.string().min(1).max(64).describe('The persona to ask (per_…); list_personas finds one.'),
        message: z.string().min(1).max(MESSAGE_MAX).refine((s) => s.trim() !== '', 'must not be blank').describe('The question or message.'),
        sessionId: z.string().min(1).max(64).optional().describe('Continue this session (ses_…); omitted: a new one.'),
        enableMCPTools: z.boolean().default(false).describe("Let the persona call the tools its `tools` list allows while answering."),
      }),
      output: answerSchema,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
      // As POST /query (chat.routes.ts ASKS): an agent asks; a read-only key cannot, a write key can.
      scope: 'agent',
      task: true,
      run: async ({ ctx, caller, signal, progress }, { personaId, message, sessionId, enableMCPTools }) => {
        const exchange = await ctx.services.chat.open(caller.workspaceId, { personaId, message, sessionId, enableMCPTools });
        return exchange.run((event) => (event.type === 'text' ? progress(event.content) : undefined), signal);
      },
    }),
    defineTool({
      name: 'list_sessions',
      title: 'List conversation sessions',
      description: 'Lists conversation sessions, most recently created first; filter by `personaId`, `channelId` or `userId`.',
      input: z.strictObject({
        personaId: z.string().min(1).optional(),
        channelId: z.string().min(1).optional(),
        userId: z.string().min(1).max(200).optional(),
        ...pageInput,
      }),
      output: pageOutput(sessionSchema),
      annotations: READ_ONLY,
      scope: 'read',
      run: ({ ctx, caller }, { personaId, channelId, userId, ...page }) => ctx.services.sessions.list(caller.workspaceId, page, { personaId, channelId, userId }),
    }),
    defineTool({
      name: 'get_session',
      title: 'Get a session',
      description: 'Returns a session with its messages, oldest first: questions, answers and any tool calls.',
      input: idInput('session'),
      output: sessionDetailSchema,
      annotations: READ_ONLY,
      scope: 'read',
      run: ({ ctx, caller }, { id }) => ctx.services.sessions.get(caller.workspaceId, id),
    }),
  ],
};
