/** MCP tools and the results resource of A/B tests (API.md §10), through the same service as §8. */
import { idInput } from '../../mcp/common-schemas.js';
import { defineTool, type McpFeature, READ_ONLY } from '../../mcp/tool-definition.js';
import { abTestResultsSchema, abTestSchema, createAbTestSchema, promoteAbTestSchema } from './ab-tests.schemas.js';

const transition = { readOnlyHint: false, destructiveHint: false, idempotentHint: false };

export const abTestFeature: McpFeature = {
  tools: [
    defineTool({
      name: 'create_ab_test',
      title: 'Create an A/B test',
      description:
        'Creates an A/B test (a draft) between two different personas of this workspace, or two versions of one (`per_…@3` names version 3). `trafficSplit` (0–1, default 0.5) is the share of conversations sent to persona A. ' +
        '`guardrails` (maxErrorRate, maxP95LatencyMs, minSatisfaction) are limits B must keep: the test stops itself when B breaks one with sequential evidence. ' +
        'Start it with start_ab_test; questions then go to the test id (abTestId) and each user sticks to one variant.',
      input: createAbTestSchema,
      output: abTestSchema,
      annotations: transition,
      scope: 'write',
      run: ({ ctx, caller }, input) => ctx.services.abTests.create(caller, input),
    }),
    defineTool({
      name: 'start_ab_test',
      title: 'Start an A/B test',
      description: 'Starts a draft A/B test so it routes questions; a test that is not a draft cannot start.',
      input: idInput('A/B test'),
      output: abTestSchema,
      annotations: transition,
      scope: 'write',
      run: ({ ctx, caller }, { id }) => ctx.services.abTests.start(caller, id),
    }),
    defineTool({
      name: 'stop_ab_test',
      title: 'Stop an A/B test',
      description: 'Stops a running A/B test (it becomes completed and routes nothing more); its results stay readable.',
      input: idInput('A/B test'),
      output: abTestSchema,
      annotations: transition,
      scope: 'write',
      run: ({ ctx, caller }, { id }) => ctx.services.abTests.stop(caller, id),
    }),
    defineTool({
      name: 'get_ab_test_results',
      title: 'Get A/B test results',
      description:
        "Per variant: conversations, answers, satisfaction (average rating, count, 95 % interval) and response time; Welch's t-test on the ratings " +
        '(pValue null until each side has 2 ratings, significant at p < 0.05, a winner only when significant with at least 10 ratings each; valid only read once at a fixed horizon); ' +
        '`sequential`: the always-valid p-value and confidence sequence for B − A (mixture SPRT), safe to read at any time; and each guardrail with whether B broke it.',
      input: idInput('A/B test'),
      output: abTestResultsSchema,
      annotations: READ_ONLY,
      scope: 'read',
      run: ({ ctx, caller }, { id }) => ctx.services.abTests.results(caller.workspaceId, id),
    }),
    defineTool({
      name: 'promote_ab_test',
      title: 'Promote an A/B test winner',
      description:
        "Makes a finished A/B test's winner current: a pinned version is restored as its persona's current version, channels routed through the test move to the winner, and new conversations through the test go to it. " +
        '`variant` defaults to the sequential winner (an error when there is none).',
      input: promoteAbTestSchema.extend(idInput('A/B test').shape),
      output: abTestSchema,
      annotations: transition,
      scope: 'write',
      confirm: async ({ ctx, caller }, { id, variant }) => {
        const test = await ctx.services.abTests.get(caller.workspaceId, id);
        return `Promote ${variant ? `variant ${variant}` : 'the winner'} of "${test.name}" (${id}), making it the current persona version?`;
      },
      run: ({ ctx, caller }, { id, variant }) => ctx.services.abTests.promote(caller, id, variant),
    }),
  ],

  resources: [
    {
      name: 'ab-test-results',
      uriTemplate: 'switchboard://ab-tests/{id}/results',
      title: 'A/B test results',
      description: "An A/B test's results per variant and its significance, as JSON.",
      list: async ({ ctx, caller }, limit) => (await ctx.services.abTests.list(caller.workspaceId, { limit })).data,
      read: ({ ctx, caller }, id) => ctx.services.abTests.results(caller.workspaceId, id),
    },
  ],
};

