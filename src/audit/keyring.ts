// The keys an auditor trusts (`replay --verify --keyring`, README: Replay for audits): several
// service instances each sign their checkpoints with a key of their own, and a key may be rotated.
// A keyring is a file, or a directory of files (*.pem, *.pub, *.txt), holding Ed25519 public keys
// in PEM and/or fingerprints (`replay --public-key` prints both), one a line, `#` starting a comment.
// A checkpoint's key is trusted when the keyring holds it or its fingerprint; a key it does not hold
// is trusted too when its checkpoint carries a trusted key's endorsement (a rotation, checkpoint.ts).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fingerprintOf, publicKeyBase64 } from './checkpoint.js';

const PEM = /-----BEGIN PUBLIC KEY-----[\s\S]*?-----END PUBLIC KEY-----/g;
const FINGERPRINT = /^[0-9a-f]{2}(:[0-9a-f]{2}){15}$/;
/** the files of a keyring directory read; others (a README) are left alone */
const KEY_FILE = /\.(pem|pub|txt)$/;
/** at most this many files in a keyring directory (a limit on what the command reads) */
export const MAX_KEYRING_FILES = 1000;

export class KeyringError extends Error {}

export interface Keyring {
  /** public keys, base64 DER (SPKI) as checkpoints name them */
  keys: Set<string>;
  fingerprints: Set<string>;
}

/** The keys and fingerprints in `text` (a keyring file's), `source` naming it in errors. */
export function parseKeyring(text: string, source: string, into: Keyring = { keys: new Set(), fingerprints: new Set() }): Keyring {
  for (const pem of text.match(PEM) ?? []) {
    try {
      into.keys.add(publicKeyBase64(pem));
    } catch (err) {
      throw new KeyringError(`${source}: a PEM block that is not an Ed25519 public key (${(err as Error).message.split('\n')[0]})`);
    }
  }
  const rest = text.replace(PEM, '');
  rest.split('\n').forEach((raw, i) => {
    const line = raw.replace(/#.*/, '').trim().toLowerCase();
    if (line === '') return;
    // `replay --public-key` prints "fingerprint aa:bb:…" on stderr: the word may come along.
    const fp = line.replace(/^fingerprint\s+/, '');
    if (!FINGERPRINT.test(fp)) throw new KeyringError(`${source}: line ${i + 1} is neither a PEM public key nor a fingerprint (16 hex pairs, aa:bb:…): "${raw.trim().slice(0, 60)}"`);
    into.fingerprints.add(fp);
  });
  return into;
}

/** A keyring file, or every key file of a directory. */
export function loadKeyring(path: string, into: Keyring = { keys: new Set(), fingerprints: new Set() }): Keyring {
  let isDir: boolean;
  try {
    isDir = statSync(path).isDirectory();
  } catch {
    throw new KeyringError(`--keyring ${path}: no such file or directory`);
  }
  const files = isDir ? readdirSync(path).filter((f) => KEY_FILE.test(f)).sort().map((f) => join(path, f)) : [path];
  if (files.length > MAX_KEYRING_FILES) throw new KeyringError(`--keyring ${path}: ${files.length} key files, more than ${MAX_KEYRING_FILES}`);
  for (const file of files) parseKeyring(readFileSync(file, 'utf8'), file, into);
  if (into.keys.size === 0 && into.fingerprints.size === 0) throw new KeyringError(`--keyring ${path}: no public key or fingerprint in it${isDir ? ' (its *.pem, *.pub and *.txt files)' : ''}`);
  return into;
}

/** Whether the keyring trusts the key (base64 DER): the key itself, or its fingerprint. */
export const trusts = (ring: Keyring, key: string): boolean => ring.keys.has(key) || ring.fingerprints.has(fingerprintOf(key));
