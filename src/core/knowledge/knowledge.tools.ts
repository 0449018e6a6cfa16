/** MCP tools and resources of knowledge (API.md §10): the §4 rules through the same service. */
import { z } from 'zod';
import { validationErrorOf, zodFieldErrors } from '../../errors.js';
import { deletedOutput, idInput, pageInput, pageOutput } from '../../mcp/common-schemas.js';
import { defineTool, type McpFeature, READ_ONLY } from '../../mcp/tool-definition.js';
import { createSourceJsonSchema, knowledgeSourceSchema, SEARCH_MODES, searchResultSchema } from './knowledge.schemas.js';

/**
 * `add_knowledge` takes one flat object (MCP clients want an object schema, not a union); it is
 * then held to the HTTP body's own rules, so the two refuse the same things with the same words.
 */
const addKnowledgeInput = z.strictObject({
  kind: z.enum(['text', 'markdown', 'html', 'url']).default('text').describe('"url" to fetch a public web page or document; otherwise the format of `content`.'),
  name: z.string().max(200).optional().describe('A title for the source (required unless kind is "url").'),
  content: z.string().optional().describe('The document itself, for text, markdown and html.'),
  url: z.string().max(2048).optional().describe('http(s) URL on the public internet, for kind "url"; the server fetches it.'),
  personaId: z.string().min(1).nullable().optional().describe('Only this persona retrieves the source; omitted or null: every persona of the workspace.'),
  metadata: z.record(z.string(), z.unknown()).optional().describe('Free-form JSON object returned with search results and matched by `filter`.'),
});

/** How often a task of add_knowledge looks whether its source is processed. */
const PROCESSING_POLL_MS = 200;

export const knowledgeFeature: McpFeature = {
  tools: [
    defineTool({
      name: 'add_knowledge',
      title: 'Add knowledge',
      description:
        'Adds a document (text, Markdown or HTML given as `content`) or a web page (`kind: "url"`) to the knowledge base that personas answer from. ' +
        'Small documents are searchable at once (`status: "ready"`); larger ones and URLs are processed in the background (`status: "processing"`). ' +
        'A client with the tasks extension (MCP 2026-07-28) gets a task whose result is the processed source.',
      input: addKnowledgeInput,
      output: knowledgeSourceSchema,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
      scope: 'write',
      task: true,
      run: async ({ ctx, caller, signal, asTask }, args) => {
        const body = Object.fromEntries(Object.entries(args).filter(([, v]) => v !== undefined));
        const parsed = createSourceJsonSchema.safeParse(body);
        if (!parsed.success) throw validationErrorOf('arguments', zodFieldErrors(parsed.error.issues));
        let source = await ctx.services.knowledge.create(caller, parsed.data);
        // As a task, the result is the processed source (ready or failed), not the promise of one.
        while (asTask && source.status === 'processing') {
          await new Promise((resolve) => setTimeout(resolve, PROCESSING_POLL_MS));
          signal.throwIfAborted();
          source = await ctx.services.knowledge.get(caller.workspaceId, source.id);
        }
        return source;
      },
    }),
    defineTool({
      name: 'list_knowledge',
      title: 'List knowledge sources',
      description: 'Lists knowledge sources, newest first, with their processing status. Filter by `personaId` (that persona\'s private sources) or `status`.',
      input: z.strictObject({
        personaId: z.string().min(1).optional().describe("Only this persona's private sources."),
        status: z.enum(['processing', 'ready', 'failed']).optional(),
        ...pageInput,
      }),
      output: pageOutput(knowledgeSourceSchema),
      annotations: READ_ONLY,
      scope: 'read',
      run: ({ ctx, caller }, { personaId, status, ...page }) => ctx.services.knowledge.list(caller.workspaceId, page, { personaId, status }),
    }),
    defineTool({
      name: 'search_knowledge',
      title: 'Search knowledge',
      description:
        'Searches the knowledge base (hybrid keyword + vector search by default) and returns the best passages with their source; higher `score` is better. ' +
        "With `personaId`, searches what that persona sees (shared sources and its own).",
      input: z.strictObject({
        query: z.string().trim().min(1).max(2000).describe('What to look for, in free text.'),
        personaId: z.string().min(1).optional(),
        limit: z.number().int().min(1).max(50).default(5).describe('Passages, 1–50 (default 5).'),
        mode: z.enum(SEARCH_MODES).default('hybrid'),
        filter: z.record(z.string(), z.unknown()).optional().describe('Metadata fields that must equal these values (all of them).'),
      }),
      output: searchResultSchema,
      annotations: READ_ONLY,
      scope: 'read',
      run: ({ ctx, caller }, { query, ...rest }) => ctx.services.knowledge.search(caller.workspaceId, { q: query, ...rest }),
    }),
    defineTool({
      name: 'delete_knowledge',
      title: 'Delete a knowledge source',
      description: 'Deletes a knowledge source; its passages are never retrieved again.',
      input: idInput('knowledge source'),
      output: deletedOutput,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true },
      scope: 'write',
      confirm: async ({ ctx, caller }, { id }) =>
        `Delete the knowledge source "${(await ctx.services.knowledge.get(caller.workspaceId, id)).name}" (${id})? Its passages will never be retrieved again.`,
      run: async ({ ctx, caller }, { id }) => {
        await ctx.services.knowledge.delete(caller, id);
        return { id, deleted: true as const };
      },
    }),
  ],

  resources: [
    {
      name: 'knowledge',
      uriTemplate: 'switchboard://knowledge/{id}',
      title: 'Knowledge source',
      description: 'A knowledge source of this workspace (status, size, metadata) as JSON.',
      list: async ({ ctx, caller }, limit) => (await ctx.services.knowledge.list(caller.workspaceId, { limit }, {})).data,
      read: ({ ctx, caller }, id) => ctx.services.knowledge.get(caller.workspaceId, id),
    },
  ],
};
