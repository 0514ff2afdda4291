// Signed checkpoints of the log's hash chains (tamper evidence): at intervals the service appends
// to the `audit` topic the newest link of every topic partition's chain (src/log/embedded/chain.mjs),
// signed with an Ed25519 key of its own, kept outside the log (AUDIT_KEY_FILE). Anyone holding the
// public key can then check that the records up to those links are the ones the service accepted.
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { packValue, unpackValue } from '../codec/msgpack.js';
import type { SignedHead } from '../log/port.js';

/** A chain head as a checkpoint signs it: the log port's shape (src/log/port.ts). */
export type CheckpointHead = SignedHead;

export interface AuditCheckpoint {
  type: 'audit.checkpoint';
  /** ms since the epoch */
  at: number;
  heads: CheckpointHead[];
  /** the signing key's public half, DER (SPKI) as base64 */
  publicKey: string;
  /** Ed25519 over checkpointText(at, heads, previous), base64 */
  signature: string;
  /**
   * The first checkpoint after a start: the heads the run before signed last, as remembered outside
   * the log (witness.ts), so a tail cut while the service was down does not go unseen.
   */
  previous?: CheckpointHead[];
  /** A new key's first checkpoints: the retired key's signature over rotationText(publicKey) (AUDIT_PREVIOUS_KEY_FILE). */
  endorsement?: { publicKey: string; signature: string };
}

const headLine = (h: CheckpointHead): string => `${h.topic} ${h.partition} ${h.offset} ${h.link}${h.writer !== undefined ? ` ${h.writer} ${h.seq}` : ''}`;

/** The bytes signed: a line per head (and per previous head), so that no encoding's field order matters. */
export const checkpointText = (at: number, heads: CheckpointHead[], previous?: CheckpointHead[]): Buffer =>
  Buffer.from(`channel-messaging audit checkpoint v1\n${at}\n${heads.map(headLine).join('\n')}\n${(previous ?? []).map((h) => `previous ${headLine(h)}\n`).join('')}`);

/** What a retired key signs to hand its trust to the next one (a key rotation an auditor can follow). */
export const rotationText = (publicKey: string): Buffer => Buffer.from(`channel-messaging audit key rotation v1\n${publicKey}\n`);

/** A public key's fingerprint (SHA-256 of its DER, the first 16 bytes as hex pairs), as people compare them. */
export const fingerprintOf = (publicKeyBase64: string): string =>
  createHash('sha256').update(Buffer.from(publicKeyBase64, 'base64')).digest('hex').slice(0, 32).replace(/(..)(?!$)/g, '$1:');

/** A public key (PEM file text, or base64 DER) as the base64 DER a checkpoint names. */
export function publicKeyBase64(text: string): string {
  const trimmed = text.trim();
  const key = trimmed.startsWith('-----BEGIN') ? createPublicKey(trimmed) : createPublicKey({ key: Buffer.from(trimmed, 'base64'), format: 'der', type: 'spki' });
  if (key.asymmetricKeyType !== 'ed25519') throw new Error(`not an Ed25519 public key (${key.asymmetricKeyType})`);
  return (key.export({ format: 'der', type: 'spki' }) as Buffer).toString('base64');
}

export class CheckpointSigner {
  readonly publicKey: string;

  /** the retired key's endorsement of this one, carried by every checkpoint (see AuditCheckpoint) */
  private endorsement: AuditCheckpoint['endorsement'];

  private constructor(private readonly key: KeyObject) {
    this.publicKey = (createPublicKey(key).export({ format: 'der', type: 'spki' }) as Buffer).toString('base64');
  }

  /** The key in `path` (PKCS#8 PEM), made there (mode 0600) when the file does not exist. */
  static loadOrCreate(path: string): CheckpointSigner {
    if (!existsSync(path)) {
      mkdirSync(dirname(path), { recursive: true });
      const { privateKey } = generateKeyPairSync('ed25519');
      writeFileSync(`${path}.tmp`, privateKey.export({ format: 'pem', type: 'pkcs8' }) as string, { mode: 0o600 });
      renameSync(`${path}.tmp`, path);
      chmodSync(path, 0o600);
    }
    return CheckpointSigner.load(path);
  }

