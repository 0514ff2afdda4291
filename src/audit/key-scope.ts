// The replay's scope checked on a record's key as the embedded log holds it (bytes, in place:
// Log.scan), as replay-scope.ts's inScope checks a decoded key.
import { Topics, type LogRecord } from '../log/port.js';
import { inScope, type ScopeRequest } from './replay-scope.js';

/** The request's scope as key bytes: `appId:channel` (or a prefix of it, or `appId:` alone), or the app id (the apps topic). */
export class KeyScope {
  private readonly app: Buffer;
  /** `appId:channel` or `appId:prefix` as UTF-8 (undefined: every channel) */
  private readonly want: Buffer | undefined;

  constructor(private readonly request: ScopeRequest) {
    this.app = Buffer.from(request.appId);
    const { channels } = request;
    this.want = channels.kind === 'channel' ? Buffer.from(`${request.appId}:${channels.name}`) : channels.kind === 'prefix' ? Buffer.from(`${request.appId}:${channels.prefix}`) : undefined;
  }

  /** As lineOf's scope (inScope; the apps topic: the app's own key), on the key's bytes b[s, e). */
  holds(topic: string, b: Uint8Array, s: number, e: number): boolean {
    const app = this.app;
    const n = e - s;
    if (topic === Topics.apps) return n === app.length && startsWith(b, s, app);
    if (n <= app.length || b[s + app.length] !== 0x3a || !startsWith(b, s, app)) return false;
    const want = this.want;
    if (!want) return true;
    if (this.request.channels.kind === 'channel' ? n !== want.length : n < want.length) return false;
    return startsWith(b, s, want);
  }

  /** The same, for a key the log holds decoded. */
  holdsText(topic: string, key: string): boolean {
    return topic === Topics.apps ? key === this.request.appId : inScope({ key } as LogRecord, this.request);
  }
}

function startsWith(b: Uint8Array, s: number, want: Buffer): boolean {
  for (let i = 0; i < want.length; i++) if (b[s + i] !== want[i]) return false;
  return true;
}

