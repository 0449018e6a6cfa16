/** Tools Switchboard serves itself (API.md §7): `knowledge.search` here; the channels add `<type>.send_message`. */
import { z } from 'zod';
import type { KnowledgeService } from '../knowledge/knowledge.service.js';
import type { ToolCallOptions } from './tool-hub.js';

export interface BuiltinTool {
  toolName: string;
  action: string;
  description: string;
  schema: z.ZodType<Record<string, unknown>>;
  run(workspaceId: string, parameters: Record<string, unknown>, options: ToolCallOptions): Promise<unknown>;
  /** Whether the workspace has the tool now; absent = always. */
  available?(workspaceId: string): Promise<boolean>;
}

const knowledgeSearchSchema = z.strictObject({
  query: z.string().trim().min(1).max(2000).describe('What to look for.'),
  limit: z.number().int().min(1).max(20).default(5).describe('How many passages, 1–20.'),
});

export function builtinTools(knowledge: KnowledgeService): BuiltinTool[] {
  return [
    {
      toolName: 'knowledge',
      action: 'search',
      description: "Searches the knowledge base (hybrid keyword and vector search) and returns the best matching passages with their source.",
      schema: knowledgeSearchSchema as z.ZodType<Record<string, unknown>>,
      async run(workspaceId, parameters, options) {
        const { query, limit } = parameters as z.infer<typeof knowledgeSearchSchema>;
        const { data } = await knowledge.search(workspaceId, { q: query, limit, mode: 'hybrid', personaId: options.personaId });
        return data.map((h) => ({ chunkId: h.chunkId, sourceName: h.sourceName, text: h.text, score: h.score }));
      },
    },
  ];
}
