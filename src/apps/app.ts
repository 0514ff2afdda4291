/** An application: its keys and its channel rules. Stored as events on the `apps` topic. */
export interface AppDefinition {
  appId: string;
  accountId: string;
  keys: KeyDefinition[];
  namespaces: NamespaceRule[];
  /** Where the app came from: the apps file, the generated default, or the sandbox route. */
  source: 'file' | 'default' | 'sandbox';
  createdAt: number;
}

export interface KeyDefinition {
  /** `appId.keyId` */
  keyName: string;
  keySecret: string;
  /** JSON string, as the spec's token details carry it. */
  capability: string;
  revoked?: boolean;
}

export interface NamespaceRule {
  id: string;
  persisted?: boolean;
  /** History retention of persisted channels, 24 to 72 hours. */
  retentionHours?: number;
  [flag: string]: unknown;
}

/** All operations on every channel, metachannels included (publish and presence there stay impossible). */
export const ALL_RIGHTS = '{"[*]*":["*"]}';

export const keyString = (key: KeyDefinition): string => `${key.keyName}:${key.keySecret}`;
