/**
 * A/B tests between two personas or two versions of one (API.md §8): draft → running → completed,
 * sticky assignment by hashing, results that decide with Welch's t-test on the ratings and, safe to
 * read at any time, the mixture sequential probability ratio test (sequential.ts); guardrails B
 * must keep, checked with sequential evidence; and promotion of the winner.
 */
import crypto from 'node:crypto';
import { type Actor, systemActor } from '../../core/auth/actor.js';
import { auditRow } from '../../core/audit/audit.js';
import type { AbTestRow } from '../../db/schema.js';
import { ConflictError, NotFoundError, ValidationError } from '../../errors.js';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import { mapPage, type Page, type PageRequest } from '../../lib/pagination.js';
import { formatPersonaRef, parsePersonaRef, type PersonaRef, type PersonaService } from '../../core/personas/personas.service.js';
import type { AbTest, AbTestResults, CreateAbTestInput, Guardrails, Variant } from './ab-tests.schemas.js';
import type { AbTestStore } from './ab-tests.store.js';
import { breaches, createMeanSequence, createTwoSampleSequence } from './sequential.js';
import { confidenceInterval95, moments, percentile, welchTest } from './stats.js';

/** Ratings each variant needs before a winner is named (API.md §8). */
const WINNER_MIN_RATINGS = 10;
const SIGNIFICANCE_LEVEL = 0.05;

/** The persona (and version, when pinned) that answers a variant. */
export function refOf(row: AbTestRow, variant: Variant): PersonaRef {
  const [personaId, version] = variant === 'A' ? [row.persona_a, row.version_a] : [row.persona_b, row.version_b];
  return version === null ? { personaId } : { personaId, version };
}

/** The share of B's answers a p95 limit lets exceed it. */
const P95_SHARE = 0.05;

export function toAbTest(row: AbTestRow): AbTest {
  return {
    id: row.id,
    name: row.name,
    personaA: formatPersonaRef(refOf(row, 'A')),
    personaB: formatPersonaRef(refOf(row, 'B')),
    trafficSplit: row.traffic_split,
    status: row.status,
    guardrails: JSON.parse(row.guardrails) as Guardrails,
    stopReason: row.stop_reason,
    promoted: row.promoted,
    promotedAt: row.promoted_at,
    createdAt: row.created_at,
    startedAt: row.started_at,
    endedAt: row.ended_at,
  };
}

/**
 * The variant of `key` (a user id, else a session id) in a test: a uniform number from the hash of
 * (test, key) against the split. The same key always lands on the same side, and over many keys
 * the share of A follows `trafficSplit`.
 */
export function assignVariant(testId: string, key: string, trafficSplit: number): Variant {
  const digest = crypto.createHash('sha256').update(`${testId}\u0000${key}`).digest();
  return digest.readUInt32BE(0) / 2 ** 32 < trafficSplit ? 'A' : 'B';
}

/** Told when a test's winner is promoted: features that route to the test move to the winner. */
export type PromotionHook = (workspaceId: string, testId: string, winner: PersonaRef) => Promise<void>;

export interface AbTestServiceDeps {
  store: AbTestStore;
  personas: PersonaService;
  clock: Clock;
  ids: IdGenerator;
}

/** A column's API name (`started_at` → `startedAt`), for audit events' `changes`. */
const camel = (column: string) => column.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

