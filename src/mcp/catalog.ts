/**
 * What the MCP server offers: one entry per feature, each defined in its own `<feature>.tools.ts`.
 * A feature that lands adds its line here; `server.ts` serves whatever this lists.
 */
import { chatFeature } from '../core/chat/chat.tools.js';
import { knowledgeFeature } from '../core/knowledge/knowledge.tools.js';
import { personaFeature } from '../core/personas/personas.tools.js';
import type { McpFeature } from './tool-definition.js';

export const MCP_FEATURES: McpFeature[] = [personaFeature, knowledgeFeature, chatFeature];
