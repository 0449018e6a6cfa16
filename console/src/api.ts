/**
 * The console's only way to the server: the public API, with the sign-in session's cookie (HttpOnly,
 * sent by the browser) and, on every request that changes something, the session's CSRF token. The
 * token lives in this module's memory only: a reload asks `GET /auth/me` for it again.
 */
export interface ProblemField {
  path: string;
  message: string;
}
export interface Problem {
  title?: string;
  status?: number;
  detail?: string;
  code?: string;
  errors?: ProblemField[];
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly problem: Problem,
  ) {
    super(problem.detail ?? problem.title ?? `HTTP ${status}`);
  }
}

let csrfToken: string | null = null;
/** Kept from `GET /auth/me` or a sign-in's answer; never written to any browser storage. */
export const setCsrfToken = (token: string | null) => {
  csrfToken = token;
};
const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);
/** The headers a request of `method` adds for the session: `X-CSRF-Token` unless it is a read. */
export function sessionHeaders(method = 'POST'): Record<string, string> {
  return !SAFE.has(method.toUpperCase()) && csrfToken ? { 'x-csrf-token': csrfToken } : {};
}

let unauthorized: (reason: string) => void = () => undefined;
/** Called on any 401: the app returns to sign-in with the reason. */
export function onUnauthorized(fn: (reason: string) => void) {
  unauthorized = fn;
}
export function signalUnauthorized(reason: string) {
  unauthorized(reason);
}

export async function readProblem(res: Response): Promise<Problem> {
  const text = await res.text();
  try {
    return JSON.parse(text) as Problem;
  } catch {
    return { status: res.status, title: res.statusText, detail: text.slice(0, 300) };
  }
}

/** `quiet`: a 401 is the caller's to handle (the sign-in pages), not a signal that the session ended. */
export async function request(method: string, path: string, body?: unknown, opts: { quiet?: boolean } = {}): Promise<Response> {
  const headers: Record<string, string> = sessionHeaders(method);
  let payload: BodyInit | undefined;
  if (body instanceof FormData) payload = body;
  else if (body !== undefined) {
    headers['content-type'] = 'application/json';
    payload = JSON.stringify(body);
  }
  const res = await fetch(`/api${path}`, { method, headers, body: payload, credentials: 'same-origin' });
  if (!res.ok) {
    const problem = await readProblem(res);
    if (res.status === 401 && !opts.quiet) unauthorized(problem.detail ?? 'Your session has ended.');
    throw new ApiError(res.status, problem);
  }
  return res;
}

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await request(method, path, body);
  if (res.status === 204) return undefined as T;
  return (await res.json()) as T;
}

export const get = <T>(path: string) => api<T>('GET', path);

export function qs(params: Record<string, string | number | undefined | null>): string {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') u.set(k, String(v));
  const s = u.toString();
  return s ? `?${s}` : '';
}

/** Multipart upload with progress (fetch has no upload progress). */
export function upload(path: string, form: FormData, onProgress: (fraction: number) => void): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', `/api${path}`);
    xhr.withCredentials = true;
    for (const [name, value] of Object.entries(sessionHeaders('POST'))) xhr.setRequestHeader(name, value);
    xhr.upload.onprogress = (e) => e.lengthComputable && onProgress(e.loaded / e.total);
    xhr.onerror = () => reject(new ApiError(0, { title: 'Network error', detail: 'The upload did not reach the server.' }));
    xhr.onload = () => {
      let body: unknown = null;
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        body = { detail: xhr.responseText };
      }
      if (xhr.status >= 200 && xhr.status < 300) return resolve(body);
      const problem = body as Problem;
      if (xhr.status === 401) unauthorized(problem.detail ?? 'Your session has ended.');
      reject(new ApiError(xhr.status, problem));
    };
    xhr.send(form);
  });
}

