import type { Generated, Insertable, Selectable } from 'kysely';

/** Kysely's view of the database. Timestamps are ISO-8601 UTC strings; JSON columns are text. */
export interface Database {
  workspaces: WorkspacesTable;
  api_keys: ApiKeysTable;
  personas: PersonasTable;
  persona_versions: PersonaVersionsTable;
  datasets: DatasetsTable;
  dataset_cases: DatasetCasesTable;
  eval_runs: EvalRunsTable;
  eval_results: EvalResultsTable;
  handoffs: HandoffsTable;
  handoff_outbox: HandoffOutboxTable;
  handoff_notifications: HandoffNotificationsTable;
  handoff_desk_threads: HandoffDeskThreadsTable;
  idempotency_keys: IdempotencyKeysTable;
  knowledge_sources: KnowledgeSourcesTable;
  knowledge_chunks: KnowledgeChunksTable;
  settings: SettingsTable;
  sessions: SessionsTable;
  messages: MessagesTable;
  interactions: InteractionsTable;
  feedback: FeedbackTable;
  interaction_tools: InteractionToolsTable;
  ab_tests: AbTestsTable;
  channels: ChannelsTable;
  channel_inbox: ChannelInboxTable;
  channel_conversations: ChannelConversationsTable;
  channel_messages: ChannelMessagesTable;
  mcp_servers: McpServersTable;
  tool_executions: ToolExecutionsTable;
  teams: TeamsTable;
  team_members: TeamMembersTable;
  oauth_clients: OAuthClientsTable;
  oauth_grants: OAuthGrantsTable;
  oauth_codes: OAuthCodesTable;
  oauth_tokens: OAuthTokensTable;
  openai_threads: OpenAiThreadsTable;
  change_signals: ChangeSignalsTable;
  rate_windows: RateWindowsTable;
  mcp_sessions: McpSessionsTable;
  oauth_pending: OAuthPendingTable;
  leases: LeasesTable;
  mcp_server_oauth: McpServerOAuthTable;
  mcp_server_oauth_pending: McpServerOAuthPendingTable;
  mcp_tasks: McpTasksTable;
  mcp_events: McpEventsTable;
  mcp_replies: McpRepliesTable;
  users: UsersTable;
  memberships: MembershipsTable;
  login_sessions: LoginSessionsTable;
  invitations: InvitationsTable;
  signin_failures: SigninFailuresTable;
  audit_events: AuditEventsTable;
  oidc_pending: OidcPendingTable;
  oidc_identities: OidcIdentitiesTable;
}

/** Migration 035 (API.md §14): a person, one per e-mail across the installation. */
export interface UsersTable {
  id: string;
  email: string;
  /** The e-mail lower-cased: unique. */
  email_key: string;
  name: string;
  status: 'active' | 'disabled';
  /** `scrypt$N$r$p$salt$hash` (base64url); null for a user without a password. */
  password: string | null;
  created_at: string;
  last_seen_at: string | null;
}

/** Migration 035: a user's role in a workspace. */
export interface MembershipsTable {
  workspace_id: string;
  user_id: string;
  role: 'viewer' | 'agent' | 'editor' | 'admin' | 'owner';
  joined_at: string;
}

/** Migration 035: a sign-in session (the cookie `sb_session`). */
export interface LoginSessionsTable {
  id: string;
  /** SHA-256 (hex) of the cookie's secret. */
  token_hash: string;
  /** SHA-256 (hex) of the session's CSRF token. */
  csrf_hash: string;
  user_id: string;
  /** The workspace the session acts in. */
  workspace_id: string;
  method: 'password' | 'oidc' | 'passkey' | 'setup' | 'invitation';
  ip: string | null;
  user_agent: string | null;
  created_at: string;
  last_seen_at: string;
  /** The absolute end. */
  expires_at: string;
  /** Signed out, ended by "sign out everywhere", or by the user's removal. */
  ended_at: string | null;
}

/** Migration 035: a one-use link (a member's invitation, the first owner's setup). */
export interface InvitationsTable {
  id: string;
  workspace_id: string;
  purpose: 'invite' | 'setup';
  /** Null for a setup link (the owner gives their e-mail). */
  email: string | null;
  role: 'viewer' | 'agent' | 'editor' | 'admin' | 'owner';
  /** SHA-256 (hex) of the link's token. */
  token_hash: string;
  /** The actor id that made it; null for the start banner or the CLI. */
  created_by: string | null;
  created_at: string;
  expires_at: string;
  used_at: string | null;
  revoked_at: string | null;
}

