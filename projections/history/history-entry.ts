import type { StoredMessage } from '../../src/domain/message.js';

/**
 * One message in history. `serial` orders a channel's messages as the log does: the log offset of
 * the publish times 1024 plus the message's index in it (a publish holds at most 1000 messages).
 */
export interface HistoryEntry {
  appId: string;
  channel: string;
  serial: number;
  partition: number;
  message: StoredMessage;
}

export const MAX_PER_PUBLISH = 1000;
export const serialOf = (offset: number, index: number): number => offset * 1024 + index;
/** The log offset of the publish a serial's message came in. */
export const offsetOfSerial = (serial: number): number => Math.floor(serial / 1024);

export interface HistoryQuery {
  appId: string;
  channel: string;
  /** inclusive bounds on message timestamps */
  start: number;
  end: number;
  limit: number;
  direction: 'forwards' | 'backwards';
  /** continue after this serial (exclusive), in the query's direction */
  after?: number;
}