export function createAbTestService({ store, personas, clock, ids }: AbTestServiceDeps) {
  const promotionHooks: PromotionHook[] = [];

  /** The persona a variant names (404 naming the field when it, or its version, does not exist). */
  async function resolve(workspaceId: string, ref: PersonaRef, field: string) {
    try {
      return await personas.getAt(workspaceId, ref.personaId, ref.version);
    } catch (err) {
      if (err instanceof NotFoundError) throw new NotFoundError(field === 'personaA' ? 'Persona (personaA)' : 'Persona (personaB)', formatPersonaRef(ref));
      throw err;
    }
  }

  async function find(workspaceId: string, id: string): Promise<AbTestRow> {
    const row = await store.find(workspaceId, id);
    if (!row) throw new NotFoundError('A/B test', id);
    return row;
  }

  /** Moves a test on, or 409 naming where it stands. */
  async function transition(actor: Actor, id: string, from: AbTestRow['status'], to: AbTestRow['status'], verb: 'start' | 'stop', stopReason = 'manual') {
    const workspaceId = actor.workspaceId;
    const row = await find(workspaceId, id);
    const refuse = (status: string) => new ConflictError(`A/B test ${id} is ${status}; only a ${from} test can ${verb}.`);
    if (row.status !== from) throw refuse(row.status);
    const now = clock.now().toISOString();
    const patch = to === 'running' ? { status: to, started_at: now } : { status: to, ended_at: now, stop_reason: stopReason };
    const event = auditRow(ids, clock, actor, { action: `ab_test.${verb}`, target: { type: 'ab_test', id }, changes: Object.keys(patch).map(camel) });
    if (!(await store.transition(workspaceId, id, from, patch, event))) throw refuse((await find(workspaceId, id)).status);
    return toAbTest({ ...row, ...patch });
  }

  return {
    async create(actor: Actor, input: CreateAbTestInput): Promise<AbTest> {
      const workspaceId = actor.workspaceId;
      const a = parsePersonaRef(input.personaA);
      const b = parsePersonaRef(input.personaB);
      const [pa, pb] = [await resolve(workspaceId, a, 'personaA'), await resolve(workspaceId, b, 'personaB')];
      // The same persona twice must differ in what answers: two versions, or a pinned one that is not the current one now.
      if (pa.id === pb.id && pa.version === pb.version) {
        throw ValidationError.field('personaB', 'must be a different persona, or a different version of it, from personaA');
      }
      const row: AbTestRow = {
        id: ids('abt'),
        workspace_id: workspaceId,
        name: input.name,
        persona_a: a.personaId,
        persona_b: b.personaId,
        version_a: a.version ?? null,
        version_b: b.version ?? null,
        traffic_split: input.trafficSplit,
        status: 'draft',
        guardrails: JSON.stringify(input.guardrails),
        stop_reason: null,
        promoted: null,
        promoted_at: null,
        created_at: clock.now().toISOString(),
        started_at: null,
        ended_at: null,
      };
      await store.insert(row, auditRow(ids, clock, actor, { action: 'ab_test.create', target: { type: 'ab_test', id: row.id } }));
      return toAbTest(row);
    },

    async list(workspaceId: string, page: PageRequest, status?: AbTestRow['status']): Promise<Page<AbTest>> {
      return mapPage(await store.list(workspaceId, page, status), toAbTest);
    },

    get: async (workspaceId: string, id: string): Promise<AbTest> => toAbTest(await find(workspaceId, id)),

    async start(actor: Actor, id: string): Promise<AbTest> {
      const workspaceId = actor.workspaceId;
      const row = await find(workspaceId, id);
      for (const ref of [refOf(row, 'A'), refOf(row, 'B')]) {
        await personas.getAt(workspaceId, ref.personaId, ref.version).catch(() => {
          throw new ConflictError(`A/B test ${id} cannot start: its persona ${formatPersonaRef(ref)} was deleted.`);
        });
      }
      return transition(actor, id, 'draft', 'running', 'start');
    },

    stop: (actor: Actor, id: string): Promise<AbTest> => transition(actor, id, 'running', 'completed', 'stop'),

    /**
     * Which persona answers: for a new conversation the variant `key` hashes to, for a session that
     * already belongs to the test its recorded variant. Only a running test routes (else 409).
     */
    async route(workspaceId: string, id: string, pick: { key: string } | { variant: Variant }): Promise<PersonaRef & { variant: Variant }> {
      const row = await find(workspaceId, id);
      if (row.status !== 'running' && row.promoted === null) {
        throw new ConflictError(`A/B test ${id} is ${row.status}; only a running or promoted test routes questions.`);
      }
      // Promoted: new conversations go to the winner; a session keeps the variant it had.
      const variant = 'variant' in pick ? pick.variant : (row.promoted ?? assignVariant(row.id, pick.key, row.traffic_split));
      return { ...refOf(row, variant), variant };
    },

    /** Lets a feature move what routes to a test over to its winner when it is promoted. */
    onPromote(hook: PromotionHook): void {
      promotionHooks.push(hook);
    },

    /**
     * Makes a finished test's winner current: a pinned version is restored as its persona's current
     * version, whatever routes to the test moves to the winner's persona, and new conversations
     * through the test go to the winner. `variant` defaults to the sequential test's winner.
     */
    async promote(actor: Actor, id: string, variant: Variant | undefined): Promise<AbTest> {
      const workspaceId = actor.workspaceId;
      const row = await find(workspaceId, id);
      if (row.status !== 'completed') throw new ConflictError(`A/B test ${id} is ${row.status}; stop it before promoting a variant.`);
      if (row.promoted !== null) throw new ConflictError(`A/B test ${id} already promoted variant ${row.promoted}.`);
      const chosen = variant ?? (await evidence(workspaceId, row)).sequential.winner;
      if (chosen === null) throw new ConflictError(`A/B test ${id} has no winner with sequential evidence; name the variant to promote.`);
      const winner = refOf(row, chosen);
      const now = clock.now().toISOString();
      const event = auditRow(ids, clock, actor, { action: 'ab_test.promote', target: { type: 'ab_test', id }, changes: ['promoted', 'promotedAt'] });
      if (!(await store.promote(workspaceId, id, chosen, now, event))) throw new ConflictError(`A/B test ${id} was promoted by another request.`);
      // The promotion's event covers the winner's restored version too: one request, one event.
      if (winner.version !== undefined) await personas.restore(actor, winner.personaId, winner.version, { audited: false });
      for (const hook of promotionHooks) await hook(workspaceId, id, winner);
      return toAbTest({ ...row, promoted: chosen, promoted_at: now });
    },

    /**
     * Stops every running test whose B has broken a guardrail with sequential evidence, recording
     * which and why. Run on a timer and at every results read; a test stopped elsewhere meanwhile is
     * left as it is (the transition is conditional).
     */
    async enforceGuardrails(): Promise<number> {
      let stopped = 0;
      for (const row of await store.runningWithGuardrails()) {
        const broken = (await evidence(row.workspace_id, row)).guardrails.find((g) => g.breached);
        if (!broken) continue;
        await transition(systemActor(row.workspace_id), row.id, 'running', 'completed', 'stop', guardrailReason(broken)).then(
          () => stopped++,
          (err: unknown) => {
            if (!(err instanceof ConflictError)) throw err;
          },
        );
      }
      return stopped;
    },

    /** Why a persona may not be deleted now (a running test routes to it), or null. */
    async personaInUse(workspaceId: string, personaId: string): Promise<string | null> {
      const test = await store.runningWithPersona(workspaceId, personaId);
      return test ? `Persona ${personaId} is in the running A/B test ${test.id} (${test.name}); stop the test first.` : null;
    },

    async results(workspaceId: string, id: string): Promise<AbTestResults> {
      let row = await find(workspaceId, id);
      let ev = await evidence(workspaceId, row);
      const broken = row.status === 'running' ? ev.guardrails.find((g) => g.breached) : undefined;
      if (broken) {
        await transition(systemActor(workspaceId), id, 'running', 'completed', 'stop', guardrailReason(broken)).catch((err: unknown) => {
          if (!(err instanceof ConflictError)) throw err;
        });
        row = await find(workspaceId, id);
        ev = await evidence(workspaceId, row);
      }
      return ev;
    },
  };

  /** Everything the results say, read from the recorded answers and ratings. */
  async function evidence(workspaceId: string, row: AbTestRow): Promise<AbTestResults> {
    const id = row.id;
    const [counts, answers, ratings] = await Promise.all([store.counts(workspaceId, id), store.answers(workspaceId, id), store.ratings(workspaceId, id)]);
    const of = (variant: Variant) => {
      const count = counts.find((c) => c.variant === variant);
      const ms = answers.filter((l) => l.variant === variant && l.error === null).map((l) => l.latency_ms);
      const m = moments(ratings.filter((r) => r.variant === variant).map((r) => r.rating));
      return {
        moments: m,
        variant: {
          personaId: formatPersonaRef(refOf(row, variant)),
          conversations: Number(count?.conversations ?? 0),
          messages: Number(count?.messages ?? 0),
          satisfaction: { average: m.n > 0 ? m.mean : null, count: m.n, ci95: confidenceInterval95(m) },
          responseTime: { avgMs: ms.length > 0 ? ms.reduce((a, b) => a + b, 0) / ms.length : null, p50Ms: percentile(ms, 0.5) },
        },
      };
    };
    const a = of('A');
    const b = of('B');
    const test = welchTest(a.moments, b.moments);
    const significant = test !== null && test.pValue < SIGNIFICANCE_LEVEL;
    const enough = a.moments.n >= WINNER_MIN_RATINGS && b.moments.n >= WINNER_MIN_RATINGS;

    // Every rating is a look, in the order they were given; the series keeps the state at the end of each UTC day.
    const sequence = createTwoSampleSequence({ alpha: SIGNIFICANCE_LEVEL });
    const series: AbTestResults['sequential']['series'] = [];
    ratings.forEach((r, i) => {
      sequence.add(r.variant, r.rating);
      const day = r.created_at.slice(0, 10);
      if (ratings[i + 1]?.created_at.slice(0, 10) !== day) {
        const st = sequence.state();
        series.push({ at: `${day}T23:59:59.999Z`, ratings: i + 1, pValue: st.pValue, interval: st.interval });
      }
    });
    const seq = sequence.state();

    const guardrails = JSON.parse(row.guardrails) as Guardrails;
    const checks: AbTestResults['guardrails'] = [];
    const answersB = answers.filter((x) => x.variant === 'B' && x.error !== 'cancelled');
    if (guardrails.maxErrorRate !== undefined) {
      checks.push(check('maxErrorRate', guardrails.maxErrorRate, answersB.map((x) => (x.error === null ? 0 : 1)), 'above', SHARE_RANGE));
    }
    if (guardrails.maxP95LatencyMs !== undefined) {
      const limit = guardrails.maxP95LatencyMs;
      const slow = check('maxP95LatencyMs', P95_SHARE, answersB.filter((x) => x.error === null).map((x) => (x.latency_ms > limit ? 1 : 0)), 'above', SHARE_RANGE);
      checks.push({ ...slow, limit });
    }
    if (guardrails.minSatisfaction !== undefined) {
      checks.push(check('minSatisfaction', guardrails.minSatisfaction, ratings.filter((r) => r.variant === 'B').map((r) => r.rating), 'below', RATING_RANGE));
    }
    return {
      testId: row.id,
      status: row.status,
      variants: { A: a.variant, B: b.variant },
      significance: {
        metric: 'satisfaction',
        pValue: test?.pValue ?? null,
        significant,
        winner: significant && enough ? (a.moments.mean > b.moments.mean ? 'A' : 'B') : null,
      },
      sequential: {
        method: 'msprt',
        alpha: seq.alpha,
        tau: seq.tau,
        difference: seq.difference,
        pValue: seq.pValue,
        interval: seq.interval,
        significant: seq.significant,
        winner: seq.winner,
        series,
      },
      guardrails: checks,
    };
  }
}