/** Migration 035: a failed password sign-in, for the attempt limits. */
export interface SigninFailuresTable {
  seq: Generated<number>;
  email_key: string;
  ip: string;
  at_ms: number;
}

/** Migration 035: an audit event (append-only). */
export interface AuditEventsTable {
  id: string;
  workspace_id: string;
  at: string;
  actor_type: 'user' | 'key' | 'oauth' | 'channel' | 'system';
  actor_id: string;
  actor_name: string;
  on_behalf_of: string | null;
  action: string;
  target_type: string;
  target_id: string | null;
  outcome: 'success' | 'denied';
  request_id: string | null;
  ip: string | null;
  user_agent: string | null;
  /** JSON array of the field names changed. */
  changes: string | null;
}

/** Migration 015: per topic, a sequence bumped after every change an in-memory cache may hold (change-signals.ts). */
export interface ChangeSignalsTable {
  topic: string;
  seq: number;
}

/** Migration 025: a client's answer to a request another instance's MCP server sent it (src/mcp/http.ts). */
export interface McpRepliesTable {
  seq: Generated<number>;
  session_id: string;
  /** JSON: the JSON-RPC response. */
  message: string;
  created_ms: number;
}

/** Migration 024: a message sent on an MCP session's event stream (src/mcp/event-store.ts). */
export interface McpEventsTable {
  session_id: string;
  stream_id: string;
  /** The event's place in its stream, from 1 (the SSE event id is `<n>.<stream_id>`). */
  n: number;
  /** JSON: the JSON-RPC message. */
  message: string;
  created_ms: number;
}

/** Migration 023: a task of MCP's tasks extension (src/mcp/tasks.ts). */
export interface McpTasksTable {
  id: string;
  workspace_id: string;
  /** The key that started it (only that key reads or cancels it). */
  owner: string;
  tool: string;
  status: 'working' | 'completed' | 'failed' | 'cancelled';
  status_message: string | null;
  /** JSON: the CallToolResult of a completed task. */
  result: string | null;
  /** JSON: the JSON-RPC error of a failed task. */
  error: string | null;
  /** The instance running it. */
  instance: string;
  created_at: string;
  updated_at: string;
  expires_ms: number;
}
export type McpTaskRow = Selectable<McpTasksTable>;

/** Migration 022: how an http tool server that asked for OAuth is signed in to (src/core/tools/tool-oauth.ts). */
export interface McpServerOAuthTable {
  server_id: string;
  workspace_id: string;
  status: 'needs_consent' | 'connected' | 'error';
  error: string | null;
  /** From the server's 401 `WWW-Authenticate` (RFC 9728 §5.1), when it named one. */
  resource_metadata_url: string | null;
  /** The scope the server's last challenge asked for (401, or 403 `insufficient_scope`). */
  challenge_scope: string | null;
  /** The authorization server the tokens and the client belong to. */
  issuer: string | null;
  client_method: 'metadata_document' | 'dynamic' | 'preregistered' | null;
  /** Sealed JSON `{ clientId, clientSecret? }` (context: the server id). */
  client: string | null;
  /** Sealed JSON `{ accessToken, refreshToken? }` (context: the server id and the issuer). */
  tokens: string | null;
  scope: string | null;
  expires_ms: number | null;
  /** When to refresh: a quarter of the lifetime (at most a minute) before `expires_ms`. */
  refresh_at_ms: number | null;
  version: number;
  refreshing_until_ms: number | null;
  updated_at: string;
  /** Sealed JSON `{ clientId, clientSecret?, issuer }`: the client registered dynamically, kept for every later consent (context: the server id). */
  registration: Generated<string | null>;
  /** The claim of the one consent registering that client (migration 034). */
  registering_until_ms: Generated<number | null>;
}

