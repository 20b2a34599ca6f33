/**
 * Per-user application keys, in the hosted service's `app_<prefix>.<body>` form (admin.json's
 * `/application-api-keys`: a key is scoped to one user and may act only on that user's behalf).
 *
 * `createApplicationKey(userId, { secret })` makes a random key and the record an app stores (its own
 * database, any table): `{ id, prefix, userId, tenant?, hash }`, where `hash` is HMAC-SHA256(secret, key) in base64url.
 * The key itself (its secret body) is returned once and never stored; the handler verifies a presented key by
 * looking its prefix up, recomputing the HMAC and comparing in constant time (`timingSafeEqual`).
 */
import { createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { ValidationError } from '../errors.js';

/** What an app stores for a per-user key: no secret body, only its keyed hash. */
export interface ApplicationKeyRecord {
  /** The key's id (a UUID, as the service's `CreatedApplicationKey.id`): for revoking it. */
  id: string;
  /** The key's public prefix (`app_...`, the part before the dot): the lookup key. */
  prefix: string;
  /** The user the key is scoped to. */
  userId: string;
  /**
   * The tenant of that user (`Tenant-ID`, see `Engine.tenant`); absent or null: the default tenant. A key
   * is refused (403) on requests for any other tenant.
   */
  tenant?: string | null;
  /** base64url HMAC-SHA256 of the full key under the handler's secret. */
  hash: string;
}

/** A newly created key: the full `key` (shown once, never stored) and the record to store. */
export interface CreatedApplicationKey extends ApplicationKeyRecord {
  /** The full key, `app_<prefix>.<body>`: give it to the user's client; Laurel never needs it again. */
  key: string;
}

/** The HMAC secret (a server-side value from the environment, at least 16 bytes). */
export type ApplicationKeySecret = string | Uint8Array;

/** How the handler finds a key's record: by prefix, from the app's own store, or from a list in memory. */
export interface ApplicationKeysOptions {
  /** The secret keys were created with (see {@link createApplicationKey}). */
  secret: ApplicationKeySecret;
  /** The record of a prefix, or null/undefined when there is none (revoked or unknown). */
  lookup?: (prefix: string) => ApplicationKeyRecord | null | undefined | Promise<ApplicationKeyRecord | null | undefined>;
  /** Records kept in memory, used when there is no `lookup`. */
  records?: readonly ApplicationKeyRecord[];
}

const PREFIX = /^app_[A-Za-z0-9_-]{8,64}$/;
const KEY = /^(app_[A-Za-z0-9_-]{8,64})\.([A-Za-z0-9_-]{16,256})$/;

function secretBytes(secret: unknown): Buffer {
  const bytes = typeof secret === 'string' ? Buffer.from(secret, 'utf8') : secret instanceof Uint8Array ? Buffer.from(secret) : null;
  if (!bytes || bytes.length < 16) throw new ValidationError('secret must be a string or bytes of at least 16 bytes', [{ path: ['secret'], message: 'at least 16 bytes' }]);
  return bytes;
}

const mac = (secret: Buffer, key: string) => createHmac('sha256', secret).update(key, 'utf8').digest();

/** Whether a presented key has the per-user form (`app_<prefix>.<body>`). */
export const isApplicationKey = (key: string): boolean => KEY.test(key);

/**
 * Creates a per-user key: 9 random bytes of prefix and 32 of body (base64url), and the record to store.
 *
 * @example
 * ```ts
 * const { key, ...record } = createApplicationKey('user_123', { secret: process.env.LAUREL_KEY_SECRET! });
 * await db.insert('application_keys', record); // { id, prefix, userId, hash }: no key body
 * return key; // to the user's client, once
 * ```
 */
export function createApplicationKey(userId: string, options: { secret: ApplicationKeySecret; tenant?: string | null }): CreatedApplicationKey {
  if (typeof userId !== 'string' || userId.length === 0 || userId.length > 255) throw new ValidationError('userId must be a string of 1 to 255 characters', [{ path: ['userId'], message: '1 to 255 characters' }]);
  const tenant = options?.tenant ?? null;
  if (tenant !== null && (typeof tenant !== 'string' || tenant.length === 0 || tenant.length > 255)) throw new ValidationError('tenant must be null or a string of 1 to 255 characters', [{ path: ['tenant'], message: '1 to 255 characters' }]);
  // HTTP takes a header value's surrounding spaces and tabs off (`Tenant-ID: acme ` arrives as `acme`): a key of
  // such a tenant could never be used.
  if (tenant !== null && /^[ \t]|[ \t]$/.test(tenant)) throw new ValidationError('tenant must not begin or end with whitespace: a Tenant-ID header cannot carry it', [{ path: ['tenant'], message: 'no surrounding whitespace' }]);
  const secret = secretBytes(options?.secret);
  const prefix = `app_${randomBytes(9).toString('base64url')}`;
  const key = `${prefix}.${randomBytes(32).toString('base64url')}`;
  return { id: randomUUID(), prefix, userId, ...(tenant === null ? {} : { tenant }), hash: mac(secret, key).toString('base64url'), key };
}

/**
 * A verifier over `options`: the user a presented key is scoped to, or null for a key that is not of the form,
 * has no record, or whose body does not match (compared in constant time).
 */
export function applicationKeyVerifier(options: ApplicationKeysOptions): (key: string) => Promise<{ userId: string; prefix: string; tenant: string | null } | null> {
  if (typeof options !== 'object' || options === null) throw new ValidationError('applicationKeys must be an object', [{ path: ['applicationKeys'], message: 'must be an object' }]);
  const secret = secretBytes(options.secret);
  const { lookup, records } = options;
  if (typeof lookup !== 'function' && !Array.isArray(records)) throw new ValidationError('applicationKeys needs lookup or records', [{ path: ['applicationKeys', 'lookup'], message: 'lookup or records' }]);
  const byPrefix = new Map((records ?? []).map((r) => [r.prefix, r]));
  const find = typeof lookup === 'function' ? lookup : (prefix: string) => byPrefix.get(prefix);
  return async (key) => {
    const m = KEY.exec(key);
    if (!m) return null;
    const prefix = m[1] as string;
    const record = PREFIX.test(prefix) ? await find(prefix) : null;
    const expected = mac(secret, key);
    // Unknown prefixes compare against a dummy, so a miss costs about what a hit does.
    const stored = record && typeof record.hash === 'string' ? Buffer.from(record.hash, 'base64url') : Buffer.alloc(expected.length);
    const same = stored.length === expected.length ? timingSafeEqual(stored, expected) : timingSafeEqual(expected, expected) && false;
    if (!record || !same || record.prefix !== prefix || typeof record.userId !== 'string' || record.userId === '') return null;
    const tenant = record.tenant ?? null;
    if (tenant !== null && (typeof tenant !== 'string' || tenant === '')) return null;
    return { userId: record.userId, prefix, tenant };
  };
}
