/**
 * Whether a channel id names a channel of the workspace. Sessions and analytics filter by
 * `channelId` and answer 404 for an unknown one (API.md §1); they ask this one function, which the
 * composition root builds. Until the channels feature lands there are no channels: `noChannels`.
 */
export type ChannelExists = (workspaceId: string, channelId: string) => Promise<boolean>;

export const noChannels: ChannelExists = async () => false;
