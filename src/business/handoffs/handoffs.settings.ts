/**
 * How a team takes handoffs (PUT /business/teams/:id/handoff): the offer time, the team's webhook,
 * its desk in Slack or Discord and its members' user ids there. Everything that can be refused is
 * checked first; then one write, with its audit event, in one transaction.
 */
import { auditRow } from '../../core/audit/audit.js';
import type { Actor } from '../../core/auth/actor.js';
import { ConflictError, ValidationError } from '../../errors.js';
import { assertPublicUrl } from '../../lib/address-guard.js';
import { emailKey } from '../teams/teams.service.js';
import type { HandoffBase } from './handoffs.base.js';
import { notifyContext, type Relay } from './handoffs.relay.js';

export interface TeamHandoffSettings {
  offerSeconds?: number | undefined;
  notify?: { url: string; secret: string } | null | undefined;
  desk?: { channelId: string; conversation: string } | null | undefined;
  chatUsers?: Array<{ email: string; chatUserId: string | null }> | undefined;
}

export function createSettings(base: HandoffBase, relay: Relay) {
  const { store, teamOf, webhooks, ids, clock, now } = base;
  return {
    async setTeamHandoff(actor: Actor, teamId: string, settings: TeamHandoffSettings): Promise<void> {
      const { workspaceId } = actor;
      const team = await teamOf(workspaceId, teamId);
      const patch: Parameters<typeof store.setTeamHandoff>[2] = {};
      const { offerSeconds, notify, desk, chatUsers } = settings;
      // The team's webhook: a URL that passes the address guard and a secret (sealed; never shown again), or null to stop.
      if (notify === null) Object.assign(patch, { notify_url: null, notify_secret: null });
      else if (notify !== undefined) {
        if (!webhooks) throw new ConflictError('Team webhooks are not available in this process.');
        await assertPublicUrl(notify.url, webhooks.guard, 'notify.url');
        Object.assign(patch, { notify_url: notify.url, notify_secret: webhooks.cipher.encrypt(notify.secret, notifyContext(teamId)) });
      }
      // The desk: one of the workspace's Slack or Discord channels and a conversation in it (`dm`: the offered member's direct messages).
      if (desk === null) Object.assign(patch, { desk_channel_id: null, desk_conversation: null });
      else if (desk !== undefined) {
        const channels = relay.channels();
        if (!channels) throw new ConflictError('Desks are not available in this process.');
        const type = await channels.typeOf(workspaceId, desk.channelId);
        if (type === 'webhook') throw ValidationError.field('desk.channelId', 'must be a Slack or Discord channel (a webhook channel has no members to click Accept)');
        if (type === 'discord' && desk.conversation === 'dm') throw ValidationError.field('desk.conversation', 'must be a Discord channel id: a Discord desk works in threads of a server channel (dm is for Slack)');
        Object.assign(patch, { desk_channel_id: desk.channelId, desk_conversation: desk.conversation });
      }
      // Members' user ids on the desk platform; an e-mail that is no member → 400 naming `chatUsers.<i>.email`.
      const known = new Set(team.members.map((m) => m.email_key));
      const missing = (chatUsers ?? []).findIndex((u) => !known.has(emailKey(u.email)));
      if (missing >= 0) throw ValidationError.field(`chatUsers.${missing}.email`, `is not a member of team ${teamId}`);
      if (offerSeconds !== undefined) Object.assign(patch, { offer_seconds: offerSeconds, updated_at: now() });
      const changes = (['offerSeconds', 'notify', 'desk', 'chatUsers'] as const).filter((f) => settings[f] !== undefined);
      if (changes.length === 0) return;
      await store.setTeamHandoff(
        workspaceId,
        teamId,
        patch,
        (chatUsers ?? []).map((u) => ({ emailKey: emailKey(u.email), chatUserId: u.chatUserId })),
        auditRow(ids, clock, actor, { action: 'team.update', target: { type: 'team', id: teamId }, changes: changes.map((c) => `handoff.${c}`) }),
      );
    },
  };
}
