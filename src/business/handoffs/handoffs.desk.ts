/**
 * The team's desk in Slack or Discord: each handoff's card (the conversation so far and Accept)
 * starts a thread; lines in it tell how the handoff stands; a member's clicks and replies there act
 * on it as that member (by their user id on the platform).
 */
import type { Selectable } from 'kysely';
import type { Database, HandoffRow } from '../../db/schema.js';
import { ConflictError, ValidationError } from '../../errors.js';
import { emailKey } from '../teams/teams.service.js';
import type { HandoffBase, LoadedTeam } from './handoffs.base.js';
import type { DeskButton, Relay } from './handoffs.relay.js';
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

/** What a desk click or reply does: the member's own accept, reply, hand-back or resolve. */
export interface DeskWork {
  accept(workspaceId: string, id: string, email: string): Promise<unknown>;
  reply(workspaceId: string, id: string, email: string, text: string, fromDesk?: boolean): Promise<unknown>;
  end(workspaceId: string, id: string, to: 'returned' | 'resolved', email: string | undefined): Promise<unknown>;
}

/** The desk's settings and what comes in from it: members' replies in a thread and button clicks. */
export function createDesk(base: HandoffBase, relay: Relay, posts: DeskPosts, work: DeskWork) {
  const { store, teamOf } = base;
  const { deskLine } = posts;
  return {
    /**
     * Where the team works handoffs in chat: one of the workspace's Slack or Discord channels and a
     * conversation in it (`dm`: the offered member's direct messages), or null to stop.
     */
    async setTeamDesk(workspaceId: string, teamId: string, desk: { channelId: string; conversation: string } | null): Promise<void> {
      await teamOf(workspaceId, teamId);
      if (desk === null) return void (await store.setTeamDesk(workspaceId, teamId, null, null));
      const channels = relay.channels();
      if (!channels) throw new ConflictError('Desks are not available in this process.');
      const type = await channels.typeOf(workspaceId, desk.channelId);
      if (type === 'webhook') throw ValidationError.field('desk.channelId', 'must be a Slack or Discord channel (a webhook channel has no members to click Accept)');
      if (type === 'discord' && desk.conversation === 'dm') throw ValidationError.field('desk.conversation', 'must be a Discord channel id: a Discord desk works in threads of a server channel (dm is for Slack)');
      await store.setTeamDesk(workspaceId, teamId, desk.channelId, desk.conversation);
    },

    /** Members' user ids on the desk platform; an e-mail that is no member → 400 naming `chatUsers.<i>.email`. */
    async setChatUsers(workspaceId: string, teamId: string, users: Array<{ email: string; chatUserId: string | null }>): Promise<void> {
      const team = await teamOf(workspaceId, teamId);
      const known = new Set(team.members.map((m) => m.email_key));
      const missing = users.findIndex((u) => !known.has(emailKey(u.email)));
      if (missing >= 0) throw ValidationError.field(`chatUsers.${missing}.email`, `is not a member of team ${teamId}`);
      await store.setChatUserIds(workspaceId, teamId, users.map((u) => ({ emailKey: emailKey(u.email), chatUserId: u.chatUserId })));
    },

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
        await work.reply(workspaceId, row.id, member.email, message.text, true);
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
        if (action.actionId === 'handoff.accept') await work.accept(workspaceId, row.id, member.email);
        else await work.end(workspaceId, row.id, action.actionId === 'handoff.return' ? 'returned' : 'resolved', member.email);
      } catch (err) {
        if (!(err instanceof ConflictError)) throw err;
        await deskLine(row, `${who(member)}: ${err.message}`);
      }
    },
  };
}
