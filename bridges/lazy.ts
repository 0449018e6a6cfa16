/**
 * A bridge whose platform module is imported when its channel first starts. `@slack/bolt` and
 * `discord.js` each took ~0.3 s and ~20 MB to import, which every start-up paid with no channel of
 * their type (issue 23); a server with such a channel still imports it at start-up, from `start()`.
 */
import type { BridgeFactory, BridgeOptions, ChannelBridge, ReplyWriter } from './bridge.js';

export interface LazyBridgeOptions<C> {
  /** Imports the platform module and answers its factory. */
  load: () => Promise<BridgeFactory<C>>;
  /** Whether the bridge these credentials build takes Events API deliveries (`handleHttp`). */
  receivesHttp?: (credentials: C) => boolean;
}

/**
 * A factory for bridges that import their platform on first need (`start`, `send`, an inbound
 * delivery) and then hand every call to the real one. A failed import or constructor rejects that
 * call (so `start()` fails and the channel shows `error` with the reason) and is tried again at the
 * next one.
 */
export function lazyBridge<C>(options: LazyBridgeOptions<C>): BridgeFactory<C> {
  return (bridgeOptions: BridgeOptions<C>): ChannelBridge => {
    let loading: Promise<ChannelBridge> | undefined;
    let bridge: ChannelBridge | undefined;
    let stopped = false;
    const real = (): Promise<ChannelBridge> => {
      if (!loading) {
        loading = options.load().then((factory) => (bridge = factory(bridgeOptions)));
        loading.catch(() => (loading = undefined));
      }
      return loading;
    };
    const receivesHttp = options.receivesHttp?.(bridgeOptions.credentials) ?? false;
    return {
      async start() {
        stopped = false;
        const started = await real();
        // stop() came while the module loaded: the real bridge never starts (as if stopped during its own start).
        if (stopped) throw new Error('The channel was stopped before it started.');
        await started.start();
      },
      async stop() {
        stopped = true;
        if (!loading) return;
        const started = await loading.catch(() => undefined);
        await started?.stop();
      },
      send: async (message) => (await real()).send(message),
      reply(target): ReplyWriter {
        // Replies answer messages the real bridge delivered, so it exists by then.
        if (!bridge) throw new Error('The channel has not started.');
        return bridge.reply(target);
      },
      ...(receivesHttp
        ? {
            async handleHttp(request) {
              const started = await real();
              if (!started.handleHttp) throw new Error('This channel takes no Events API deliveries.');
              return started.handleHttp(request);
            },
          }
        : {}),
    };
  };
}
