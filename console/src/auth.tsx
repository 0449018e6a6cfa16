import { createContext, useContext } from 'react';
import type { Me, Role, Scope } from './api';

/** viewer < agent < editor < admin < owner (src/core/auth/roles.ts, the server's one table). */
const ROLES: readonly Role[] = ['viewer', 'agent', 'editor', 'admin', 'owner'];
/** The role a route declaring a key scope asks of a person (roles.ts ROLE_OF_SCOPE). */
const ROLE_OF_SCOPE: Record<Scope, Role> = { read: 'viewer', write: 'editor', admin: 'admin' };
/** What a control needs: a key scope (mapped onto its role) or a role, as the route it calls declares. */
export type Requirement = Scope | Role;
export const roleOf = (needed: Requirement): Role => (needed in ROLE_OF_SCOPE ? ROLE_OF_SCOPE[needed as Scope] : (needed as Role));

export interface Auth {
  me: Me;
  can: (needed: Requirement) => boolean;
  /** Why a control is disabled for this role, or undefined when it is allowed. */
  lacks: (needed: Requirement) => string | undefined;
}

export const AuthContext = createContext<Auth | null>(null);
export function useAuth(): Auth {
  const a = useContext(AuthContext);
  if (!a) throw new Error('no auth');
  return a;
}

export function makeAuth(me: Me): Auth {
  const can = (needed: Requirement) => ROLES.indexOf(me.role) >= ROLES.indexOf(roleOf(needed));
  return {
    me,
    can,
    lacks: (needed) => {
      if (can(needed)) return undefined;
      const role = roleOf(needed);
      return `Needs the ${role} role${role === 'owner' ? '' : ' or above'}; your role in ${me.workspace.name} is ${me.role}.`;
    },
  };
}
