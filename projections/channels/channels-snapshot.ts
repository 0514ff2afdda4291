import type { ChannelState } from './channel-state.js';

/**
 * The channels projection's state as a snapshot holds it (projections/snapshots.ts): the channels
 * the log made, and the periods announced open. Maps become lists; what announce() schedules
 * (`dueBucket`) is left out, as the restore looks at every channel once.
 */
export interface ChannelsSnapshot {
  channels: {
    appId: string;
    channel: string;
    lastUse: number;
    period: string;
    openedAt: number;
    attachments: [connectionId: string, instanceId: string, modes: number][];
    members: [memberKey: string, connectionId: string][];
    occupancyCause?: string;
    occupancyChangedAt: number;
    occupancyAnnouncedAt: number;
  }[];
  announced: [key: string, period: string, at: number][];
}

export function encodeChannels(channels: Iterable<ChannelState>, announced: ReadonlyMap<string, { period: string; at: number }>): ChannelsSnapshot {
  const out: ChannelsSnapshot['channels'] = [];
  for (const s of channels) {
    out.push({
      appId: s.appId,
      channel: s.channel,
      lastUse: s.lastUse,
      period: s.period,
      openedAt: s.openedAt,
      attachments: [...s.attachments].map(([c, a]) => [c, a.instanceId, a.modes]),
      members: [...s.members],
      occupancyCause: s.occupancyCause,
      occupancyChangedAt: s.occupancyChangedAt,
      occupancyAnnouncedAt: s.occupancyAnnouncedAt,
    });
  }
  return { channels: out, announced: [...announced].map(([key, a]) => [key, a.period, a.at]) };
}

export function decodeChannels(state: ChannelsSnapshot): ChannelState[] {
  return state.channels.map((c) => {
    const s: ChannelState = {
      appId: c.appId,
      channel: c.channel,
      lastUse: c.lastUse,
      period: c.period,
      openedAt: c.openedAt,
      attachments: new Map(c.attachments.map(([connectionId, instanceId, modes]) => [connectionId, { instanceId, modes }])),
      members: new Map(c.members),
      occupancyChangedAt: c.occupancyChangedAt,
      occupancyAnnouncedAt: c.occupancyAnnouncedAt,
    };
    if (c.occupancyCause !== undefined) s.occupancyCause = c.occupancyCause;
    return s;
  });
}
