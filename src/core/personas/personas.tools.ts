/** MCP tools, resources and prompts of personas (API.md §10): the §3 rules through the same service. */
import { z } from 'zod';
import { personaPrompt } from '../chat/prompt.js';
import { deletedOutput, idInput, pageInput, pageOutput } from '../../mcp/common-schemas.js';
import { defineTool, type McpFeature, READ_ONLY } from '../../mcp/tool-definition.js';
import { createPersonaSchema, personaSchema, personaVersionSchema, updatePersonaSchema } from './personas.schemas.js';

const personaFields =
  'A persona is an agent: `instructions` (its system prompt), `traits`, optional `model`/`temperature`/`maxTokens` overrides, and `tools` it may call ("<toolName>.<action>" or "<toolName>.*").';

export const personaFeature: McpFeature = {
  tools: [
    defineTool({
      name: 'list_personas',
      title: 'List personas',
      description: 'Lists the personas (agents) of this workspace, newest first. Use `q` to match part of a name; pass `nextCursor` back as `cursor` for more.',
      input: z.strictObject({ q: z.string().max(200).optional().describe('Case-insensitive match on the name.'), ...pageInput }),
      output: pageOutput(personaSchema),
      annotations: READ_ONLY,
      scope: 'read',
      run: ({ ctx, caller }, { q, ...page }) => ctx.services.personas.list(caller.workspaceId, page, q),
    }),
    defineTool({
      name: 'get_persona',
      title: 'Get a persona',
      description: `Returns one persona by id (per_…). ${personaFields}`,
      input: idInput('persona'),
      output: personaSchema,
      annotations: READ_ONLY,
      scope: 'read',
      run: ({ ctx, caller }, { id }) => ctx.services.personas.get(caller.workspaceId, id),
    }),
    defineTool({
      name: 'create_persona',
      title: 'Create a persona',
      description: `Creates a persona and returns it with its new id. ${personaFields} Only name and instructions are required.`,
      input: createPersonaSchema,
      output: personaSchema,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false },
      scope: 'write',
      run: ({ ctx, caller }, input) => ctx.services.personas.create(caller, input),
    }),
    defineTool({
      name: 'update_persona',
      title: 'Update a persona',
      description: `Changes any subset of a persona's fields; fields left out stay as they are, and null resets model, temperature or maxTokens to the server default. ${personaFields}`,
      input: updatePersonaSchema.extend({ id: z.string().min(1).max(64).describe("The persona's id.") }),
      output: personaSchema,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true },
      scope: 'write',
      run: ({ ctx, caller }, { id, ...patch }) => ctx.services.personas.update(caller, id, patch),
    }),
    defineTool({
      name: 'delete_persona',
      title: 'Delete a persona',
      description: 'Deletes a persona for good, with its private knowledge sources. Sessions with it stay readable.',
      input: idInput('persona'),
      output: deletedOutput,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true },
      scope: 'write',
      confirm: async ({ ctx, caller }, { id }) =>
        `Delete the persona "${(await ctx.services.personas.get(caller.workspaceId, id)).name}" (${id}) for good, with its private knowledge sources?`,
      run: async ({ ctx, caller }, { id }) => {
        await ctx.services.personas.delete(caller, id);
        return { id, deleted: true as const };
      },
    }),
    defineTool({
      name: 'list_persona_versions',
      title: "List a persona's versions",
      description:
        "Lists a persona's versions, newest first: version 1 is its creation and each change to its fields adds one, with who made it (createdBy, an API key id) and when. " +
        'Pass `nextCursor` back as `cursor` for more. An A/B test may pit two versions against each other: `per_…@3` names version 3.',
      input: z.strictObject({ id: z.string().min(1).max(64).describe("The persona's id."), ...pageInput }),
      output: pageOutput(personaVersionSchema),
      annotations: READ_ONLY,
      scope: 'read',
      run: ({ ctx, caller }, { id, ...page }) => ctx.services.personas.versions(caller.workspaceId, id, page),
    }),
    defineTool({
      name: 'restore_persona_version',
      title: 'Restore a persona version',
      description: "Makes an earlier version's fields current again, as a new version (the history is kept), and returns the persona. Nothing changes when they already are current.",
      input: z.strictObject({ id: z.string().min(1).max(64).describe("The persona's id."), version: z.number().int().min(1).describe('The version to restore.') }),
      output: personaSchema,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true },
      scope: 'write',
      confirm: async ({ ctx, caller }, { id, version }) =>
        `Make version ${version} of the persona "${(await ctx.services.personas.get(caller.workspaceId, id)).name}" (${id}) current again? Every answer from now on uses it.`,
      run: ({ ctx, caller }, { id, version }) => ctx.services.personas.restore(caller, id, version),
    }),
  ],

  resources: [
    {
      name: 'persona',
      uriTemplate: 'switchboard://personas/{id}',
      title: 'Persona',
      description: 'A persona (agent) of this workspace as JSON.',
      list: async ({ ctx, caller }, limit) => (await ctx.services.personas.list(caller.workspaceId, { limit })).data,
      read: ({ ctx, caller }, id) => ctx.services.personas.get(caller.workspaceId, id),
    },
  ],

  prompts: {
    arguments: [{ name: 'question', description: 'Optional first question to put to the persona.' }],
    async list({ ctx, caller }) {
      const { data } = await ctx.services.personas.list(caller.workspaceId, { limit: 100 });
      return data.map((p) => ({ name: p.id, title: p.name, description: `Talk as ${p.name}: its instructions and traits as a system prompt.` }));
    },
    async get({ ctx, caller }, name, args) {
      const persona = await ctx.services.personas.get(caller.workspaceId, name);
      const messages: Array<{ role: 'user' | 'assistant'; text: string }> = [{ role: 'user', text: personaPrompt(persona).join('\n\n') }];
      if (args.question) messages.push({ role: 'user', text: args.question });
      return { description: `${persona.name}: ${persona.instructions.slice(0, 200)}`, messages };
    },
  },
};