/** Migration 022: an authorization request of a tool server waiting for the admin's consent. */
export interface McpServerOAuthPendingTable {
  /** SHA-256 (hex) of the request's `state`. */
  state_hash: string;
  workspace_id: string;
  server_id: string;
  /** Sealed JSON: the PKCE verifier, the redirect URI, the resource and the endpoints used. */
  request: string;
  expires_ms: number;
}

/** Migration 020: work one instance does at a time (src/db/leases.ts). */
export interface LeasesTable {
  name: string;
  owner: string;
  until_ms: number;
  note: string | null;
}

/** Migration 019: an MCP Streamable HTTP session, continued by whichever instance a request reaches. */
export interface McpSessionsTable {
  id: string;
  /** The key id, or `keyId/grantId` for an OAuth client. */
  owner: string;
  protocol_version: string;
  /** JSON: the initialize request's `clientInfo` and `capabilities`. */
  client: string;
  created_at: string;
  last_seen_ms: number;
}

/** Migration 019: an OAuth authorization request waiting for the person's answer. */
export interface OAuthPendingTable {
  id: string;
  /** SHA-256 (hex) of the consent form's CSRF token. */
  csrf_hash: string;
  /** JSON: client, redirect URI, state, PKCE challenge, resource, scopes. */
  request: string;
  expires_ms: number;
  attempts: number;
}

/** Migration 017: a rate-limit window shared by the instances on one PostgreSQL database. */
export interface RateWindowsTable {
  key: string;
  started_ms: number;
  used: number;
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
  /** Migration 035: the person the key belongs to; null for a service key. */
  user_id: Generated<string | null>;
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
  /** The current version's number (persona_versions). */
  version: number;
  /** The team whose members take over its conversations (handoff); not versioned. */
  team_id: string | null;
  /** JSON `HandoffPolicy`: when a conversation goes to the team. */
  handoff: string;
}

/** An immutable snapshot of a persona's fields: version 1 is its creation, each change adds one. */
export interface PersonaVersionsTable {
  workspace_id: string;
  persona_id: string;
  version: number;
  name: string;
  instructions: string;
  traits: string;
  model: string | null;
  temperature: number | null;
  max_tokens: number | null;
  tools: string;
  created_at: string;
  /** The API key (`key_…`) whose caller made the change; null for versions made by the migration. */
  created_by: string | null;
}

export type PersonaVersionRow = Selectable<PersonaVersionsTable>;

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
  /** Migration 021: the instance running the request (its lease owner); null on one process. */
  owner: string | null;
}

export type WorkspaceRow = Selectable<WorkspacesTable>;
export type ApiKeyRow = Selectable<ApiKeysTable>;
export type NewApiKeyRow = Insertable<ApiKeysTable>;
export type PersonaRow = Selectable<PersonasTable>;

export type SourceKind = 'text' | 'markdown' | 'html' | 'url' | 'pdf' | 'docx' | 'csv' | 'json';
export type SourceStatus = 'processing' | 'ready' | 'failed';

export interface KnowledgeSourcesTable {
  id: string;
  workspace_id: string;
  /** null: shared by every persona of the workspace. */
  persona_id: string | null;
  name: string;
  kind: SourceKind;
  status: SourceStatus;
  error: string | null;
  bytes: number;
  chunk_count: number;
  /** JSON object. */
  metadata: string;
  url: string | null;
  filename: string | null;
  media_type: string | null;
  /** The original bytes, kept so a source can be re-processed (PUT, restart, reindex); null for `url` until fetched. */
  content: Buffer | null;
  /** Bumped by every PUT: a job that finishes for an older generation is discarded. */
  generation: number;
  /** Processing runs started; a source interrupted too often fails instead of looping. */
  attempts: number;
  /** While `processing`: the instance running or queueing its job (migration 018), and until when that holds without renewal. */
  lease_owner: string | null;
  lease_until: string | null;
  created_at: string;
  updated_at: string;
}

export interface KnowledgeChunksTable {
  rowid: number;
  id: string;
  workspace_id: string;
  source_id: string;
  /** The persona id of a private source, or SHARED_SCOPE. */
  scope: string;
  position: number;
  text: string;
  /** JSON array of headings, outermost first. */
  heading_path: string;
  tokens: number;
  /** float32 little-endian, L2-normalised. */
  embedding: Buffer;
}

export interface SettingsTable {
  key: string;
  value: string;
}

