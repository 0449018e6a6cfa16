/**
 * The tool port (DESIGN.md "ToolHub"): what the agent loop may call. Today it holds the built-in
 * tools; registered MCP servers (API.md §7) join it behind the same two functions.
 */
import { z } from 'zod';
import { NotFoundError, ValidationError } from '../../errors.js';
import type { KnowledgeService } from '../knowledge/knowledge.service.js';

export interface ToolDescriptor {
  toolName: string;
  action: string;
  description: string;
  /** JSON Schema of the parameters object. */
  inputSchema: Record<string, unknown>;
}

export interface ToolCallOptions {
  signal?: AbortSignal | undefined;
  /** The persona calling, when a chat calls: `knowledge.search` then searches what it may see. */
  personaId?: string | undefined;
}

/** A tool's answer; `isError` when the tool itself reported a failure. */
export interface ToolOutput {
  result: unknown;
  isError: boolean;
}

export interface ToolHub {
  list(workspaceId: string): Promise<ToolDescriptor[]>;
  /**
   * Runs one action. Throws NotFoundError for an unknown tool or action, ValidationError when the
   * parameters fail its schema, UpstreamError/UpstreamTimeoutError when its server fails.
   */
  call(workspaceId: string, toolName: string, action: string, parameters: Record<string, unknown>, options?: ToolCallOptions): Promise<ToolOutput>;
}

interface BuiltinTool {
  toolName: string;
  action: string;
  description: string;
  schema: z.ZodType<Record<string, unknown>>;
  run(workspaceId: string, parameters: Record<string, unknown>, options: ToolCallOptions): Promise<unknown>;
}

const knowledgeSearchSchema = z.strictObject({
  query: z.string().trim().min(1).max(2000).describe('What to look for.'),
  limit: z.number().int().min(1).max(20).default(5).describe('How many passages, 1–20.'),
});

function builtinTools(knowledge: KnowledgeService): BuiltinTool[] {
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

/** Field errors of a failed parse, with dotted paths under `parameters`. */
function parameterErrors(error: z.ZodError) {
  return error.issues.map((i) => ({ path: ['parameters', ...i.path.map(String)].join('.'), message: i.message }));
}

export function createToolHub(deps: { knowledge: KnowledgeService }): ToolHub {
  const tools = builtinTools(deps.knowledge);
  const descriptors: ToolDescriptor[] = tools.map((t) => ({
    toolName: t.toolName,
    action: t.action,
    description: t.description,
    inputSchema: z.toJSONSchema(t.schema, { io: 'input' }) as Record<string, unknown>,
  }));
  return {
    list: async () => descriptors,
    async call(workspaceId, toolName, action, parameters, options = {}) {
      const tool = tools.find((t) => t.toolName === toolName && t.action === action);
      if (!tool) throw new NotFoundError('Tool', `${toolName}.${action}`);
      const parsed = tool.schema.safeParse(parameters);
      if (!parsed.success) {
        const errors = parameterErrors(parsed.error);
        throw new ValidationError(`Invalid parameters for ${toolName}.${action}: ${errors.map((e) => `${e.path} ${e.message}`).join('; ')}`, errors);
      }
      return { result: await tool.run(workspaceId, parsed.data, options), isError: false };
    },
  };
}
