import type { ChangeSignals } from '../../db/change-signals.js';
import type { PersonaRow, PersonaVersionRow } from '../../db/schema.js';
import { ConflictError, NotFoundError } from '../../errors.js';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import { mapPage, type Page, type PageRequest } from '../../lib/pagination.js';
import type { WriteGate } from '../../lib/write-gate.js';
import type { CreatePersonaInput, HandoffPolicy, Persona, PersonaVersion, UpdatePersonaInput } from './personas.schemas.js';
import type { PersonaStore, RoutingPatch } from './personas.store.js';
import type { Actor } from '../auth/actor.js';
import { auditRow } from '../audit/audit.js';

/** The fields a persona and each of its versions hold, as the API shows them. */
function fieldsOf(row: PersonaRow | PersonaVersionRow) {
  return {
    name: row.name,
    instructions: row.instructions,
    traits: JSON.parse(row.traits) as string[],
    model: row.model,
    temperature: row.temperature,
    maxTokens: row.max_tokens,
    tools: JSON.parse(row.tools) as string[],
  };
}

/** The stored policy with every field (rows written before a field existed lack it). */
export function handoffPolicyOf(json: string): HandoffPolicy {
  return { tool: false, keywords: [], lowRating: false, noKnowledge: null, ...(JSON.parse(json) as Partial<HandoffPolicy>) };
}