export type KnowledgeSourceRow = Selectable<KnowledgeSourcesTable>;
export type KnowledgeChunkRow = Selectable<KnowledgeChunksTable>;

export interface SessionsTable {
  id: string;
  workspace_id: string;
  persona_id: string;
  ab_test_id: string | null;
  variant: 'A' | 'B' | null;
  channel_id: string | null;
  user_id: string | null;
  title: string;
  message_count: number;
  created_at: string;
  last_message_at: string;
}

export type MessageRole = 'user' | 'assistant' | 'tool';

export interface MessagesTable {
  seq: Generated<number>;
  id: string;
  session_id: string;
  role: MessageRole;
  content: string;
  /** JSON array of `{ id, name, arguments, result, isError }` on an assistant message that called tools. */
  tool_calls: string | null;
  /** On a tool message: the call it answers. */
  tool_call_id: string | null;
  created_at: string;
  /** Who wrote an assistant message other than the persona: `human:<email>` (a team member), `system` (a notice); null otherwise. */
  author: Generated<string | null>;
}

/** One per answer, failed ones included: what analytics and A/B tests read. */
export interface InteractionsTable {
  seq: Generated<number>;
  workspace_id: string;
  /** Cleared when the session is deleted. */
  session_id: string | null;
  message_id: string | null;
  persona_id: string;
  ab_test_id: string | null;
  variant: 'A' | 'B' | null;
  channel_id: string | null;
  user_id: string | null;
  model: string;
  started_at: string;
  latency_ms: number;
  /** Time to the first streamed text; null when no text came. */
  ttft_ms: number | null;
  prompt_tokens: number;
  completion_tokens: number;
  tool_calls: number;
  /** An error code (`upstream_error`...) or `cancelled`; null for an answer. */
  error: string | null;
  /** The persona version that answered (null: recorded before versions existed). */
  persona_version: number | null;
  /** The latest feedback rating on this answer. */
  rating: number | null;
  /** JSON object from the query's `metadata`; cleared with the session. */
  metadata: string | null;
  /** 1 on the answer that created its session: conversations are counted from these, so a deleted session keeps its count. */
  new_session: number;
  /** How many knowledge sources the answer's retrieval found; null on a failed answer, a message handed over unanswered, and rows before migration 033. */
  sources: number | null;
}

export interface FeedbackTable {
  seq: Generated<number>;
  workspace_id: string;
  session_id: string | null;
  message_id: string | null;
  persona_id: string;
  ab_test_id: string | null;
  variant: 'A' | 'B' | null;
  rating: number;
  comment: string | null;
  created_at: string;
  /** The session's channel, kept when the session is deleted. */
  channel_id: string | null;
}

/** One per tool call of an answer: analytics' per-tool figures, which outlive the session's messages. */
export interface InteractionToolsTable {
  seq: Generated<number>;
  workspace_id: string;
  /** The answer's `started_at`. */
  started_at: string;
  persona_id: string;
  channel_id: string | null;
  /** `<toolName>.<action>`. */
  tool_name: string;
  is_error: number;
}

export type SessionRow = Selectable<SessionsTable>;
export type MessageRow = Selectable<MessagesTable>;

export interface McpServersTable {
  id: string;
  workspace_id: string;
  name: string;
  transport: 'stdio' | 'http';
  command: string | null;
  /** JSON array of strings. */
  args: string;
  url: string | null;
  /** Sealed (AES-256-GCM) JSON `{ credentials, headers }`: every value is write-only. */
  secrets: string;
  /** JSON arrays of names, the only part of the secrets that is ever shown. */
  credential_names: string;
  header_names: string;
  /** `config`: declared in SWITCHBOARD_MCP_CONFIG (the operator's file), `api`: registered by an admin key. */
  origin: 'api' | 'config';
  created_at: string;
  updated_at: string;
}

export interface ToolExecutionsTable {
  id: string;
  workspace_id: string;
  tool_name: string;
  action: string;
  status: 'succeeded' | 'failed';
  /** JSON; secrets scrubbed. */
  result: string | null;
  error: string | null;
  duration_ms: number;
  started_at: string;
  finished_at: string;
  monitored: number;
  /** JSON, redacted; only when monitored. */
  parameters: string | null;
  /** JSON array of progress and log notifications; only when monitored. */
  events: string | null;
  created_at: string;
}

