import { createContext, useContext } from 'react';
import type { Me, Scope } from './api';

export interface Auth {
  me: Me;
  can: (scope: Scope) => boolean;
  /** Why a control is disabled for this key, or undefined when it is allowed. */
  lacks: (scope: Scope) => string | undefined;
}

export const AuthContext = createContext<Auth | null>(null);
export function useAuth(): Auth {
  const a = useContext(AuthContext);
  if (!a) throw new Error('no auth');
  return a;
}

export function makeAuth(me: Me): Auth {
  const has = (s: Scope) => me.key.scopes.includes('admin') || (s !== 'admin' && me.key.scopes.includes('write')) || me.key.scopes.includes(s);
  return {
    me,
    can: has,
    lacks: (s) => (has(s) ? undefined : `Needs a key with the ${s} scope; this key has ${me.key.scopes.join(', ')}.`),
  };
}
