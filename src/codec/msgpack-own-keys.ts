// A MessagePack reader for the one value the shared decoder (msgpack.ts) refuses to read: a map with
// a key "__proto__". Its key is made an own property, as JSON.parse makes it, never the object's
// prototype. The realtime JSON frames let such keys into the log until they were refused
// (src/realtime/protocol.ts); decodeEvent (src/log/event-codec.ts) reads those records with this,
// for the projections and the audit replay alike, rather than stopping on them. Nothing a client
// sends is read with it.

const text = new TextDecoder('utf-8', { ignoreBOM: true });

class Reader {
  private p = 0;
  private readonly view: DataView;

  constructor(private readonly b: Uint8Array) {
    this.view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  }

  private take(n: number): number {
    const at = this.p;
    if (n < 0 || at + n > this.b.length) throw new RangeError('MessagePack value cut short');
    this.p = at + n;
    return at;
  }

  private u8(): number {
    return this.b[this.take(1)];
  }

  private u16(): number {
    return this.view.getUint16(this.take(2));
  }

  private u32(): number {
    return this.view.getUint32(this.take(4));
  }

  private str(n: number): string {
    const at = this.take(n);
    return text.decode(this.b.subarray(at, at + n));
  }

  private bin(n: number): Uint8Array {
    const at = this.take(n);
    return this.b.slice(at, at + n);
  }

  private array(n: number, depth: number): unknown[] {
    const out: unknown[] = [];
    for (let i = 0; i < n; i++) out.push(this.value(depth + 1));
    return out;
  }

  private map(n: number, depth: number): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (let i = 0; i < n; i++) {
      const key = this.value(depth + 1);
      if (typeof key !== 'string' && typeof key !== 'number') throw new TypeError('a MessagePack map key that is neither a string nor a number');
      const value = this.value(depth + 1);
      // an own property whatever its name (an assignment to "__proto__" would set the prototype)
      Object.defineProperty(out, String(key), { value, enumerable: true, writable: true, configurable: true });
    }
    return out;
  }

  value(depth = 0): unknown {
    if (depth > 1000) throw new RangeError('MessagePack value nested too deep');
    const h = this.u8();
    if (h <= 0x7f) return h;
    if (h >= 0xe0) return h - 0x100;
    if (h >= 0xa0 && h <= 0xbf) return this.str(h & 0x1f);
    if (h >= 0x80 && h <= 0x8f) return this.map(h & 0x0f, depth);
    if (h >= 0x90 && h <= 0x9f) return this.array(h & 0x0f, depth);
    const v = this.view;
    switch (h) {
      case 0xc0:
        return null;
      case 0xc2:
        return false;
      case 0xc3:
        return true;
      case 0xcc:
        return this.u8();
      case 0xcd:
        return this.u16();
      case 0xce:
        return this.u32();
      case 0xcf:
        return this.u32() * 0x1_0000_0000 + this.u32();
      case 0xd0:
        return v.getInt8(this.take(1));
      case 0xd1:
        return v.getInt16(this.take(2));
      case 0xd2:
        return v.getInt32(this.take(4));
      case 0xd3: {
        const high = v.getInt32(this.take(4));
        return high * 0x1_0000_0000 + this.u32();
      }
      case 0xca:
        return v.getFloat32(this.take(4));
      case 0xcb:
        return v.getFloat64(this.take(8));
      case 0xd9:
        return this.str(this.u8());
      case 0xda:
        return this.str(this.u16());
      case 0xdb:
        return this.str(this.u32());
      case 0xc4:
        return this.bin(this.u8());
      case 0xc5:
        return this.bin(this.u16());
      case 0xc6:
        return this.bin(this.u32());
      case 0xdc:
        return this.array(this.u16(), depth);
      case 0xdd:
        return this.array(this.u32(), depth);
      case 0xde:
        return this.map(this.u16(), depth);
      case 0xdf:
        return this.map(this.u32(), depth);
      default:
        throw new TypeError(`MessagePack type 0x${h.toString(16)} (an extension) is not read here`);
    }
  }

  end(): void {
    if (this.p !== this.b.length) throw new RangeError('bytes after the MessagePack value');
  }
}

/** The value of bytes, its maps' keys (`__proto__` too) own properties. */
export function unpackOwnKeys(bytes: Uint8Array): unknown {
  const reader = new Reader(bytes);
  const value = reader.value();
  reader.end();
  return value;
}

/** Whether an error is the shared decoder's refusal of a `__proto__` key (and nothing else). */
export const isProtoKeyRefusal = (err: unknown): boolean => err instanceof Error && err.message === 'The key __proto__ is not allowed';
