/**
 * The team's desk in Slack or Discord: each handoff's card (the conversation so far and Accept)
 * starts a thread; lines in it tell how the handoff stands; a member's clicks and replies there act
 * on it as that member (by their user id on the platform).
 */
import type { Selectable } from 'kysely';
import type { Database, HandoffRow } from '../../db/schema.js';
import type { Actor } from '../../core/auth/actor.js';
import { ConflictError } from '../../errors.js';
import { emailKey } from '../teams/teams.service.js';
import type { HandoffBase, LoadedTeam } from './handoffs.base.js';
import type { DeskButton, Relay } from './handoffs.relay.js';
import type { Work } from './handoffs.work.js';
import type { HandoffStore, Writes } from './handoffs.store.js';

type Outbox = NonNullable<Writes['outbox']>[number];

/** Where a handoff's card was posted: its thread is the handoff's at the desk. */
export type DeskThread = Pick<Selectable<Database['handoff_desk_threads']>, 'workspace_id' | 'handoff_id'>;

/** A message in a desk thread, or a click on a desk button, as a channel received it. */
export interface DeskMessage {
  userId: string;
  text: string;
}
export interface DeskAction {
  conversationId: string;
  userId: string;
  actionId: string;
  value: string;
}

/** What a user or a member wrote, shown at a desk: no `<@…>` / `<!here>` markup, so it pings nobody there. */
export const inert = (text: string) => text.replace(/<([@!#])/g, '‹$1');

const DESK_ACTIONS = new Set(['handoff.accept', 'handoff.return', 'handoff.resolve']);
/** Messages of the conversation a desk card shows, and how much of each. */
const CARD_MESSAGES = 10;
const CARD_MESSAGE_CHARS = 300;

/** A member as the desk shows them: a mention when their user id there is known. */
export const who = (member: { email: string; chat_user_id: string | null }) => (member.chat_user_id ? `<@${member.chat_user_id}> (${member.email})` : member.email);

/** What the desk posts: cards and lines, queued with the change that causes them. */
export function createDeskPosts(base: HandoffBase, relay: Relay) {
  const { store, ids, personas, now } = base;

  /**
   * Tells the team's desk of an offer or a wait: the card (the conversation so far and Accept) the
   * first time in a team channel, a line after; with `dm`, a card to each offered member who has a
   * user id there.
   */
  async function cardRows(row: HandoffRow, team: LoadedTeam, conversation: Awaited<ReturnType<HandoffStore['conversation']>>): Promise<Outbox[]> {
    const desk = await store.teamDesk(row.team_id);
    if (!desk?.desk_channel_id || !desk.desk_conversation) return [];
    const offered = row.status === 'offered' ? team.members.find((m) => m.email_key === emailKey(row.member ?? '')) : undefined;
    const state = offered ? `Offered to ${who(offered)}; any member may accept.` : 'Nobody is available now: it waits in the queue; any member may accept.';
    const dm = desk.desk_conversation === 'dm';
    if (dm && !offered?.chat_user_id) return [];
    const at = now();
    const base = { workspace_id: row.workspace_id, handoff_id: row.id, channel_id: desk.desk_channel_id, message_id: ids('msg'), status: 'pending' as const, attempts: 0, next_at: at, created_at: at };
    if (dm || !(await store.hasTeamCard(row.id))) {
      const persona = await personas.get(row.workspace_id, row.persona_id).catch(() => null);
      const lines = conversation.slice(-CARD_MESSAGES).map((m) => {
        const from = m.role === 'user' ? 'User' : m.author?.startsWith('human:') ? m.author.slice(6) : m.author === 'system' ? 'Notice' : (persona?.name ?? 'Assistant');
        const text = m.content.length > CARD_MESSAGE_CHARS ? `${m.content.slice(0, CARD_MESSAGE_CHARS)}…` : m.content;
        return `> ${from}: ${inert(text.replace(/\s+/g, ' '))}`;
      });
      const text = [`Handoff ${row.id} from ${persona?.name ?? row.persona_id} (${row.trigger}): ${inert(row.reason)}`, ...lines, state, 'Accept, then reply in this thread: your replies reach the user.'].join('\n');
      const accept: DeskButton = { id: 'handoff.accept', label: 'Accept', value: row.id, style: 'primary' };
      return [{ ...base, kind: 'desk-card', conversation_id: dm ? offered!.chat_user_id! : desk.desk_conversation, text, buttons: JSON.stringify([accept]), member_key: dm ? offered!.email_key : null }];
    }
    return [{ ...base, kind: 'desk', conversation_id: '', text: state, buttons: null, member_key: null }];
  }

  /** A line in the handoff's desk thread, when it has one (or its card is on the way). */
  async function lineRows(row: HandoffRow, text: string, buttons?: DeskButton[]): Promise<Outbox[]> {
    const desk = await store.teamDesk(row.team_id);
    if (!desk?.desk_channel_id || !(await store.hasCard(row.id))) return [];
    const at = now();
    return [
      {
        workspace_id: row.workspace_id,
        handoff_id: row.id,
        channel_id: desk.desk_channel_id,
        conversation_id: '',
        message_id: ids('msg'),
        text,
        kind: 'desk',
        buttons: buttons ? JSON.stringify(buttons) : null,
        member_key: null,
        status: 'pending',
        attempts: 0,
        next_at: at,
        created_at: at,
      },
    ];
  }

  /** A line in the handoff's desk thread, written on its own (an answer to a member there). */
  async function deskLine(row: HandoffRow, text: string): Promise<void> {
    await relay.commit({ outbox: await lineRows(row, text) });
  }

  return { cardRows, lineRows, deskLine };
}

export type DeskPosts = ReturnType<typeof createDeskPosts>;

/**
 * Who acts at the desk: the channel, for the member whose platform user id clicked or wrote (the
 * audit log's actor). Acting as the user that chat id is linked to comes later (API.md §14).
 */
function deskActor(workspaceId: string, chatUserId: string, member: { email: string }): Actor {
  return { kind: 'channel', id: chatUserId, name: `${member.email} (desk)`, workspaceId, role: 'agent', scopes: ['read'], userId: null };
}

/** What comes in from the desk: members' replies in a thread and button clicks. */
export function createDesk(base: HandoffBase, posts: DeskPosts, work: Work) {
  const { store, teamOf } = base;
  const { deskLine } = posts;
  return {
    /** The handoff's desk thread a channel conversation is, if any (its messages are members', not the persona's). */
    deskThread: (channelId: string, conversationId: string): Promise<DeskThread | undefined> => store.deskThread(channelId, conversationId),

    /**
     * A message in a desk thread: the reply of the member who accepted reaches the user; anyone else
     * is told how it stands (a member who has not accepted), or ignored (not a member).
     */
    async deskMessage(workspaceId: string, thread: DeskThread, message: DeskMessage): Promise<void> {
      if (thread.workspace_id !== workspaceId) return;
      const row = await store.find(workspaceId, thread.handoff_id);
      if (!row) return;
      const team = await teamOf(workspaceId, row.team_id);
      const member = team.members.find((m) => m.chat_user_id === message.userId);
      if (!member) return;
      if (row.status === 'accepted' && row.member !== null && emailKey(row.member) === member.email_key) {
        await work.reply(workspaceId, row.id, { actor: deskActor(workspaceId, message.userId, member), email: member.email }, message.text, true);
      } else if (row.status === 'accepted') {
        await deskLine(row, `${who(member)}: this conversation is with ${row.member}; your message did not reach the user.`);
      } else if (row.status === 'queued' || row.status === 'offered') {
        await deskLine(row, `${who(member)}: accept first; your message did not reach the user.`);
      }
    },

    /** A click on a desk button: accept, hand back or resolve as the member whose user id clicked; a refusal is told in the thread. */
    async deskAction(workspaceId: string, channelId: string, action: DeskAction): Promise<void> {
      if (!DESK_ACTIONS.has(action.actionId)) return;
      // Only the buttons of this handoff's own desk thread act on it.
      const thread = await store.deskThread(channelId, action.conversationId);
      if (thread?.handoff_id !== action.value || thread.workspace_id !== workspaceId) return;
      const row = await store.find(workspaceId, action.value);
      if (!row) return;
      const team = await teamOf(workspaceId, row.team_id);
      const member = team.members.find((m) => m.chat_user_id === action.userId);
      if (!member) {
        await deskLine(row, `<@${action.userId}> is not a member of ${team.team.name} here: a lead adds their user id (chatUsers in the team's handoff settings).`);
        return;
      }
      try {
        const acting = { actor: deskActor(workspaceId, action.userId, member), email: member.email };
        if (action.actionId === 'handoff.accept') await work.accept(workspaceId, row.id, acting);
        else await work.end(workspaceId, row.id, action.actionId === 'handoff.return' ? 'returned' : 'resolved', acting);
      } catch (err) {
        if (!(err instanceof ConflictError)) throw err;
        await deskLine(row, `${who(member)}: ${err.message}`);
      }
    },
  };
}