/** A stored row as the API object. */
export function toPersona(row: PersonaRow): Persona {
  return {
    id: row.id,
    ...fieldsOf(row),
    version: row.version,
    teamId: row.team_id,
    handoff: handoffPolicyOf(row.handoff),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export function toPersonaVersion(row: PersonaVersionRow): PersonaVersion {
  return { version: row.version, ...fieldsOf(row), createdAt: row.created_at, createdBy: row.created_by };
}

/** The fields a version keeps: a change to any of them makes a new version. */
const VERSIONED = ['name', 'instructions', 'traits', 'model', 'temperature', 'max_tokens', 'tools'] as const;

/** Columns by the API's field names, for audit events' `changes`. */
const FIELD_NAMES: Partial<Record<keyof PersonaRow, string>> = { max_tokens: 'maxTokens', team_id: 'teamId' };

/** `per_…` or `per_…@n` (an A/B variant naming one version of a persona; API.md §3). */
export interface PersonaRef {
  personaId: string;
  /** Absent: whichever version is current when it answers. */
  version?: number;
}

export function parsePersonaRef(ref: string): PersonaRef {
  const at = ref.lastIndexOf('@');
  if (at < 0) return { personaId: ref };
  const version = ref.slice(at + 1);
  // Not a version number: left whole, so it is an unknown persona id (404), never a half-read one.
  if (!/^[1-9]\d{0,8}$/.test(version)) return { personaId: ref };
  return { personaId: ref.slice(0, at), version: Number(version) };
}

export const formatPersonaRef = (ref: PersonaRef) => (ref.version === undefined ? ref.personaId : `${ref.personaId}@${ref.version}`);

/** Edits racing on one persona: each retries on the version it lost to, at most this often. */
const MAX_EDIT_ATTEMPTS = 5;

export interface PersonaServiceDeps {
  store: PersonaStore;
  clock: Clock;
  ids: IdGenerator;
  /**
   * With PostgreSQL: personas are kept in memory (every answer reads its persona, a round trip of
   * about five), and a change anywhere empties every instance's copy within a poll of the change
   * signals (API.md §13: 1 s). Absent (SQLite): read each time, a prepared statement in-process.
   */
  signals?: ChangeSignals;
  /** Whether a team of the workspace has this id (a persona's `teamId`). */
  teamExists: (workspaceId: string, teamId: string) => Promise<boolean>;
  /** Where an edit waits between reading the persona and writing its next version (tests of races). */
  writeGate?: WriteGate | undefined;
}

/** Personas kept in memory at most; past it the cache starts over. */
const CACHE_MAX = 10_000;

/** Says why a persona may not be deleted now (a running A/B test, a channel uses it), or null. */
export type PersonaDeletionGuard = (workspaceId: string, personaId: string) => Promise<string | null>;

export function createPersonaService({ store, clock, ids, signals, teamExists, writeGate }: PersonaServiceDeps) {
  // Features that route to personas register here; they are built after this service.
  const deletionGuards: PersonaDeletionGuard[] = [];
  const cache = signals ? new Map<string, Persona>() : null;
  /** Bumped at every change: a read that began before one does not keep what it read. */
  let generation = 0;
  signals?.onChange('personas', () => {
    generation++;
    cache?.clear();
  });
  // Emptied here before the signal is written too: should writing it fail, this instance still reads the change.
  const changed = async () => {
    generation++;
    cache?.clear();
    await signals?.changed('personas');
  };

  /** Versions never change: kept in memory once read, on either backend. */
  const versionCache = new Map<string, Persona>();

  /**
   * The persona as it was at `version`: its id and creation, that version's fields. What answers
   * for an A/B variant `per_…@n` and in an evaluation run of a version. 404 for a version it never had.
   */
  async function getAt(workspaceId: string, id: string, version?: number): Promise<Persona> {
    if (version === undefined) return get(workspaceId, id);
    const current = await get(workspaceId, id);
    if (current.version === version) return current;
    const key = `${workspaceId}\u0000${id}\u0000${version}`;
    const held = versionCache.get(key);
    if (held) return held;
    const row = await store.findVersion(workspaceId, id, version);
    if (!row) throw new NotFoundError('Persona version', `${id}@${version}`);
    const fields = fieldsOf(row);
    Object.freeze(fields.traits);
    Object.freeze(fields.tools);
    // The team and its rules are the persona's now, whichever version answers.
    const persona: Persona = { ...current, ...fields, version, updatedAt: row.created_at };
    if (versionCache.size >= CACHE_MAX) versionCache.clear();
    versionCache.set(key, Object.freeze(persona));
    return persona;
  }

  /**
   * Writes `fields` (and `routing`, which makes no version) as the persona's next version, with its
   * `action` audit event in the same transaction, unless they change nothing (no event then). A
   * concurrent edit that took the next number first makes this one start again from what that edit left.
   * `audited: false`: the caller's own event covers the change (an A/B promotion).
   */
  async function change(
    actor: Actor,
    id: string,
    fields: (row: PersonaRow) => Partial<PersonaRow>,
    routing: RoutingPatch | undefined,
    action: string,
    audited = true,
  ): Promise<Persona> {
    const workspaceId = actor.workspaceId;
    for (let attempt = 1; ; attempt++) {
      const row = await store.find(workspaceId, id);
      if (!row) throw new NotFoundError('Persona', id);
      const patch = fields(row);
      const versioned = VERSIONED.filter((f) => patch[f] !== undefined && patch[f] !== row[f]);
      const routed = routing ? (Object.keys(routing) as Array<keyof RoutingPatch>).filter((f) => routing[f] !== row[f]) : [];
      if (versioned.length === 0 && routed.length === 0) return toPersona(row);
      const event = audited
        ? auditRow(ids, clock, actor, { action, target: { type: 'persona', id }, changes: [...versioned, ...routed].map((f) => FIELD_NAMES[f] ?? f) })
        : undefined;
      if (versioned.length === 0) {
        if (!(await store.setRouting(workspaceId, id, routing!, event))) throw new NotFoundError('Persona', id);
        await changed();
        return toPersona({ ...row, ...routing });
      }
      const next: PersonaRow = { ...row, ...patch, ...routing, version: row.version + 1, updated_at: clock.now().toISOString() };
      await writeGate?.('persona.edit', id);
      if (await store.replace(next, actor.id, routing, event)) {
        await changed();
        return toPersona(next);
      }
      if (attempt >= MAX_EDIT_ATTEMPTS) throw new ConflictError(`Persona ${id} is being changed by others; try again.`);
    }
  }

  async function checkTeam(workspaceId: string, teamId: string): Promise<void> {
    if (!(await teamExists(workspaceId, teamId))) throw new NotFoundError('Team', teamId);
  }

  async function get(workspaceId: string, id: string): Promise<Persona> {
    const key = `${workspaceId}\u0000${id}`;
    const held = cache?.get(key);
    if (held) return held;
    const began = generation;
    const row = await store.find(workspaceId, id);
    if (!row) throw new NotFoundError('Persona', id);
    const persona = toPersona(row);
    if (cache && began === generation) {
      if (cache.size >= CACHE_MAX) cache.clear();
      // Shared by every later caller: frozen, so none can change another's copy.
      Object.freeze(persona.traits);
      Object.freeze(persona.tools);
      cache.set(key, Object.freeze(persona));
    }
    return persona;
  }

  return {
    get,
    getAt,

    /** `actor`: who makes the change; its id (the key, or the person) is kept as the version's `createdBy`. */
    async create(actor: Actor, input: CreatePersonaInput): Promise<Persona> {
      const workspaceId = actor.workspaceId;
      if (input.teamId != null) await checkTeam(workspaceId, input.teamId);
      const now = clock.now().toISOString();
      const row: PersonaRow = {
        id: ids('per'),
        workspace_id: workspaceId,
        name: input.name,
        instructions: input.instructions,
        traits: JSON.stringify(input.traits),
        model: input.model ?? null,
        temperature: input.temperature ?? null,
        max_tokens: input.maxTokens ?? null,
        tools: JSON.stringify([...new Set(input.tools)]),
        created_at: now,
        updated_at: now,
        version: 1,
        team_id: input.teamId ?? null,
        handoff: JSON.stringify(input.handoff ?? {}),
      };
      await store.insert(row, actor.id, auditRow(ids, clock, actor, { action: 'persona.create', target: { type: 'persona', id: row.id } }));
      return toPersona(row);
    },

    async list(workspaceId: string, page: PageRequest, q?: string): Promise<Page<Persona>> {
      return mapPage(await store.list(workspaceId, page, q), toPersona);
    },

    /**
     * A PUT: a new version when a field changes, none when nothing does (API.md §3). The team and
     * handoff rules are routing, not the persona's answers: they change without a version.
     */
    async update(actor: Actor, id: string, input: UpdatePersonaInput): Promise<Persona> {
      let routing: RoutingPatch | undefined;
      if (input.teamId !== undefined || input.handoff !== undefined) {
        if (input.teamId != null) await checkTeam(actor.workspaceId, input.teamId);
        routing = {};
        if (input.teamId !== undefined) routing.team_id = input.teamId;
        if (input.handoff !== undefined) routing.handoff = JSON.stringify(input.handoff);
      }
      return change(
        actor,
        id,
        () => {
          const patch: Partial<PersonaRow> = {};
          if (input.name !== undefined) patch.name = input.name;
          if (input.instructions !== undefined) patch.instructions = input.instructions;
          if (input.traits !== undefined) patch.traits = JSON.stringify(input.traits);
          if (input.model !== undefined) patch.model = input.model;
          if (input.temperature !== undefined) patch.temperature = input.temperature;
          if (input.maxTokens !== undefined) patch.max_tokens = input.maxTokens;
          if (input.tools !== undefined) patch.tools = JSON.stringify([...new Set(input.tools)]);
          return patch;
        },
        routing,
        'persona.update',
      );
    },

    async versions(workspaceId: string, id: string, page: PageRequest): Promise<Page<PersonaVersion>> {
      await get(workspaceId, id);
      return mapPage(await store.listVersions(workspaceId, id, page), toPersonaVersion);
    },

    async version(workspaceId: string, id: string, version: number): Promise<PersonaVersion> {
      await get(workspaceId, id);
      const row = await store.findVersion(workspaceId, id, version);
      if (!row) throw new NotFoundError('Persona version', `${id}@${version}`);
      return toPersonaVersion(row);
    },

    /** Makes version `n`'s fields current as a new version (none when they already are). */
    async restore(actor: Actor, id: string, version: number, options: { audited?: boolean } = {}): Promise<Persona> {
      const workspaceId = actor.workspaceId;
      await get(workspaceId, id);
      const old = await store.findVersion(workspaceId, id, version);
      if (!old) throw new NotFoundError('Persona version', `${id}@${version}`);
      return change(actor, id, () => Object.fromEntries(VERSIONED.map((f) => [f, old[f]])) as Partial<PersonaRow>, undefined, 'persona.restore', options.audited ?? true);
    },

    /** Lets a feature refuse (409) the deletion of a persona it routes to. */
    guardDeletion(guard: PersonaDeletionGuard): void {
      deletionGuards.push(guard);
    },

    async delete(actor: Actor, id: string): Promise<void> {
      const workspaceId = actor.workspaceId;
      await get(workspaceId, id);
      for (const guard of deletionGuards) {
        const why = await guard(workspaceId, id);
        if (why) throw new ConflictError(why);
      }
      if (!(await store.delete(workspaceId, id, auditRow(ids, clock, actor, { action: 'persona.delete', target: { type: 'persona', id } })))) {
        throw new NotFoundError('Persona', id);
      }
      await changed();
    },
  };
}

export type PersonaService = ReturnType<typeof createPersonaService>;