export interface List<T> {
  data: T[];
  nextCursor: string | null;
}
export type Scope = 'read' | 'write' | 'admin';
export interface ApiKey {
  id: string;
  name: string;
  prefix: string;
  scopes: Scope[];
  status: string;
  createdAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
  rotatedAt: string | null;
}
export type Role = 'viewer' | 'agent' | 'editor' | 'admin' | 'owner';
export interface User {
  id: string;
  email: string;
  name: string;
}
/** `GET /auth/me`: with the cookie, the person, the session's workspace, their role and the CSRF token. */
export interface Me {
  key?: ApiKey;
  user?: User;
  workspace: { id: string; name: string };
  role: Role;
  csrfToken?: string;
}
/** `GET /auth/methods`: what the sign-in page may offer. */
export interface SignInMethods {
  password: true;
  oidc: { name: string; startUrl: string } | null;
}
export interface Persona {
  id: string;
  name: string;
  instructions: string;
  traits: string[];
  model: string | null;
  temperature: number | null;
  maxTokens: number | null;
  tools: string[];
  /** The current version (GET /personas/{id}/versions). */
  version: number;
  /** The team whose members take over its conversations (not versioned). */
  teamId: string | null;
  /** When a conversation goes to the team; `/human` from the user always does. */
  handoff: HandoffPolicy;
  createdAt: string;
  updatedAt: string;
}
export interface HandoffPolicy {
  /** The persona has the built-in `handoff` tool. */
  tool: boolean;
  /** A user message containing one of these (case ignored) goes to a person. */
  keywords: string[];
  /** A rating of 1 or 2 hands the conversation over. */
  lowRating: boolean;
}
/** One version of a persona: its fields as they were, who changed them and when. */
export interface PersonaVersion {
  version: number;
  name: string;
  instructions: string;
  traits: string[];
  model: string | null;
  temperature: number | null;
  maxTokens: number | null;
  tools: string[];
  createdAt: string;
  createdBy: string | null;
}
/** `per_…` (the current version) or `per_…@n` (version n), as A/B tests and runs name a persona. */
export function parsePersonaRef(ref: string): { personaId: string; version: number | null } {
  const m = /^(.*)@(\d+)$/.exec(ref);
  return m ? { personaId: m[1]!, version: Number(m[2]) } : { personaId: ref, version: null };
}
export interface EvalCase {
  input?: string;
  messages?: { role: 'user' | 'assistant'; content: string }[];
  expected?: string;
  mustContain?: string[];
  mustNotContain?: string[];
  regex?: string;
  expectedSources?: string[];
  jsonSchema?: Record<string, unknown>;
  rubric?: string;
  tags?: string[];
}
export interface Dataset {
  id: string;
  name: string;
  description: string | null;
  caseCount: number;
  createdAt: string;
  updatedAt: string;
}
export interface DatasetCase {
  id: string;
  datasetId: string;
  position: number;
  case: EvalCase;
  sessionId: string | null;
  createdAt: string;
}
/** A case's question in one line: its input, or the last user turn of its messages. */
export function caseQuestion(c: EvalCase): string {
  if (c.input !== undefined) return c.input;
  const last = c.messages?.filter((m) => m.role === 'user').at(-1);
  return last ? `${last.content} (after ${c.messages!.length - 1} earlier turns)` : '(no input)';
}
export interface Source {
  id: string;
  name: string;
  kind: string;
  personaId: string | null;
  status: 'processing' | 'ready' | 'failed';
  error: string | null;
  bytes: number;
  chunkCount: number;
  createdAt: string;
}
export interface Session {
  id: string;
  personaId: string;
  title: string | null;
  messageCount: number;
  createdAt: string;
  lastMessageAt: string | null;
}
export interface ChannelSettings {
  respondTo: 'mentions' | 'all';
  replyInThread: boolean;
  allowedConversations: string[];
  enabled: boolean;
  streaming: boolean;
  feedbackButtons: boolean;
  statusMessages: string[];
  suggestedPrompts: { title: string; message: string }[];
}
export interface Channel {
  id: string;
  type: 'slack' | 'discord' | 'webhook';
  name: string;
  personaId: string | null;
  abTestId: string | null;
  status: string;
  statusDetail: string | null;
  settings: ChannelSettings;
  updatedAt: string;
}

export interface TeamMember {
  email: string;
  role: 'member' | 'lead';
  status: 'available' | 'busy' | 'offline';
  /** Their user id on the team's desk platform (Slack U…, Discord id). */
  chatUserId: string | null;
}
export interface Team {
  id: string;
  name: string;
  members: TeamMember[];
  availability: { status: 'available' | 'busy' | 'offline'; timezone: string; weekly: { day: string; start: string; end: string }[] };
  availableNow: boolean;
  handoff: { offerSeconds: number; notifyUrl: string | null; desk: { channelId: string; conversation: string } | null };
  createdAt: string;
  updatedAt: string;
}
export type HandoffStatus = 'queued' | 'offered' | 'accepted' | 'resolved' | 'returned';
export interface Handoff {
  id: string;
  /** null once its conversation was deleted. */
  sessionId: string | null;
  personaId: string;
  teamId: string;
  status: HandoffStatus;
  trigger: 'user' | 'tool' | 'rule' | 'api';
  reason: string;
  /** Offered to, or accepted by. */
  member: string | null;
  offerUntil: string | null;
  offers: number;
  /** Queued: when the team is next available. */
  nextAvailableAt: string | null;
  createdAt: string;
  acceptedAt: string | null;
  firstReplyAt: string | null;
  endedAt: string | null;
  endedBy: string | null;
}
export interface HandoffMessage {
  id: string;
  role: 'user' | 'assistant';
  content: string;
  /** null: the user, or the persona on an assistant message; `human:<email>`: a team member; `system`: a notice. */
  author: string | null;
  createdAt: string;
}
export interface HandoffDetail extends Handoff {
  messages: HandoffMessage[];
}
