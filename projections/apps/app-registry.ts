import type { AppDefinition, KeyDefinition, NamespaceRule } from '../../src/domain/app.js';
import { namespaceOf } from '../../src/domain/channel.js';
import type { AppCreated, AppDeleted, KeyEvent, LogEvent, RuleEvent } from '../../src/domain/events.js';

/** What the apps topic says of apps and keys (the events AppRegistry handles). */
export type AppEvent = AppCreated | AppDeleted | KeyEvent | RuleEvent;
const appIdOf = (event: AppEvent): string => (event.type === 'app.created' ? event.app.appId : event.appId);
const keyNameOf = (event: AppEvent): string | undefined =>
  event.type === 'key.created' ? event.key.keyName : event.type === 'key.updated' || event.type === 'key.revoked' ? event.keyName : undefined;

/**
 * The applications projection: every app and key the service knows, from the apps file, the
 * generated default app, and `app.created` / `app.deleted` and key management events
 * (`key.created` / `key.updated` / `key.revoked`) on the `apps` topic.
 * Every instance applies the whole topic; a start restores the topic's events as compacted at its
 * snapshot (`compacted`) and reads only the topic after it (projections/apps/apps-snapshot.ts).
 */
export class AppRegistry {
  private readonly apps = new Map<string, AppDefinition>();
  private readonly keys = new Map<string, { app: AppDefinition; key: KeyDefinition }>();
  /** Changes whenever an app or key changes, so caches of verified credentials can tell. */
  version = 0;
  /**
   * The topic's events compacted, per app: applied over the configured apps (the apps file, the
   * default app) they give what applying the whole topic gives, whatever those are at the next
   * start. An app's events before its last app.created or app.deleted change nothing (that one
   * replaces the app whole), and a key's updates in a row are one update.
   */
  private readonly topicEvents = new Map<string, AppEvent[]>();
  private readonly listeners = new Set<() => void>();

  static readonly handles = ['app.created', 'app.deleted', 'key.created', 'key.updated', 'key.revoked', 'rule.created', 'rule.deleted'] as const;

  canHandle(event: LogEvent): boolean {
    return (AppRegistry.handles as readonly string[]).includes(event.type);
  }

  evolve(event: LogEvent): void {
    if (this.canHandle(event)) this.compact(event as AppEvent);
    if (event.type === 'app.created') this.put(event.app);
    else if (event.type === 'app.deleted') this.remove(event.appId);
    else if (event.type === 'key.created' || event.type === 'key.updated' || event.type === 'key.revoked') this.evolveKey(event);
    else if (event.type === 'rule.created' || event.type === 'rule.deleted') this.evolveRule(event);
  }

  /** A rule added replaces the app's rule of the same id; removing a rule it has not changes nothing. */
  private evolveRule(event: RuleEvent): void {
    const app = this.apps.get(event.appId);
    if (!app) return;
    const id = event.type === 'rule.created' ? event.rule.id : event.ruleId;
    const rules = (app.rules ?? []).filter((r) => r.id !== id);
    if (event.type === 'rule.created') rules.push(event.rule);
    else if (rules.length === (app.rules ?? []).length) return;
    this.put({ ...app, rules });
  }

  /**
   * A key event changes the app's key list (a new AppDefinition: credentials already handed out
   * keep the one they were made with). An event for an app not known here (left out of the apps
   * file) changes nothing; a key made twice (a repeat) is made once; a revocation is for good.
   */
  private evolveKey(event: KeyEvent): void {
    const app = this.apps.get(event.appId);
    if (!app) return;
    let keys: AppDefinition['keys'];
    if (event.type === 'key.created') {
      if (app.keys.some((k) => k.keyName === event.key.keyName)) return;
      keys = [...app.keys, event.key];
    } else {
      const at = app.keys.findIndex((k) => k.keyName === event.keyName);
      if (at < 0) return;
      const key = app.keys[at];
      let changed: KeyDefinition;
      if (event.type === 'key.revoked') changed = { ...key, revoked: true, modified: event.modified };
      else {
        changed = { ...key, modified: event.modified };
        if (event.capability !== undefined) changed.capability = event.capability;
        if (event.name !== undefined) changed.name = event.name;
        if (event.revocableTokens !== undefined) changed.revocableTokens = event.revocableTokens;
        if (event.management !== undefined) changed.management = event.management;
      }
      keys = app.keys.map((k, i) => (i === at ? changed : k));
    }
    this.put({ ...app, keys });
  }

  put(app: AppDefinition): void {
    this.drop(app.appId);
    this.version++;
    this.apps.set(app.appId, app);
    for (const key of app.keys) this.keys.set(key.keyName, { app, key });
    this.changed();
  }

  remove(appId: string): void {
    if (this.drop(appId)) this.changed();
  }

  /**
   * Calls `listener` after each change of an app, its keys or its rules (webhook delivery starts
   * and stops rules so); returns what stops it. Called synchronously: a listener only schedules.
   */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private drop(appId: string): boolean {
    const app = this.apps.get(appId);
    if (!app) return false;
    this.version++;
    for (const key of app.keys) this.keys.delete(key.keyName);
    this.apps.delete(appId);
    return true;
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }

  private compact(event: AppEvent): void {
    const appId = appIdOf(event);
    const events = this.topicEvents.get(appId);
    if (event.type === 'app.created' || event.type === 'app.deleted' || !events) {
      this.topicEvents.set(appId, [event]);
      return;
    }
    const keyName = keyNameOf(event);
    let previous: AppEvent | undefined;
    for (let i = events.length - 1; i >= 0 && !previous; i--) if (keyNameOf(events[i]) === keyName) previous = events[i];
    if (event.type === 'key.updated' && previous?.type === 'key.updated') {
      // Absent fields are unchanged: the later update's fields over the earlier's.
      const merged = { ...previous };
      for (const [field, value] of Object.entries(event)) if (value !== undefined) (merged as Record<string, unknown>)[field] = value;
      events[events.lastIndexOf(previous)] = merged;
    } else events.push(event);
  }

  /** The topic's events compacted (for a snapshot): restoring them over the configured apps gives this registry. */
  compacted(): AppEvent[] {
    return [...this.topicEvents.values()].flat();
  }

  app(appId: string): AppDefinition | undefined {
    return this.apps.get(appId);
  }

  key(keyName: string): { app: AppDefinition; key: KeyDefinition } | undefined {
    return this.keys.get(keyName);
  }

  all(): AppDefinition[] {
    return [...this.apps.values()];
  }

  /** The rule of the namespace a channel belongs to, if the app has one. */
  rule(appId: string, channel: string): NamespaceRule | undefined {
    const ns = namespaceOf(channel);
    if (ns === undefined) return undefined;
    return this.apps.get(appId)?.namespaces.find((n) => n.id === ns);
  }
}
