import type { Generated, Insertable, Selectable } from 'kysely';

/** Kysely's view of the database. Timestamps are ISO-8601 UTC strings; JSON columns are text. */
export interface Database {
  workspaces: WorkspacesTable;
  api_keys: ApiKeysTable;
  personas: PersonasTable;
  idempotency_keys: IdempotencyKeysTable;
}

export interface WorkspacesTable {
  id: string;
  name: string;
  created_at: string;
}

export interface ApiKeysTable {
  id: string;
  workspace_id: string;
  name: string;
  prefix: string;
  /** SHA-256 (hex) of the secret; the secret itself is never stored. */
  hash: string;
  /** JSON array of scopes. */
  scopes: string;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
  rotated_at: string | null;
  last_used_at: string | null;
  /** The secret replaced by the latest rotation, accepted until previous_valid_until. */
  previous_hash: string | null;
  previous_valid_until: string | null;
}

export interface PersonasTable {
  id: string;
  workspace_id: string;
  name: string;
  instructions: string;
  traits: string;
  model: string | null;
  temperature: number | null;
  max_tokens: number | null;
  tools: string;
  created_at: string;
  updated_at: string;
}

export interface IdempotencyKeysTable {
  workspace_id: string;
  method: string;
  path: string;
  key: string;
  request_hash: string;
  state: 'running' | 'done';
  status_code: number | null;
  /** Encrypted JSON `{ headers, body }` of the first response. */
  response: string | null;
  created_at: string;
  seq: Generated<number>;
}

export type WorkspaceRow = Selectable<WorkspacesTable>;
export type ApiKeyRow = Selectable<ApiKeysTable>;
export type NewApiKeyRow = Insertable<ApiKeysTable>;
export type PersonaRow = Selectable<PersonasTable>;
