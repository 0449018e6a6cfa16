/**
 * Whether a channel id names a channel of the workspace. Sessions and analytics filter by
 * `channelId` and answer 404 for an unknown one (API.md §1); they ask this one function, which the
 * composition root builds over the channels store.
 */
export type ChannelExists = (workspaceId: string, channelId: string) => Promise<boolean>;
