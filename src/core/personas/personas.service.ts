import type { ChangeSignals } from '../../db/change-signals.js';
import type { PersonaRow } from '../../db/schema.js';
import { ConflictError, NotFoundError } from '../../errors.js';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import { mapPage, type Page, type PageRequest } from '../../lib/pagination.js';
import type { CreatePersonaInput, Persona, UpdatePersonaInput } from './personas.schemas.js';
import type { PersonaStore } from './personas.store.js';

/** A stored row as the API object. */
export function toPersona(row: PersonaRow): Persona {
  return {
    id: row.id,
    name: row.name,
    instructions: row.instructions,
    traits: JSON.parse(row.traits) as string[],
    model: row.model,
    temperature: row.temperature,
    maxTokens: row.max_tokens,
    tools: JSON.parse(row.tools) as string[],
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

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
}

/** Personas kept in memory at most; past it the cache starts over. */
const CACHE_MAX = 10_000;

/** Says why a persona may not be deleted now (a running A/B test, a channel uses it), or null. */
export type PersonaDeletionGuard = (workspaceId: string, personaId: string) => Promise<string | null>;

export function createPersonaService({ store, clock, ids, signals }: PersonaServiceDeps) {
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

    async create(workspaceId: string, input: CreatePersonaInput): Promise<Persona> {
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
      };
      await store.insert(row);
      return toPersona(row);
    },

    async list(workspaceId: string, page: PageRequest, q?: string): Promise<Page<Persona>> {
      return mapPage(await store.list(workspaceId, page, q), toPersona);
    },

    async update(workspaceId: string, id: string, input: UpdatePersonaInput): Promise<Persona> {
      const row = await store.find(workspaceId, id);
      if (!row) throw new NotFoundError('Persona', id);
      const patch: Partial<PersonaRow> = { updated_at: clock.now().toISOString() };
      if (input.name !== undefined) patch.name = input.name;
      if (input.instructions !== undefined) patch.instructions = input.instructions;
      if (input.traits !== undefined) patch.traits = JSON.stringify(input.traits);
      if (input.model !== undefined) patch.model = input.model;
      if (input.temperature !== undefined) patch.temperature = input.temperature;
      if (input.maxTokens !== undefined) patch.max_tokens = input.maxTokens;
      if (input.tools !== undefined) patch.tools = JSON.stringify([...new Set(input.tools)]);
      await store.update(workspaceId, id, patch);
      await changed();
      return toPersona({ ...row, ...patch });
    },

    /** Lets a feature refuse (409) the deletion of a persona it routes to. */
    guardDeletion(guard: PersonaDeletionGuard): void {
      deletionGuards.push(guard);
    },

    async delete(workspaceId: string, id: string): Promise<void> {
      await get(workspaceId, id);
      for (const guard of deletionGuards) {
        const why = await guard(workspaceId, id);
        if (why) throw new ConflictError(why);
      }
      if (!(await store.delete(workspaceId, id))) throw new NotFoundError('Persona', id);
      await changed();
    },
  };
}

export type PersonaService = ReturnType<typeof createPersonaService>;