export type McpServerRow = Selectable<McpServersTable>;
export type McpServerOAuthRow = Selectable<McpServerOAuthTable>;
export type ToolExecutionRow = Selectable<ToolExecutionsTable>;

export type TeamStatus = 'available' | 'busy' | 'offline';

export interface TeamsTable {
  id: string;
  workspace_id: string;
  name: string;
  status: TeamStatus;
  /** IANA time zone name, as Intl resolves it. */
  timezone: string;
  /** JSON array of `{ day, start, end }` windows. */
  weekly: string;
  created_at: string;
  updated_at: string;
  /** How long a handoff offered to a member waits for them before it goes to the next. */
  offer_seconds: Generated<number>;
  /** Where the team is told of handoffs (a signed webhook), and its secret, sealed. */
  notify_url: Generated<string | null>;
  notify_secret: Generated<string | null>;
  /** Where members work handoffs in chat: a Slack or Discord channel of the workspace and a conversation in it (`dm`: the offered member's direct messages). */
  desk_channel_id: Generated<string | null>;
  desk_conversation: Generated<string | null>;
}

export interface TeamMembersTable {
  seq: Generated<number>;
  team_id: string;
  workspace_id: string;
  /** As first given. */
  email: string;
  /** Lower-cased e-mail: UNIQUE per team, so membership is case-insensitive. */
  email_key: string;
  role: 'member' | 'lead';
  status: TeamStatus;
  created_at: string;
  /** The member's user id on the team's desk platform (Slack `U…`, Discord snowflake): who clicks Accept and replies there. */
  chat_user_id: Generated<string | null>;
}

export type TeamRow = Selectable<TeamsTable>;
export type TeamMemberRow = Selectable<TeamMembersTable>;
export type NewTeamMemberRow = Insertable<TeamMembersTable>;

export interface AbTestsTable {
  id: string;
  workspace_id: string;
  name: string;
  persona_a: string;
  persona_b: string;
  /** Share of traffic sent to persona A, in [0, 1]. */
  traffic_split: number;
  status: 'draft' | 'running' | 'completed';
  created_at: string;
  started_at: string | null;
  ended_at: string | null;
  /** The version of persona A (B) that answers; null = whichever is current. */
  version_a: number | null;
  version_b: number | null;
  /** JSON `Guardrails`: limits B must keep, or the test stops itself. */
  guardrails: string;
  /** Why it stopped: `manual`, or the guardrail B broke. */
  stop_reason: string | null;
  /** The variant made current when it finished; new conversations go to it. */
  promoted: 'A' | 'B' | null;
  promoted_at: string | null;
}
export type AbTestRow = Selectable<AbTestsTable>;

export interface ChannelsTable {
  id: string;
  workspace_id: string;
  type: 'slack' | 'discord' | 'webhook';
  name: string;
  /** Exactly one of persona_id and ab_test_id. */
  persona_id: string | null;
  ab_test_id: string | null;
  /** JSON ChannelSettings. */
  settings: string;
  /** Sealed credentials (AES-256-GCM, bound to the channel id). */
  secrets: string;
  created_at: string;
  updated_at: string;
}
export type ChannelRow = Selectable<ChannelsTable>;

export interface ChannelInboxTable {
  seq: Generated<number>;
  channel_id: string;
  /** The platform's delivery id: unique per channel, so a retried delivery is stored once. */
  external_id: string;
  conversation_id: string;
  /** JSON InboundMessage. */
  payload: string;
  status: 'pending' | 'answering' | 'answered' | 'failed' | 'expired';
  received_at: string;
  answered_at: string | null;
  /** Migration 020: the instance that took it to answer (its lease owner), null before. */
  claimed_by: string | null;
}
export type ChannelInboxRow = Selectable<ChannelInboxTable>;

export interface ChannelConversationsTable {
  channel_id: string;
  conversation_id: string;
  session_id: string;
}

export interface ChannelMessagesTable {
  channel_id: string;
  /** Platform id of a message the bot posted (Slack ts, Discord message id). */
  external_id: string;
  session_id: string | null;
  /** The answer it carries; null for a plain send. */
  message_id: string | null;
  created_at: string;
}

