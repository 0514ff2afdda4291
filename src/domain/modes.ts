/**
 * The modes of a channel attachment: what a realtime connection may do on a channel it attached
 * to, as granted from its capability. The values are the protocol's flag bits (src/realtime/protocol.ts
 * spreads them into its Flag), and the log's `channel.attached` event carries them as they are.
 */
export const Mode = {
  PRESENCE: 1 << 16,
  PUBLISH: 1 << 17,
  SUBSCRIBE: 1 << 18,
  PRESENCE_SUBSCRIBE: 1 << 19,
} as const;

/** The four modes this service grants (annotations and objects are not served). */
export const MODES = Mode.PRESENCE | Mode.PUBLISH | Mode.SUBSCRIBE | Mode.PRESENCE_SUBSCRIBE;
