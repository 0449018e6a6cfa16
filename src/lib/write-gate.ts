/**
 * A point between a read and the write made over it (a handoff's move, a persona's edit). Tests
 * pass one that holds the first caller there until a second has read the same row
 * (test/helpers/write-barrier.ts), so a race is real on either backend: on SQLite two requests
 * otherwise run read-then-write one after the other and never meet. Production passes none.
 */
export type WriteGate = (point: WritePoint, id: string) => Promise<void>;
export type WritePoint = 'handoff.move' | 'persona.edit' | 'member.owners' | 'invitation.accept';