/** A client registered through RFC 7591 dynamic registration; `metadata` is its validated JSON. */
export interface OAuthClientsTable {
  client_id: string;
  metadata: string;
  created_at: string;
}

/** A client allowed to act for an API key's workspace with `scope` (space-separated, at most the key's). */
export interface OAuthGrantsTable {
  id: string;
  workspace_id: string;
  key_id: string;
  client_id: string;
  client_name: string;
  scope: string;
  resource: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

/** An authorization code, by SHA-256 (hex) of its value: single use, short-lived. */
export interface OAuthCodesTable {
  hash: string;
  grant_id: string;
  client_id: string;
  redirect_uri: string;
  code_challenge: string;
  resource: string;
  scope: string;
  expires_at: string;
  used_at: string | null;
}

/** An access or refresh token, by SHA-256 (hex) of its value; a refresh rotation keeps the family. */
export interface OAuthTokensTable {
  hash: string;
  kind: 'access' | 'refresh';
  grant_id: string;
  family_id: string;
  resource: string;
  scope: string;
  created_at: string;
  expires_at: string;
  revoked_at: string | null;
  used_at: string | null;
}

export type OAuthGrantRow = Selectable<OAuthGrantsTable>;
export type OAuthCodeRow = Selectable<OAuthCodesTable>;
export type OAuthTokenRow = Selectable<OAuthTokensTable>;

/** Migration 012: which session an OpenAI-compatible conversation continues (see the migration). */
export interface OpenAiThreadsTable {
  workspace_id: string;
  model: string;
  user_key: string;
  history_hash: string;
  session_id: string;
  created_at: string;
}

/** A named list of evaluation cases (issue 28). */
export interface DatasetsTable {
  id: string;
  workspace_id: string;
  name: string;
  description: string | null;
  case_count: number;
  created_at: string;
  updated_at: string;
}
export type DatasetRow = Selectable<DatasetsTable>;

export interface DatasetCasesTable {
  id: string;
  workspace_id: string;
  dataset_id: string;
  /** Its place in the dataset, from 1. */
  position: number;
  /** JSON `EvalCase` (business/evaluations/cases.ts). */
  body: string;
  /** The session it was made from, when made from one. */
  session_id: string | null;
  created_at: string;
}
export type DatasetCaseRow = Selectable<DatasetCasesTable>;

export type EvalRunStatus = 'queued' | 'running' | 'completed' | 'cancelled' | 'failed';

/** A dataset answered by one persona version, in the background (leased like a knowledge source). */
export interface EvalRunsTable {
  id: string;
  workspace_id: string;
  dataset_id: string;
  persona_id: string;
  persona_version: number;
  status: EvalRunStatus;
  /** Cases when it was started. */
  total: number;
  /** Cases answered and scored so far. */
  done: number;
  concurrency: number;
  /** 1: cases with a rubric are graded by the configured model. */
  judge: number;
  /** JSON `RunSummary` once finished. */
  summary: string | null;
  error: string | null;
  created_by: string | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  lease_owner: string | null;
  lease_until: string | null;
  /** Times an instance took it up: a run that keeps stopping its instance fails. */
  attempts: number;
}
export type EvalRunRow = Selectable<EvalRunsTable>;

export interface EvalResultsTable {
  run_id: string;
  case_id: string;
  position: number;
  /** 1 / 0 when every pass/fail score passed or not; null when nothing was checked. */
  passed: number | null;
  /** Mean of the case's 0–1 scores: what two runs compare case by case; null when none. */
  score: number | null;
  answer: string;
  /** JSON `[{ sourceId, sourceName }]` in rank order. */
  sources: string;
  /** JSON `Score[]`. */
  scores: string;
  latency_ms: number;
  prompt_tokens: number;
  completion_tokens: number;
  error: string | null;
  created_at: string;
}
export type EvalResultRow = Selectable<EvalResultsTable>;

export type HandoffStatus = 'queued' | 'offered' | 'accepted' | 'resolved' | 'returned';

/** One conversation's time with a person of the persona's team (issue 29). */
export interface HandoffsTable {
  id: string;
  workspace_id: string;
  /** Cleared when the session is deleted; the handoff's numbers stay. */
  session_id: string | null;
  persona_id: string;
  team_id: string;
  status: HandoffStatus;
  /** `user` (asked for a person), `tool` (the persona called handoff), `rule` (keyword, rating), `api`. */
  trigger: 'user' | 'tool' | 'rule' | 'api';
  reason: string;
  /** The member it is offered to (offered) or who owns it (accepted, and after). */
  member: string | null;
  /** When an offer lapses and goes to the next member. */
  offer_until: string | null;
  /** JSON array of the member e-mail keys whose offer lapsed this round. */
  passed: string;
  /** Offers made so far. */
  offers: number;
  accepted_at: string | null;
  first_reply_at: string | null;
  ended_at: string | null;
  /** The member who handed it back or resolved it, or `api`. */
  ended_by: string | null;
  created_at: string;
  updated_at: string;
  /** Bumped by every move: a move is made over the revision it read, so two never both land. */
  rev: number;
}
export type HandoffRow = Selectable<HandoffsTable>;

/** A message of a handed-off conversation still to be sent to the user on its channel (issue 29). */
export interface HandoffOutboxTable {
  seq: Generated<number>;
  workspace_id: string;
  handoff_id: string;
  channel_id: string;
  /** The channel's conversation (a Slack thread `<channel>:<ts>`, a Discord channel, a webhook conversationId). */
  conversation_id: string;
  message_id: string;
  text: string;
  status: 'pending' | 'sent' | 'failed';
  attempts: number;
  /** Not before this time (back-off after a failure). */
  next_at: string;
  claimed_by: string | null;
  /** A claim lapses: another instance (or this one, restarted) takes the delivery over. */
  claimed_until: string | null;
  error: string | null;
  created_at: string;
  sent_at: string | null;
  /**
   * `user`: to the user in their conversation. `desk-card`: a handoff's card (with buttons) posted to
   * the team's desk (`conversation_id` a channel, or a member's user id for `dm`), starting a desk
   * thread. `desk`: a line in the handoff's desk thread (resolved when sent).
   */
  kind: Generated<'user' | 'desk-card' | 'desk'>;
  /** JSON `OutboundButton[]` under the text. */
  buttons: Generated<string | null>;
  /** A `desk-card` sent to one member's direct messages: theirs (lower-cased e-mail). */
  member_key: Generated<string | null>;
}

/** A desk thread of a handoff (issue 29): where its card was posted; the accepting member's replies in it reach the user. */
export interface HandoffDeskThreadsTable {
  seq: Generated<number>;
  workspace_id: string;
  handoff_id: string;
  channel_id: string;
  /** The platform conversation of the thread, as an inbound reply names it (Slack `<channel>:<card ts>`). */
  conversation_id: string;
  /** A card sent to one member's direct messages: theirs; null for the team's channel. */
  member_key: string | null;
  created_at: string;
}

/** A handoff event for a team's webhook (issue 29), delivered like the outbox. */
export interface HandoffNotificationsTable {
  seq: Generated<number>;
  workspace_id: string;
  team_id: string;
  handoff_id: string;
  /** `handoff.offered`, `handoff.queued`, `handoff.accepted`, `handoff.message`, `handoff.ended`. */
  event: string;
  /** The JSON posted. */
  body: string;
  status: 'pending' | 'sent' | 'failed';
  attempts: number;
  next_at: string;
  claimed_by: string | null;
  claimed_until: string | null;
  error: string | null;
  created_at: string;
  sent_at: string | null;
}

/** Migration 036: an OIDC sign-in sent to the provider, waiting for its callback (ten minutes). */
export interface OidcPendingTable {
  /** SHA-256 (hex) of the request's `state` (the `sb_oidc` cookie holds the state itself). */
  state_hash: string;
  /** Sealed JSON: the nonce and the PKCE verifier. */
  request: string;
  /** Where the browser goes once signed in: a path, or a URL on the public URL's origin. */
  return_to: string;
  /** SHA-256 (hex) of the invitation token the sign-in was started with, if any. */
  invitation_hash: string | null;
  expires_ms: number;
}

/** Migration 036: a provider's subject and the user it is. */
export interface OidcIdentitiesTable {
  issuer: string;
  subject: string;
  user_id: string;
  created_at: string;
}
