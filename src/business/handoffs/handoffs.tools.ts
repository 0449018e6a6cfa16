/** MCP tools of human handoff (issue 29): an assistant can work the team's queue, through the same service as the HTTP routes. */
import { z } from 'zod';
import { idInput, pageInput, pageOutput } from '../../mcp/common-schemas.js';
import { defineTool, type McpFeature, READ_ONLY } from '../../mcp/tool-definition.js';
import { acceptSchema, endSchema, handoffDetailSchema, handoffMessageSchema, handoffSchema, listHandoffsInputSchema, replySchema } from './handoffs.schemas.js';

/** As the HTTP routes that work a handoff (handoffs.routes.ts): an agent works them; a read-only key cannot, a write key can. */
const AGENT = 'agent' as const;
const id = { id: z.string().min(1).max(64).describe("The handoff's id (hnd_…).") };
const acting =
  'You act as yourself (the person behind the key or grant); naming another `member` (e-mail or user id) needs `admin`. A key that belongs to no person names the member it acts as.';

export const handoffFeature: McpFeature = {
  tools: [
    defineTool({
      name: 'list_handoffs',
      title: 'List handoffs',
      description:
        'Lists conversations handed to people of a team, newest first: `status` queued (nobody available) or offered (to `member`) are waiting; accepted ones are being answered by `member`. Filter by `status` (one or several), `teamId` or `member`.',
      input: listHandoffsInputSchema.extend(pageInput),
      output: pageOutput(handoffSchema),
      annotations: READ_ONLY,
      scope: 'read',
      run: ({ ctx, caller }, { status, teamId, member, ...page }) => ctx.services.handoffs.list(caller, page, { status, teamId, member }),
    }),
    defineTool({
      name: 'get_handoff',
      title: 'Get a handoff',
      description: 'Returns a handoff with the conversation so far (the latest 50 messages): the user’s, the persona’s, notices (`author: "system"`) and people’s replies (`author: "human:<email>"`).',
      input: idInput('handoff'),
      output: handoffDetailSchema,
      annotations: READ_ONLY,
      scope: 'read',
      run: ({ ctx, caller }, { id }) => ctx.services.handoffs.get(caller, id),
    }),
    defineTool({
      name: 'accept_handoff',
      title: 'Accept a handoff',
      description: `Takes a waiting conversation (queued or offered) for a member; if another member took it first, the error names them. The user is told a person joined. ${acting}`,
      input: acceptSchema.extend(id),
      output: handoffSchema,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false },
      scope: AGENT,
      run: ({ ctx, caller }, { id, member }) => ctx.services.handoffs.accept(caller, id, member),
    }),
    defineTool({
      name: 'reply_to_handoff',
      title: 'Reply in a handed-off conversation',
      description: `Sends the user a reply as the member who accepted the handoff; it joins the conversation marked as from a person. ${acting}`,
      input: replySchema.extend(id),
      output: handoffMessageSchema,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
      scope: AGENT,
      run: ({ ctx, caller }, { id, member, text }) => ctx.services.handoffs.reply(caller, id, member, text),
    }),
    defineTool({
      name: 'return_handoff',
      title: 'Hand a conversation back',
      description: `Ends a handoff: \`resolve: false\` (default) hands the conversation back to the persona, which answers again with the person's messages in its history; \`resolve: true\` closes it as resolved. ${acting}`,
      input: endSchema.extend({ ...id, resolve: z.boolean().default(false).describe('Close it as resolved instead of handing it back.') }),
      output: handoffSchema,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false },
      scope: AGENT,
      run: ({ ctx, caller }, { id, member, resolve }) => ctx.services.handoffs.end(caller, id, resolve ? 'resolved' : 'returned', member),
    }),
  ],
};