type GuardrailCheck = AbTestResults['guardrails'][number];

/** The values a guardrail's figure can take: a share (error rate, slow answers), or an average rating. */
const SHARE_RANGE: [number, number] = [0, 1];
const RATING_RANGE: [number, number] = [1, 5];

/**
 * One guardrail on B's observations in time order: broken when its confidence sequence lies wholly
 * beyond the limit. The interval is reported within `range`: the sequence's own can reach past the
 * values the figure can take (ten failures in ten: 0.61–1.39), and the true figure lies in both.
 * Clipping changes no verdict: a limit lies within the range.
 */
function check(guardrail: GuardrailCheck['guardrail'], limit: number, values: number[], direction: 'above' | 'below', range: [number, number]): GuardrailCheck {
  const sequence = createMeanSequence({ alpha: SIGNIFICANCE_LEVEL });
  let breached = false;
  for (const v of values) {
    sequence.add(v);
    // Once beyond the limit it stays broken: a later look does not undo the evidence.
    breached ||= breaches(sequence.state(), limit, direction);
  }
  const st = sequence.state();
  const interval: [number, number] | null = st.interval && [Math.max(range[0], st.interval[0]), Math.min(range[1], st.interval[1])];
  return { guardrail, limit, observed: st.mean, interval, breached };
}

function guardrailReason(g: GuardrailCheck): string {
  const lo = g.interval?.[0] ?? Number.NaN;
  const hi = g.interval?.[1] ?? Number.NaN;
  const f = (x: number) => String(Number(x.toFixed(3)));
  switch (g.guardrail) {
    case 'maxErrorRate':
      return `guardrail maxErrorRate: B's error rate is at least ${f(lo)} (95 % confidence sequence ${f(lo)}–${f(hi)}), above the limit ${f(g.limit)}`;
    case 'maxP95LatencyMs':
      return `guardrail maxP95LatencyMs: at least ${f(lo * 100)} % of B's answers took longer than ${g.limit} ms (the limit allows 5 %)`;
    case 'minSatisfaction':
      return `guardrail minSatisfaction: B's average rating is at most ${f(hi)} (95 % confidence sequence ${f(lo)}–${f(hi)}), below the floor ${f(g.limit)}`;
  }
}

export type AbTestService = ReturnType<typeof createAbTestService>;
