/**
 * What the MCP server offers: one entry per feature, each defined in its own `<feature>.tools.ts`.
 * A feature that lands adds its line here; `server.ts` serves whatever this lists.
 */
import { abTestFeature } from '../business/ab-tests/ab-tests.tools.js';
import { channelFeature } from '../business/channels/channels.tools.js';
import { analyticsFeature } from '../business/analytics/analytics.tools.js';
import { evaluationFeature } from '../business/evaluations/evaluations.tools.js';
import { handoffFeature } from '../business/handoffs/handoffs.tools.js';
import { chatFeature } from '../core/chat/chat.tools.js';
import { knowledgeFeature } from '../core/knowledge/knowledge.tools.js';
import { personaFeature } from '../core/personas/personas.tools.js';
import { teamFeature } from '../business/teams/teams.tools.js';
import { auditFeature } from '../core/audit/audit.tools.js';
import { membersFeature } from '../core/people/members.tools.js';
import type { McpFeature } from './tool-definition.js';

export const MCP_FEATURES: McpFeature[] = [personaFeature, knowledgeFeature, chatFeature, teamFeature, abTestFeature, analyticsFeature, evaluationFeature, handoffFeature, channelFeature, membersFeature, auditFeature];