  static load(path: string): CheckpointSigner {
    let key: KeyObject;
    try {
      key = createPrivateKey(readFileSync(path, 'utf8'));
    } catch (err) {
      throw new Error(`AUDIT_KEY_FILE ${path}: not a private key in PEM (${(err as Error).message.split('\n')[0]})`);
    }
    if (key.asymmetricKeyType !== 'ed25519') throw new Error(`AUDIT_KEY_FILE ${path}: an Ed25519 key is needed, not ${key.asymmetricKeyType}`);
    return new CheckpointSigner(key);
  }

  get fingerprint(): string {
    return fingerprintOf(this.publicKey);
  }

  /** The public key as PEM, to hand to auditors. */
  publicKeyPem(): string {
    return createPublicKey(this.key).export({ format: 'pem', type: 'spki' }) as string;
  }

  /** This key succeeds `retired`'s: every checkpoint from now on carries the retired key's signature of this one. */
  endorsedBy(retired: CheckpointSigner): this {
    if (retired.publicKey !== this.publicKey) this.endorsement = { publicKey: retired.publicKey, signature: sign(null, rotationText(this.publicKey), retired.key).toString('base64') };
    return this;
  }

  sign(at: number, heads: CheckpointHead[], previous?: CheckpointHead[]): AuditCheckpoint {
    const cp: AuditCheckpoint = { type: 'audit.checkpoint', at, heads, publicKey: this.publicKey, signature: sign(null, checkpointText(at, heads, previous), this.key).toString('base64') };
    if (previous && previous.length > 0) cp.previous = previous;
    if (this.endorsement) cp.endorsement = this.endorsement;
    return cp;
  }

  /** A checkpoint of the log's heads as the `audit` topic's record value. */
  encode(heads: { topic: string; partition: number; offset: number; link: Uint8Array; writer?: string; seq?: number }[], at = Date.now(), previous?: CheckpointHead[]): Uint8Array {
    return packValue(
      this.sign(
        at,
        heads.map((h) => ({
          topic: h.topic,
          partition: h.partition,
          offset: h.offset,
          link: Buffer.from(h.link).toString('hex'),
          ...(h.writer !== undefined ? { writer: h.writer, seq: h.seq } : {}),
        })),
        previous,
      ),
    );
  }
}

/** The latest time a Date holds (ms since the epoch): a checkpoint's `at` is printed as a date. */
const MAX_DATE_MS = 8.64e15;

/** A record value as a checkpoint, or undefined when it is not one (bytes that do not decode, fields of the wrong kinds). */
export function decodeCheckpoint(value: Uint8Array): AuditCheckpoint | undefined {
  let cp: Partial<AuditCheckpoint> | undefined;
  try {
    cp = unpackValue(value) as Partial<AuditCheckpoint> | undefined;
  } catch {
    return undefined;
  }
  if (!cp || typeof cp !== 'object' || cp.type !== 'audit.checkpoint' || !Array.isArray(cp.heads) || typeof cp.publicKey !== 'string' || typeof cp.signature !== 'string') return undefined;
  if (!Number.isSafeInteger(cp.at) || Math.abs(cp.at!) > MAX_DATE_MS) return undefined;
  if (cp.previous !== undefined && !Array.isArray(cp.previous)) return undefined;
  const e = cp.endorsement as Partial<NonNullable<AuditCheckpoint['endorsement']>> | undefined;
  if (e !== undefined && (!e || typeof e !== 'object' || typeof e.publicKey !== 'string' || typeof e.signature !== 'string')) return undefined;
  return cp as AuditCheckpoint;
}

/** Whether the checkpoint's signature is its key's over its heads (trust in the key is the caller's). */
export function signatureHolds(cp: AuditCheckpoint): boolean {
  try {
    const key = createPublicKey({ key: Buffer.from(cp.publicKey, 'base64'), format: 'der', type: 'spki' });
    return verify(null, checkpointText(cp.at, cp.heads, cp.previous), key, Buffer.from(cp.signature, 'base64'));
  } catch {
    return false;
  }
}

/** Whether the checkpoint's endorsement is its retired key's signature of its key. */
export function endorsementHolds(cp: AuditCheckpoint): boolean {
  if (!cp.endorsement) return false;
  try {
    const key = createPublicKey({ key: Buffer.from(cp.endorsement.publicKey, 'base64'), format: 'der', type: 'spki' });
    return verify(null, rotationText(cp.publicKey), key, Buffer.from(cp.endorsement.signature, 'base64'));
  } catch {
    return false;
  }
}
