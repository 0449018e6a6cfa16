/**
 * MCP tools of members and invitations (API.md §14): the HTTP routes' operations through the same
 * services with the caller, so the same rules hold: `admin` and up; only an owner grants, changes or
 * removes `owner` or invites one; the last owner stays (409); each change writes its audit events.
 */
import { z } from 'zod';
import { pageInput, pageOutput } from '../../mcp/common-schemas.js';
import { defineTool, type McpFeature, READ_ONLY } from '../../mcp/tool-definition.js';
import { invitationUrl } from './invitations.service.js';
import { createdInvitationSchema, invitationSchema, inviteSchema, memberSchema } from './members.schemas.js';
import { roleSchema } from './people.schemas.js';

const userId = { userId: z.string().min(1).max(64).describe("The member's user id (usr_…); list_members finds it.") };
const ownerRule = 'Only an owner grants `owner`, changes an owner’s role or removes an owner; the workspace’s last owner cannot be demoted or removed (a conflict).';

export const membersFeature: McpFeature = {
  tools: [
    defineTool({
      name: 'list_members',
      title: 'List members',
      description: "Lists the workspace's members (people with a role: viewer < agent < editor < admin < owner), newest first. Pass `nextCursor` back as `cursor` for more. Needs the admin role.",
      input: z.strictObject({ ...pageInput }),
      output: pageOutput(memberSchema),
      annotations: READ_ONLY,
      scope: 'admin',
      run: ({ ctx, caller }, page) => ctx.services.members.list(caller, page),
    }),
    defineTool({
      name: 'change_member_role',
      title: "Change a member's role",
      description: `Gives a member a new role. A lower role revokes at once their API keys holding a scope above it (and the OAuth grants on them). ${ownerRule} Needs the admin role.`,
      input: z.strictObject({ ...userId, role: roleSchema }),
      output: memberSchema,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true },
      scope: 'admin',
      run: ({ ctx, caller }, { userId, role }) => ctx.services.members.changeRole(caller, userId, role),
    }),
    defineTool({
      name: 'remove_member',
      title: 'Remove a member',
      description: `Removes a member from the workspace; their API keys, sign-in sessions and OAuth grants here end at once. ${ownerRule} Needs the admin role.`,
      input: z.strictObject(userId),
      output: z.object({ userId: z.string(), removed: z.literal(true) }),
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false },
      scope: 'admin',
      run: async ({ ctx, caller }, { userId }) => {
        await ctx.services.members.remove(caller, userId);
        return { userId, removed: true as const };
      },
    }),
    defineTool({
      name: 'invite_member',
      title: 'Invite a member',
      description:
        'Invites someone by e-mail with a role and returns the invitation with its one-use link (valid 7 days), shown only in this result: hand it to the person. ' +
        'An admin invites up to `admin`; only an owner invites an owner. An e-mail that is already a member is a conflict. Needs the admin role.',
      input: inviteSchema,
      output: createdInvitationSchema.extend({
        note: z.string().optional().describe('Set when the link is only a path: the server does not know the address people reach it at.'),
      }),
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false },
      scope: 'admin',
      run: async ({ ctx, caller, publicBase }, input) => {
        const { invitation, token } = await ctx.services.invitations.invite(caller, input);
        if (publicBase !== undefined) return { invitation, url: invitationUrl(publicBase, token) };
        // Over stdio nothing listens: without SWITCHBOARD_PUBLIC_URL only the path is known.
        return {
          invitation,
          url: invitationUrl('', token),
          note: "Prefix the link with the address people reach Switchboard's console at, or set SWITCHBOARD_PUBLIC_URL for full links.",
        };
      },
    }),
    defineTool({
      name: 'list_invitations',
      title: 'List pending invitations',
      description: 'Lists the invitations not yet used, revoked or expired, newest first (never their links). Needs the admin role.',
      input: z.strictObject({ ...pageInput }),
      output: pageOutput(invitationSchema),
      annotations: READ_ONLY,
      scope: 'admin',
      run: ({ ctx, caller }, page) => ctx.services.invitations.listPending(caller, page),
    }),
    defineTool({
      name: 'revoke_invitation',
      title: 'Revoke an invitation',
      description: "Revokes a pending invitation: its link stops working. One used or revoked already is a conflict; only an owner revokes an owner's invitation. Needs the admin role.",
      input: z.strictObject({ id: z.string().min(1).max(64).describe("The invitation's id (inv_…).") }),
      output: z.object({ id: z.string(), revoked: z.literal(true) }),
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false },
      scope: 'admin',
      run: async ({ ctx, caller }, { id }) => {
        await ctx.services.invitations.revoke(caller, id);
        return { id, revoked: true as const };
      },
    }),
  ],
};
