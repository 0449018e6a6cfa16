import type { FastifyInstance, RouteOptions } from 'fastify';

type HookName = 'preParsing' | 'preValidation' | 'preHandler' | 'onSend' | 'onRequestAbort';

/**
 * Runs `attach` for every route registered afterwards whose config passes `applies`: hooks then run
 * only on the routes they serve, instead of every request checking whether they apply.
 */
export function onRoutesWhere(app: FastifyInstance, applies: (route: RouteOptions) => boolean, hooks: Partial<Record<HookName, unknown>>) {
  app.addHook('onRoute', (route) => {
    if (!applies(route)) return;
    const target = route as unknown as Record<HookName, unknown>;
    for (const [name, hook] of Object.entries(hooks) as [HookName, unknown][]) {
      const existing = target[name];
      target[name] = existing === undefined ? [hook] : [...(Array.isArray(existing) ? existing : [existing]), hook];
    }
  });
}
