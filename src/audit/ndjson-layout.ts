// What the replay's transcoder (ndjson.ts) reads and writes: the fields of a publish in event-codec's
// layout, found by KeyTable, and the constant text of its line, each a Text to copy 4 bytes at a time.
import { KeyTable } from './msgpack-spans.js';

export const EVENT_TYPE = Buffer.from('messages.published');
const names = (list: string[]): Buffer[] => list.map((n) => Buffer.from(n));
// Field numbers: the index in these lists.
export const EVENT_KEYS = names(['type', 'appId', 'channel', 'transport', 'messages', 'clientIds', 'keyName']);
export const [E_TYPE, , , , E_MESSAGES, , E_KEYNAME] = [0, 1, 2, 3, 4, 5, 6];
export const MESSAGE_KEYS = names(['id', 'timestamp', 'name', 'clientId', 'connectionId', 'data', 'encoding', 'extras', 'action']);
export const EVENT_TABLE = new KeyTable(EVENT_KEYS);
export const MESSAGE_TABLE = new KeyTable(MESSAGE_KEYS);
export const [M_ID, M_TIMESTAMP, M_NAME, M_CLIENTID, M_CONNECTIONID, M_DATA, M_ENCODING, M_EXTRAS, M_ACTION] = [0, 1, 2, 3, 4, 5, 6, 7, 8];
/** messageToWire's key order (codec/message-wire.ts), data and encoding apart */
export const WIRE_ORDER = [M_ID, M_TIMESTAMP, M_NAME, M_CLIENTID, M_CONNECTIONID];
export const WIRE_AFTER_DATA = [M_EXTRAS, M_ACTION];
/** A constant of the output, with a view to copy it 4 bytes at a time. */
export class Text {
  readonly bytes: Buffer;
  readonly view: DataView;
  readonly length: number;
  /** the text, or its bytes (copied) */
  constructor(text: string | Uint8Array) {
    this.bytes = Buffer.from(text);
    this.view = new DataView(this.bytes.buffer, this.bytes.byteOffset, this.bytes.length);
    this.length = this.bytes.length;
  }
}
export const KEY_TEXT = (list: Buffer[]): Text[] => list.map((n) => new Text(`"${n.toString()}":`));
export const EVENT_KEY_TEXT = KEY_TEXT(EVENT_KEYS);
// The line's frame around the event.
export const T_TYPE = new Text(`"type":${JSON.stringify(EVENT_TYPE.toString())}`);
export const T_TIME = new Text(',"time":');
export const T_EVENT = new Text(',"event":{');
export const T_END_EVENT = new Text(']}');
export const T_CREDENTIAL = new Text(',"credential":{');
export const T_END_LINE = new Text('}\n');
export const T_BASE64 = new Text('"base64"');
export const T_NULL = new Text('null');
export const T_TRUE = new Text('true');
export const T_FALSE = new Text('false');
export const MESSAGE_KEY_TEXT = KEY_TEXT(MESSAGE_KEYS);

