/** MCP tools of teams (API.md §10): the §8 rules through the same service. */
import { z } from 'zod';
import { pageInput, pageOutput } from '../../mcp/common-schemas.js';
import { defineTool, type McpFeature, READ_ONLY } from '../../mcp/tool-definition.js';
import { teamSchema } from './teams.schemas.js';

export const teamFeature: McpFeature = {
  tools: [
    defineTool({
      name: 'list_teams',
      title: 'List teams',
      description:
        'Lists the human teams of this workspace, newest first, with their members, weekly schedule and `availableNow` ' +
        '(status available, inside a weekly window in the team’s time zone or no windows, and a member available). Pass `nextCursor` back as `cursor` for more.',
      input: z.strictObject({ ...pageInput }),
      output: pageOutput(teamSchema),
      annotations: READ_ONLY,
      scope: 'read',
      run: ({ ctx, caller }, page) => ctx.services.teams.list(caller.workspaceId, page),
    }),
  ],
};
