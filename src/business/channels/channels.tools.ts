/**
 * Channel tools: `<type>.send_message` in the tool hub (API.md §7), so a persona or
 * `POST /api/mcp/tools/execute` can post to a connected channel; and the MCP server's
 * `send_channel_message` and `list_channels` (API.md §10).
 */
import { z } from 'zod';
import type { BuiltinTool } from '../../core/tools/builtin-tools.js';
import { pageInput, pageOutput } from '../../mcp/common-schemas.js';
import { defineTool, type McpFeature, READ_ONLY } from '../../mcp/tool-definition.js';
import { channelSchema, sendResultSchema, sendSchema } from './channels.schemas.js';
import type { ChannelService } from './channels.service.js';

const PLATFORM = { slack: 'Slack', discord: 'Discord', webhook: 'webhook' } as const;
const CONVERSATION = { slack: 'Slack channel id (C…)', discord: 'Discord channel id', webhook: 'webhook conversationId' } as const;

const sendMessageSchema = (type: keyof typeof PLATFORM) =>
  z.strictObject({
    channel: z.string().min(1).max(300).describe(`The ${CONVERSATION[type]}; when several ${PLATFORM[type]} channels are connected, "<channel name>/<conversation>".`),
    message: z.string().min(1).max(32_000),
    priority: z.enum(['low', 'normal', 'high']).default('normal').describe('`high` goes ahead of queued sends and is marked for the reader.'),
  });

/** The hub's built-in `slack`, `discord` and `webhook` tools, present while such a channel is enabled. */
export function channelHubTools(channels: ChannelService): BuiltinTool[] {
  return (['slack', 'discord', 'webhook'] as const).map((type) => {
    const schema = sendMessageSchema(type);
    return {
      toolName: type,
      action: 'send_message',
      description: `Posts a message to a ${PLATFORM[type]} conversation through this workspace's connected ${PLATFORM[type]} channel.`,
      schema: schema as z.ZodType<Record<string, unknown>>,
      available: (workspaceId) => channels.hasType(workspaceId, type),
      run: (workspaceId, parameters) => channels.sendByType(workspaceId, type, parameters as z.infer<typeof schema>),
    };
  });
}

export const channelFeature: McpFeature = {
  tools: [
    defineTool({
      name: 'list_channels',
      title: 'List channels',
      description: 'Lists the Slack, Discord and webhook channels of this workspace with their status, persona or A/B test, and settings (never credentials).',
      input: z.strictObject({ type: z.enum(['slack', 'discord', 'webhook']).optional(), ...pageInput }),
      output: pageOutput(channelSchema),
      annotations: READ_ONLY,
      scope: 'read',
      run: ({ ctx, caller }, { type, ...page }) => ctx.services.channels.list(caller.workspaceId, page, type),
    }),
    defineTool({
      name: 'send_channel_message',
      title: 'Send a channel message',
      description:
        'Posts a message to a conversation of a connected channel (list_channels finds its id): a Slack channel id, a Discord channel id or a webhook conversationId as `to`, optionally in a thread (`threadId`).',
      input: sendSchema.extend({ channelId: z.string().min(1).max(64).describe('The channel (chn_…).') }),
      output: sendResultSchema,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
      scope: 'write',
      run: ({ ctx, caller }, { channelId, ...message }) => ctx.services.channels.send(caller.workspaceId, channelId, message, undefined, undefined, caller),
    }),
  ],
};
