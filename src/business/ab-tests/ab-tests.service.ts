/**
 * A/B tests between two personas (API.md §8): draft → running → completed, sticky assignment by
 * hashing, and results that decide with Welch's t-test on the ratings.
 */
import crypto from 'node:crypto';
import type { AbTestRow } from '../../db/schema.js';
import { ConflictError, NotFoundError, ValidationError } from '../../errors.js';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import { mapPage, type Page, type PageRequest } from '../../lib/pagination.js';
import type { PersonaService } from '../../core/personas/personas.service.js';
import type { AbTest, AbTestResults, CreateAbTestInput, Variant } from './ab-tests.schemas.js';
import type { AbTestStore } from './ab-tests.store.js';
import { confidenceInterval95, moments, percentile, welchTest } from './stats.js';

/** Ratings each variant needs before a winner is named (API.md §8). */
const WINNER_MIN_RATINGS = 10;
const SIGNIFICANCE_LEVEL = 0.05;

export function toAbTest(row: AbTestRow): AbTest {
  return {
    id: row.id,
    name: row.name,
    personaA: row.persona_a,
    personaB: row.persona_b,
    trafficSplit: row.traffic_split,
    status: row.status,
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

export interface AbTestServiceDeps {
  store: AbTestStore;
  personas: PersonaService;
  clock: Clock;
  ids: IdGenerator;
}

export function createAbTestService({ store, personas, clock, ids }: AbTestServiceDeps) {
  async function find(workspaceId: string, id: string): Promise<AbTestRow> {
    const row = await store.find(workspaceId, id);
    if (!row) throw new NotFoundError('A/B test', id);
    return row;
  }

  /** Moves a test on, or 409 naming where it stands. */
  async function transition(workspaceId: string, id: string, from: AbTestRow['status'], to: AbTestRow['status'], verb: string) {
    const row = await find(workspaceId, id);
    const refuse = (status: string) => new ConflictError(`A/B test ${id} is ${status}; only a ${from} test can ${verb}.`);
    if (row.status !== from) throw refuse(row.status);
    const now = clock.now().toISOString();
    const patch = to === 'running' ? { status: to, started_at: now } : { status: to, ended_at: now };
    if (!(await store.transition(workspaceId, id, from, patch))) throw refuse((await find(workspaceId, id)).status);
    return toAbTest({ ...row, ...patch });
  }

  return {
    async create(workspaceId: string, input: CreateAbTestInput): Promise<AbTest> {
      if (input.personaA === input.personaB) throw ValidationError.field('personaB', 'must be a different persona from personaA');
      await personas.get(workspaceId, input.personaA);
      await personas.get(workspaceId, input.personaB);
      const row: AbTestRow = {
        id: ids('abt'),
        workspace_id: workspaceId,
        name: input.name,
        persona_a: input.personaA,
        persona_b: input.personaB,
        traffic_split: input.trafficSplit,
        status: 'draft',
        created_at: clock.now().toISOString(),
        started_at: null,
        ended_at: null,
      };
      await store.insert(row);
      return toAbTest(row);
    },

    async list(workspaceId: string, page: PageRequest, status?: AbTestRow['status']): Promise<Page<AbTest>> {
      return mapPage(await store.list(workspaceId, page, status), toAbTest);
    },

    get: async (workspaceId: string, id: string): Promise<AbTest> => toAbTest(await find(workspaceId, id)),

    async start(workspaceId: string, id: string): Promise<AbTest> {
      const row = await find(workspaceId, id);
      for (const personaId of [row.persona_a, row.persona_b]) {
        await personas.get(workspaceId, personaId).catch(() => {
          throw new ConflictError(`A/B test ${id} cannot start: its persona ${personaId} was deleted.`);
        });
      }
      return transition(workspaceId, id, 'draft', 'running', 'start');
    },

    stop: (workspaceId: string, id: string): Promise<AbTest> => transition(workspaceId, id, 'running', 'completed', 'stop'),

    /**
     * Which persona answers: for a new conversation the variant `key` hashes to, for a session that
     * already belongs to the test its recorded variant. Only a running test routes (else 409).
     */
    async route(workspaceId: string, id: string, pick: { key: string } | { variant: Variant }): Promise<{ personaId: string; variant: Variant }> {
      const row = await find(workspaceId, id);
      if (row.status !== 'running') throw new ConflictError(`A/B test ${id} is ${row.status}; only a running test routes questions.`);
      const variant = 'variant' in pick ? pick.variant : assignVariant(row.id, pick.key, row.traffic_split);
      return { personaId: variant === 'A' ? row.persona_a : row.persona_b, variant };
    },

    /** Why a persona may not be deleted now (a running test routes to it), or null. */
    async personaInUse(workspaceId: string, personaId: string): Promise<string | null> {
      const test = await store.runningWithPersona(workspaceId, personaId);
      return test ? `Persona ${personaId} is in the running A/B test ${test.id} (${test.name}); stop the test first.` : null;
    },

    async results(workspaceId: string, id: string): Promise<AbTestResults> {
      const row = await find(workspaceId, id);
      const [counts, latencies, ratings] = await Promise.all([store.counts(workspaceId, id), store.latencies(workspaceId, id), store.ratings(workspaceId, id)]);
      const of = (variant: Variant) => {
        const count = counts.find((c) => c.variant === variant);
        const ms = latencies.filter((l) => l.variant === variant).map((l) => l.latency_ms);
        const m = moments(ratings.filter((r) => r.variant === variant).map((r) => r.rating));
        return {
          moments: m,
          variant: {
            personaId: variant === 'A' ? row.persona_a : row.persona_b,
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
      };
    },
  };
}

export type AbTestService = ReturnType<typeof createAbTestService>;
