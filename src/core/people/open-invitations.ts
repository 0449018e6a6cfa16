import type { Config } from '../../config.js';
import { openBackend } from '../../db/open.js';
import { systemClock } from '../../lib/clock.js';
import { randomIds } from '../../lib/ids.js';
import { loadSecretKey } from '../../lib/cipher.js';
import { createLogger } from '../../lib/logger.js';
import { systemActor } from '../auth/actor.js';
import type { Role } from '../auth/roles.js';
import { AppError } from '../../errors.js';
import { createInvitationsService, type Invitation } from './invitations.service.js';
import { createLoginSessions } from './login-sessions.js';
import { createMembersStore } from './members.store.js';
import { createPeopleStore } from './people.store.js';

/**
 * `switchboard users create`: an invitation made on the configured database (migrated as `serve`
 * would), without the HTTP server or the rest of the context. The CLI acts as the system (an owner):
 * its link lets the person set a password and join with `role`.
 */
export async function createUserInvitation(config: Config, input: { workspace: string; email: string; role: Role }): Promise<{ workspace: { id: string; name: string }; invitation: Invitation; token: string }> {
  const backend = await openBackend(config, createLogger(config.logLevel));
  try {
    const db = backend.db;
    const store = createMembersStore(db.kysely, db.kind === 'postgres');
    const people = createPeopleStore(db.kysely);
    const loginSessions = createLoginSessions({ secret: loadSecretKey(config.secret, config.dataDir), store: people, clock: systemClock, ids: randomIds, idleMs: config.signIn.idleMs, maxMs: config.signIn.maxMs });
    const invitations = createInvitationsService({ store, people, loginSessions, clock: systemClock, ids: randomIds });
    const ws = await store.workspaceByName(input.workspace);
    if (!ws) throw new AppError('not_found', `Workspace "${input.workspace}" does not exist; see "switchboard workspaces create" (the default one is made at the first start).`);
    const { invitation, token } = await invitations.invite(systemActor(ws.id, 'cli'), { email: input.email, role: input.role });
    return { workspace: ws, invitation, token };
  } finally {
    await backend.close();
  }
}
