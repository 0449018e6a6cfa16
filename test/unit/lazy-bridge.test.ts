/**
 * bridges/lazy.ts: a platform bridge whose module is imported when its channel first needs it. The
 * loaded "platform" here is a recording bridge; the real Slack and Discord bridges run behind the
 * same loader in test/e2e/channels-*.test.ts.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { BridgeFactory, BridgeOptions, ChannelBridge, SlackCredentials } from '../../bridges/bridge.js';
import { lazyBridge } from '../../bridges/lazy.js';

interface Recorded {
  built: number;
  calls: string[];
}

function recordingFactory(rec: Recorded, options: { failStart?: string; http?: boolean } = {}): BridgeFactory<SlackCredentials> {
  return () => {
    rec.built += 1;
    const bridge: ChannelBridge = {
      async start() {
        rec.calls.push('start');
        if (options.failStart) throw new Error(options.failStart);
      },
      async stop() {
        rec.calls.push('stop');
      },
      async send(message) {
        rec.calls.push(`send ${message.text}`);
        return { externalId: 'x1' };
      },
      reply() {
        rec.calls.push('reply');
        return { progress() {}, finish: async () => [], fail: async () => {} };
      },
      ...(options.http ? { handleHttp: async () => ({ status: 200, body: 'ok' }) } : {}),
    };
    return bridge;
  };
}

function optionsOf(credentials: SlackCredentials): BridgeOptions<SlackCredentials> {
  const settings = { respondTo: 'mentions' as const, replyInThread: true, allowedConversations: [], enabled: true, streaming: true, feedbackButtons: true, statusMessages: [], suggestedPrompts: [] };
  return {
    channelId: 'chn_1',
    credentials,
    settings: () => settings,
    apiUrl: undefined,
    events: { onMessage: async () => {}, onReaction: async () => {}, onStatus: () => {} },
    logger: pino({ level: 'silent' }),
  };
}

function deferred<T>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe('lazy bridges', () => {
  it('imports nothing until the channel starts, then builds one bridge and hands it every call', async () => {
    const rec: Recorded = { built: 0, calls: [] };
    let loads = 0;
    const factory = lazyBridge({ load: async () => (loads++, recordingFactory(rec)) });
    const bridge = factory(optionsOf({ botToken: 'xoxb-1', appToken: 'xapp-1' }));
    expect(loads).toBe(0);
    expect(() => bridge.reply({})).toThrow('has not started');
    await bridge.start();
    expect(await bridge.send({ to: 'C1', text: 'hi', priority: 'normal' })).toEqual({ externalId: 'x1' });
    bridge.reply({});
    await bridge.start(); // a retry after a failure starts the same bridge again
    await bridge.stop();
    expect(loads).toBe(1);
    expect(rec).toEqual({ built: 1, calls: ['start', 'send hi', 'reply', 'start', 'stop'] });
  });

  it('a failed import rejects start() with its error and is tried again at the next start', async () => {
    const rec: Recorded = { built: 0, calls: [] };
    let attempts = 0;
    const factory = lazyBridge({
      load: async () => {
        attempts += 1;
        if (attempts === 1) throw new Error('Cannot find module');
        return recordingFactory(rec);
      },
    });
    const bridge = factory(optionsOf({ botToken: 'xoxb-1' }));
    await expect(bridge.start()).rejects.toThrow('Cannot find module');
    await bridge.start();
    expect(attempts).toBe(2);
    expect(rec.calls).toEqual(['start']);
  });

  it("a refused start rejects with the real bridge's reason", async () => {
    const rec: Recorded = { built: 0, calls: [] };
    const bridge = lazyBridge({ load: async () => recordingFactory(rec, { failStart: 'Slack rejected the bot token (invalid_auth)' }) })(optionsOf({ botToken: 'xoxb-1' }));
    await expect(bridge.start()).rejects.toThrow('Slack rejected the bot token (invalid_auth)');
  });

  it('stopped while its module loads: the real bridge never starts, and start() rejects', async () => {
    const rec: Recorded = { built: 0, calls: [] };
    const gate = deferred<void>();
    const bridge = lazyBridge({
      load: async () => {
        await gate.promise;
        return recordingFactory(rec);
      },
    })(optionsOf({ botToken: 'xoxb-1' }));
    const starting = bridge.start();
    const stopping = bridge.stop();
    gate.resolve();
    await expect(starting).rejects.toThrow('stopped before it started');
    await stopping;
    expect(rec.calls).toEqual(['stop']);
  });

  it('stop() of a bridge that never started imports nothing', async () => {
    let loads = 0;
    const bridge = lazyBridge({ load: async () => (loads++, recordingFactory({ built: 0, calls: [] })) })(optionsOf({ botToken: 'xoxb-1' }));
    await bridge.stop();
    expect(loads).toBe(0);
  });

  it('offers handleHttp only for credentials that receive Events API deliveries, loading on the first one', async () => {
    const rec: Recorded = { built: 0, calls: [] };
    const factory = lazyBridge({ load: async () => recordingFactory(rec, { http: true }), receivesHttp: (c) => !c.appToken });
    expect(factory(optionsOf({ botToken: 'xoxb-1', appToken: 'xapp-1' })).handleHttp).toBeUndefined();
    const events = factory(optionsOf({ botToken: 'xoxb-1', signingSecret: 's' }));
    expect(await events.handleHttp!({ rawBody: Buffer.from('{}'), headers: {} })).toEqual({ status: 200, body: 'ok' });
    expect(rec.built).toBe(1);
  });
});
