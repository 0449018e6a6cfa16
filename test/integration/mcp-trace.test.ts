// Issue 27, item 2: a W3C trace context in a tool call's `_meta` (`traceparent`) joins every log line
// the call writes, whichever module writes it, through the SDK's own Client over InMemoryTransport.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { logContext, traceFields, withLogContext } from '../../src/lib/log-context.js';
import { createMcpServer } from '../../src/mcp/server.js';
import { defineTool, type McpFeature } from '../../src/mcp/tool-definition.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { captureLogs } from '../helpers/mcp-tools.js';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN_ID = '00f067aa0ba902b7';
const TRACEPARENT = `00-${TRACE_ID}-${SPAN_ID}-01`;

/** Two tools that write log lines: one through the app's logger as it works, one by failing unexpectedly. */
const feature: McpFeature = {
  tools: [
    defineTool({
      name: 'note',
      title: 'Note',
      description: 'Writes a log line, after an await.',
      input: z.object({ text: z.string() }),
      output: z.object({ ok: z.boolean() }),
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true },
      scope: 'read',
      async run({ ctx }, { text }) {
        await new Promise((resolve) => setImmediate(resolve));
        ctx.logger.info({ text }, 'noted');
        return { ok: true };
      },
    }),
    defineTool({
      name: 'fail',
      title: 'Fail',
      description: 'Fails with an unexpected error.',
      input: z.object({}),
      output: z.object({ ok: z.boolean() }),
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true },
      scope: 'read',
      async run() {
        throw new Error('boom');
      },
    }),
  ],
};

describe('MCP tool calls carry the caller’s trace context into their logs', () => {
  let t: TestApp;
  let client: Client;
  const logs = captureLogs();
  const lines = () =>
    logs
      .text()
      .split('\n')
      .filter((l) => l.length > 0)
      .map((l) => JSON.parse(l) as Record<string, unknown>);

  beforeAll(async () => {
    t = await createTestApp({ overrides: { logger: logs.logger } });
    const actor = (await t.ctx.services.auth.authenticate(t.adminKey))!;
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await createMcpServer(t.ctx, actor, [feature]).connect(serverSide);
    client = new Client({ name: 'trace-test', version: '1.0.0' });
    await client.connect(clientSide);
  });
  afterAll(async () => {
    await client?.close();
    await t?.close();
  });

  it('adds trace_id, span_id and trace_flags to the lines a call writes, and to its failure', async () => {
    await client.callTool({ name: 'note', arguments: { text: 'traced' }, _meta: { traceparent: TRACEPARENT } });
    const failed = await client.callTool({ name: 'fail', arguments: {}, _meta: { traceparent: TRACEPARENT } });
    expect(failed.isError).toBe(true);
    const trace = { trace_id: TRACE_ID, span_id: SPAN_ID, trace_flags: '01' };
    expect(lines().find((l) => l.text === 'traced')).toMatchObject({ msg: 'noted', ...trace });
    expect(lines().find((l) => l.msg === 'MCP request failed')).toMatchObject({ what: 'fail', ...trace });
  });

  it('adds nothing without a trace context or with an invalid one, and the call still succeeds', async () => {
    await client.callTool({ name: 'note', arguments: { text: 'untraced' } });
    const bad = await client.callTool({ name: 'note', arguments: { text: 'badly traced' }, _meta: { traceparent: `ff-${TRACE_ID}-${SPAN_ID}-01` } });
    expect(bad.isError ?? false).toBe(false);
    for (const text of ['untraced', 'badly traced']) {
      const line = lines().find((l) => l.text === text);
      expect(line?.msg).toBe('noted');
      expect(line).not.toHaveProperty('trace_id');
    }
  });
});

describe('traceFields', () => {
  it('reads a valid traceparent and refuses malformed ones', () => {
    expect(traceFields(TRACEPARENT)).toEqual({ trace_id: TRACE_ID, span_id: SPAN_ID, trace_flags: '01' });
    // A later version may carry more fields after the four it shares with version 00.
    expect(traceFields(`01-${TRACE_ID}-${SPAN_ID}-00-more`)).toEqual({ trace_id: TRACE_ID, span_id: SPAN_ID, trace_flags: '00' });
    for (const bad of [
      undefined,
      42,
      '',
      `ff-${TRACE_ID}-${SPAN_ID}-01`, // version ff
      `00-${TRACE_ID}-${SPAN_ID}-01-more`, // version 00 has four fields
      `00-${'0'.repeat(32)}-${SPAN_ID}-01`, // all-zero trace id
      `00-${TRACE_ID}-${'0'.repeat(16)}-01`, // all-zero span id
      `00-${TRACE_ID.toUpperCase()}-${SPAN_ID}-01`, // upper case
      `00-${TRACE_ID.slice(1)}-${SPAN_ID}-01`, // short trace id
    ]) {
      expect(traceFields(bad), String(bad)).toBeUndefined();
    }
  });

  it('keeps a context’s fields across awaits, adds nested ones, and drops them after', async () => {
    expect(logContext()).toEqual({});
    await withLogContext({ a: '1' }, async () => {
      await new Promise((resolve) => setTimeout(resolve, 1));
      expect(logContext()).toEqual({ a: '1' });
      withLogContext({ b: '2' }, () => expect(logContext()).toEqual({ a: '1', b: '2' }));
      expect(logContext()).toEqual({ a: '1' });
    });
    expect(logContext()).toEqual({});
  });
});
