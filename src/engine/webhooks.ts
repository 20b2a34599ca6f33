/**
 * The webhook relay (issue 15): posts each change event of the outbox to an HTTP endpoint, signed, at least
 * once and in outbox order, on top of a durable `engine.subscribe` consumer.
 *
 * The request body is the event's `payload` itself (the hosted service's webhook body, which carries its own
 * `type`), not wrapped, so a receiver that validates the hosted service's webhook schemas accepts it. What
 * the outbox adds travels in headers:
 *
 * - `Laurel-Event-Id`: the event's id (stable across retries and restarts: receivers deduplicate on it);
 * - `Laurel-Event-Type`: its type, e.g. `achievement.completed`;
 * - `Laurel-Event-At`: the ISO instant the change happened;
 * - `Laurel-Delivery-Attempt`: 1 for the first attempt at this event in this process;
 * - `Tenant-ID`: the tenant, on a relay over a tenant's engine (`engine.tenant(id)`); absent for the default
 *   tenant. Not covered by the signature: receivers that need it authenticated use one secret per tenant;
 * - `Laurel-Signature`: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>" keyed with the secret>`
 *   (Stripe's scheme: the timestamp is signed too, so a captured request cannot be replayed later than the
 *   receiver's tolerance). Verify it with {@link verifyWebhookSignature}.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { CHANGE_TYPES, type ChangeType, type StoredChange } from '../core/types.js';
import { ValidationError } from '../errors.js';
import type { DeliveryRecord } from '../store/types.js';
import type { SubscribeOptions, Subscription } from './changes.js';
import { interruptibleWait } from './wait.js';

/** The header with the signature. */
export const SIGNATURE_HEADER = 'Laurel-Signature';

/** Options of {@link createWebhookRelay}. */
export interface WebhookRelayOptions {
  /** The endpoint, an `http:` or `https:` URL. */
  url: string;
  /** The shared secret the signature is keyed with (non-empty). */
  secret: string;
  /** The durable consumer name (its cursor and lease in the store); one per endpoint. */
  consumer: string;
  /** Only these event types are posted (the others are passed over). Default: every type. */
  types?: readonly ChangeType[];
  /** Events per subscription batch (1 to 1000, default 100). */
  batchSize?: number;
  /** How long to wait before polling the outbox again when there was nothing new (default 1000 ms). */
  pollMs?: number;
  /** The consumer's lease (default 30 000 ms; renewed while a batch is being delivered). */
  leaseMs?: number;
  /** How long one request may take, answer body included, before it counts as failed (default 10 000 ms). */
  timeoutMs?: number;
  /**
   * Attempts per event in one round (1 to 100, default 5). When they all fail the round ends, `onError` is
   * told, and the batch is tried again later from the first event not yet delivered: an event is never
   * skipped, retrying goes on until it is delivered.
   */
  maxAttempts?: number;
  /** The backoff after the first failed attempt is drawn from [0, baseDelayMs) (default 500 ms); it doubles per attempt. */
  baseDelayMs?: number;
  /** The most the backoff grows to (default 60 000 ms). */
  maxDelayMs?: number;
  /** Extra request headers (an `Authorization` header, say). They cannot replace the `Laurel-*` ones or `Content-Type`. */
  headers?: Record<string, string>;
  /** The `fetch` to post with (default `globalThis.fetch`). */
  fetch?: typeof globalThis.fetch;
  /** The wall clock for the signature's timestamp and the records' `at` (default `new Date()`). Not the engine's clock: receivers compare it with theirs. */
  clock?: () => Date;
  /** A source of uniform numbers in [0, 1) for the jitter (default `Math.random`). */
  random?: () => number;
  /** Called after every attempt with its outcome (as recorded with the store) and the event. */
  onDelivery?: (record: DeliveryRecord, event: StoredChange) => void;
  /** Called when a round gives up on an event (a {@link WebhookDeliveryError}), or the store fails. */
  onError?: (error: unknown) => void;
}

/** A running relay. */
export interface WebhookRelay {
  /**
   * Stops the relay: a backoff being waited out ends at once and no new request starts; a request in flight
   * is left to finish (at most `timeoutMs`) and its outcome is recorded. Then the subscription stops and its
   * lease is given up. Events of the batch in progress that were not delivered yet (and, as the cursor moves
   * per batch, those of it that were) are posted again by the next relay on the same consumer.
   */
  stop(): Promise<void>;
  /** The consumer's name. */
  readonly consumer: string;
}

/** What the relay needs of an engine: `subscribe`, and its store, whose `recordDeliveries` keeps the outcomes. */
export interface WebhookRelayEngine {
  /** The engine's durable `subscribe` (`Engine.subscribe`): the relay delivers each batch it is handed. */
  subscribe(consumer: string, handler: (events: StoredChange[], context: { signal: AbortSignal }) => unknown, opts?: SubscribeOptions): Subscription;
  readonly store?: unknown;
  /** The engine's tenant (`Engine.tenantId`): sent as `Tenant-ID`. */
  readonly tenantId?: string | null;
}

/** A round gave up on an event after `maxAttempts` failed attempts; the batch is tried again later. */
export class WebhookDeliveryError extends Error {
  readonly eventId: string;
  readonly attempts: number;
  /** The last attempt's HTTP status, null when there was no answer. */
  readonly status: number | null;
  constructor(eventId: string, attempts: number, status: number | null, detail: string) {
    super(`webhook delivery of event ${eventId} failed ${attempts} time(s), the last with ${detail}; the batch is retried later`);
    this.name = 'WebhookDeliveryError';
    this.eventId = eventId;
    this.attempts = attempts;
    this.status = status;
  }
}

/** Thrown out of the handler when the relay stops mid-batch: the batch is not acknowledged. */
class RelayStopped extends Error {}

const invalid = (name: string, message: string): ValidationError => new ValidationError(`${name} ${message}`, [{ path: [name], message }]);
const intIn = (value: unknown, name: string, min: number, max: number, fallback: number): number => {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) throw invalid(name, `must be an integer from ${min} to ${max} (got ${String(value)})`);
  return value;
};
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const RESERVED = new Set(['content-type', 'laurel-signature', 'laurel-event-id', 'laurel-event-type', 'laurel-event-at', 'laurel-delivery-attempt', 'tenant-id']);
const KNOWN_TYPES = new Set<string>(CHANGE_TYPES);

/** How much of a receiver's answer the relay keeps (the start of its text names a failure; see {@link answerStart}). */
const ANSWER_KEPT_BYTES = 1024;

/**
 * Reads an answer's body to its end (which frees the connection) and returns the text of its first
 * {@link ANSWER_KEPT_BYTES} bytes: the rest is read and dropped, so a receiver that answers with a large or
 * endless body (bounded by the timeout) costs the relay no more memory than that. The body may be a web
 * stream (the global fetch's) or an async iterable of chunks (a Node stream, as node-fetch gives); an answer
 * with neither gives its text, as an injected fetch makes it.
 */
async function answerStart(res: Response): Promise<string> {
  const kept = new Uint8Array(ANSWER_KEPT_BYTES);
  let n = 0;
  const keep = (chunk: unknown) => {
    if (n >= kept.length) return;
    // Bytes of any realm (a Buffer, another context's Uint8Array), or text: only as many characters as
    // bytes are still wanted are encoded (each is at least one byte), not a whole answer's text.
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk.slice(0, kept.length - n), 'utf8') : ArrayBuffer.isView(chunk) ? new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength) : null;
    if (bytes === null) return;
    const take = Math.min(kept.length - n, bytes.byteLength);
    kept.set(bytes.subarray(0, take), n);
    n += take;
  };
  const body = res.body as unknown;
  if (body !== null && typeof body === 'object' && typeof (body as ReadableStream).getReader === 'function') {
    const reader = (body as ReadableStream<unknown>).getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        keep(value);
      }
    } finally {
      reader.releaseLock();
    }
  } else if (body !== null && typeof body === 'object' && typeof (body as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function') {
    for await (const chunk of body as AsyncIterable<unknown>) keep(chunk);
  } else if (typeof res.text === 'function') {
    keep(await res.text());
  }
  // A character cut at the end of the kept bytes decodes as U+FFFD.
  return new TextDecoder().decode(kept.subarray(0, n));
}

/** The bytes of a body given as text or bytes. */
function bytesOf(body: string | Uint8Array, name: string): Buffer {
  if (typeof body === 'string') return Buffer.from(body, 'utf8');
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  throw invalid(name, 'must be the raw request body, a string or bytes');
}
const checkSecret = (secret: unknown): string => {
  if (typeof secret !== 'string' || secret.length === 0) throw invalid('secret', 'must be a non-empty string');
  return secret;
};
const hmac = (secret: string, t: number, body: Buffer): Buffer => createHmac('sha256', secret).update(`${t}.`).update(body).digest();

/**
 * The `Laurel-Signature` header value of a body: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`.
 * The relay signs with it; tests of a receiver can too.
 */
export function signWebhookPayload(opts: { body: string | Uint8Array; secret: string; timestamp?: number | Date }): string {
  const secret = checkSecret(opts?.secret);
  const at = opts.timestamp ?? new Date();
  const t = at instanceof Date ? Math.floor(at.getTime() / 1000) : at;
  if (!Number.isSafeInteger(t) || t < 0) throw invalid('timestamp', 'must be a Date or unix seconds');
  return `t=${t},v1=${hmac(secret, t, bytesOf(opts.body, 'body')).toString('hex')}`;
}

/**
 * Whether `header` (the `Laurel-Signature` request header) is a valid signature of `body` (the raw request
 * body, exactly the bytes received: verify before parsing) with `secret`, made at most `toleranceSeconds`
 * (default 300) from `now` (default the current time). Any `v1` entry may match (several appear while a
 * secret is being rotated); the comparison takes constant time. A missing or malformed header gives false.
 * @throws {ValidationError} for an empty secret or a body that is neither text nor bytes (mistakes of the caller).
 */
export function verifyWebhookSignature(opts: { body: string | Uint8Array; header: string | readonly string[] | null | undefined; secret: string; toleranceSeconds?: number; now?: Date | number }): boolean {
  const secret = checkSecret(opts?.secret);
  const body = bytesOf(opts.body, 'body');
  const tolerance = opts.toleranceSeconds ?? 300;
  if (typeof tolerance !== 'number' || !(tolerance >= 0)) throw invalid('toleranceSeconds', 'must be a number of seconds, 0 or more');
  const header = Array.isArray(opts.header) ? opts.header.join(',') : opts.header;
  if (typeof header !== 'string' || header.length === 0 || header.length > 4096) return false;
  let t: number | null = null;
  const signatures: Buffer[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (key === 't') {
      if (!/^\d{1,15}$/.test(value) || t !== null) return false;
      t = Number(value);
    } else if (key === 'v1' && /^[0-9a-fA-F]{64}$/.test(value)) signatures.push(Buffer.from(value, 'hex'));
  }
  if (t === null || signatures.length === 0) return false;
  const nowMs = opts.now === undefined ? Date.now() : opts.now instanceof Date ? opts.now.getTime() : opts.now;
  if (!Number.isFinite(nowMs) || Math.abs(nowMs / 1000 - t) > tolerance) return false;
  const expected = hmac(secret, t, body);
  let ok = false;
  // Every entry is compared, so the time taken does not tell which one matched.
  for (const s of signatures) if (timingSafeEqual(s, expected)) ok = true;
  return ok;
}

/** The store's `recordDeliveries`, when it has one. */
function recorderOf(store: unknown): ((records: readonly DeliveryRecord[]) => Promise<void>) | null {
  const s = store as { recordDeliveries?: unknown } | null | undefined;
  return s && typeof s.recordDeliveries === 'function' ? (records) => (s.recordDeliveries as (r: readonly DeliveryRecord[]) => Promise<void>)(records) : null;
}

/** The error of an attempt aborted because the subscription lost the batch's lease. */
const LEASE_LOST = 'aborted: the lease on the batch was lost (another relay holds it)';

/** A short description of a failed request. */
function describe(error: unknown, timedOut: boolean, timeoutMs: number): string {
  if (timedOut) return `timed out after ${timeoutMs} ms`;
  const e = error as { message?: unknown; cause?: { code?: unknown; message?: unknown } } | null;
  const code = e?.cause && typeof e.cause.code === 'string' ? e.cause.code : null;
  const message = typeof e?.message === 'string' ? e.message : String(error);
  return (code ? `${message}: ${code}` : e?.cause && typeof e.cause.message === 'string' ? `${message}: ${e.cause.message}` : message).slice(0, 500);
}

/**
 * Starts relaying the engine's change events to a webhook endpoint, and returns it running.
 *
 * Each event of a batch is posted in outbox order as JSON (the body is the event's `payload`; see the
 * module's documentation for the headers), signed with `secret`. Any 2xx answer means delivered; another
 * status, a network error or no answer within `timeoutMs` is a failed attempt, retried after an exponential
 * backoff with full jitter (a uniform draw from [0, min(maxDelayMs, baseDelayMs * 2^(n-1)))). After
 * `maxAttempts` failures in a row the round ends and the subscription retries the batch later, skipping the
 * events this process already delivered; the consumer's cursor moves past a batch only when every event in
 * it was delivered, so each event is delivered at least once, first deliveries in outbox order. Receivers
 * deduplicate on `Laurel-Event-Id`. Every attempt's outcome is recorded with the store's `recordDeliveries`
 * (read them with `engine.readDeliveries(consumer)`) and given to `onDelivery`.
 * @throws {ValidationError} for bad options.
 * @example
 * ```ts
 * const relay = createWebhookRelay(engine, { url: 'https://example.com/hooks/laurel', secret: process.env.LAUREL_WEBHOOK_SECRET!, consumer: 'webhooks' });
 * // on shutdown
 * await relay.stop();
 * ```
 */
export function createWebhookRelay(engine: WebhookRelayEngine, options: WebhookRelayOptions): WebhookRelay {
  if (typeof engine !== 'object' || engine === null || typeof engine.subscribe !== 'function') throw invalid('engine', 'must be an engine (with subscribe)');
  if (typeof options !== 'object' || options === null) throw invalid('options', 'must be an object { url, secret, consumer }');
  const o = options;
  let url: URL;
  try {
    url = new URL(o.url);
  } catch {
    throw invalid('url', `must be an absolute http or https URL (got ${JSON.stringify(o.url)})`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalid('url', `must be an http or https URL (got ${url.protocol})`);
  if (url.username !== '' || url.password !== '') throw invalid('url', 'must not carry credentials: pass them in headers');
  const secret = checkSecret(o.secret);
  if (typeof o.consumer !== 'string' || o.consumer.length === 0 || o.consumer.length > 200) throw invalid('consumer', 'must be a name of 1 to 200 characters');
  const consumer = o.consumer;
  let types: ChangeType[] | undefined;
  if (o.types !== undefined) {
    if (!Array.isArray(o.types) || o.types.length === 0) throw invalid('types', 'must be a non-empty array of change types (leave it out for every type)');
    const unknown = o.types.filter((t) => !KNOWN_TYPES.has(t as string));
    if (unknown.length > 0) throw invalid('types', `has unknown change types: ${unknown.map(String).join(', ')}`);
    types = [...o.types];
  }
  const timeoutMs = intIn(o.timeoutMs, 'timeoutMs', 1, 600_000, 10_000);
  const maxAttempts = intIn(o.maxAttempts, 'maxAttempts', 1, 100, 5);
  const baseDelayMs = intIn(o.baseDelayMs, 'baseDelayMs', 0, 3_600_000, 500);
  const maxDelayMs = intIn(o.maxDelayMs, 'maxDelayMs', 1, 3_600_000, 60_000);
  if (maxDelayMs < baseDelayMs) throw invalid('maxDelayMs', `must be at least baseDelayMs (${baseDelayMs})`);
  const extra: Record<string, string> = {};
  if (o.headers !== undefined) {
    if (typeof o.headers !== 'object' || o.headers === null || Array.isArray(o.headers)) throw invalid('headers', 'must be an object of header names to string values');
    for (const [name, value] of Object.entries(o.headers)) {
      if (!TOKEN.test(name)) throw invalid('headers', `has an invalid header name ${JSON.stringify(name)}`);
      if (RESERVED.has(name.toLowerCase())) throw invalid('headers', `cannot set ${name}: the relay sets it`);
      if (typeof value !== 'string' || /[\r\n\0]/.test(value)) throw invalid('headers', `${name} must be a string without line breaks`);
      extra[name] = value;
    }
  }
  const fetchImpl = o.fetch ?? globalThis.fetch;
  if (typeof fetchImpl !== 'function') throw invalid('fetch', 'must be a function (no global fetch here: pass one)');
  for (const name of ['clock', 'random', 'onDelivery', 'onError'] as const) if (o[name] !== undefined && typeof o[name] !== 'function') throw invalid(name, 'must be a function');
  const clock = o.clock ?? (() => new Date());
  const random = o.random ?? Math.random;
  const record = recorderOf(engine.store);
  const target = url.href;

  const report = (error: unknown) => {
    if (error instanceof RelayStopped) return;
    try {
      o.onError?.(error);
    } catch {
      // An observer's failure must not stop the relay.
    }
  };

  let stopped = false;
  const backoff = interruptibleWait();
  /** The backoff before a retry: ended early by `stop()` or by the loss of the batch's lease (`signal`). */
  const sleep = async (ms: number, signal: AbortSignal): Promise<void> => {
    if (stopped || signal.aborted || ms <= 0) return;
    const lost = () => backoff.interrupt();
    signal.addEventListener('abort', lost, { once: true });
    try {
      await backoff.wait(ms);
    } finally {
      signal.removeEventListener('abort', lost);
    }
  };

  /** Events this process delivered from a batch not yet acknowledged, and attempts per event so far. */
  const delivered = new Set<string>();
  const attempts = new Map<string, number>();

  /**
   * One attempt: true when delivered. A request in flight is aborted when the subscription loses the batch's
   * lease (`signal`): recorded as failed (the receiver may have had it: it deduplicates on the event id).
   */
  async function attempt(event: StoredChange, body: string, n: number, signal: AbortSignal): Promise<{ ok: boolean; status: number | null; error: string | null }> {
    const at = clock();
    const headers: Record<string, string> = {
      ...extra,
      'Content-Type': 'application/json',
      'Laurel-Event-Id': event.id,
      'Laurel-Event-Type': event.type,
      'Laurel-Event-At': event.at,
      'Laurel-Delivery-Attempt': String(n),
      ...(typeof engine.tenantId === 'string' ? { 'Tenant-ID': engine.tenantId } : {}),
      [SIGNATURE_HEADER]: signWebhookPayload({ body, secret, timestamp: at }),
    };
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeoutMs);
    const lost = () => controller.abort();
    signal.addEventListener('abort', lost, { once: true });
    const started = performance.now();
    let outcome: { ok: boolean; status: number | null; error: string | null };
    try {
      const res = await fetchImpl(target, { method: 'POST', headers, body, signal: controller.signal, redirect: 'manual' });
      // Read the answer (it frees the connection), within the same timeout: an answer whose body has not
      // ended by then counts as failed, whatever its status (as `timeoutMs` says).
      const text = await answerStart(res).catch(() => '');
      const ok = res.status >= 200 && res.status < 300 && !timedOut;
      outcome = { ok, status: res.status, error: timedOut ? describe(null, true, timeoutMs) : ok ? null : `HTTP ${res.status}${text ? `: ${text.slice(0, 200)}` : ''}` };
    } catch (error) {
      outcome = { ok: false, status: null, error: signal.aborted && !timedOut ? LEASE_LOST : describe(error, timedOut, timeoutMs) };
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', lost);
    }
    const ms = Math.round(performance.now() - started);
    const rec: DeliveryRecord = { consumer, eventId: event.id, attempt: n, ok: outcome.ok, status: outcome.status, error: outcome.error, at: at.toISOString(), ms };
    if (record) {
      try {
        await record([rec]);
      } catch (error) {
        // Recording is for observation: it never decides whether an event was delivered.
        report(error);
      }
    }
    try {
      o.onDelivery?.(rec, event);
    } catch {
      // ignored, as for onError
    }
    return outcome;
  }

  async function deliver(events: StoredChange[], { signal }: { signal: AbortSignal }): Promise<void> {
    // Forget what belongs to a batch this process no longer holds (another one acknowledged it meanwhile).
    const ids = new Set(events.map((e) => e.id));
    for (const id of delivered) if (!ids.has(id)) delivered.delete(id);
    for (const id of attempts.keys()) if (!ids.has(id)) attempts.delete(id);
    for (const event of events) {
      if (delivered.has(event.id)) continue;
      const body = JSON.stringify(event.payload);
      let last: { status: number | null; error: string | null } = { status: null, error: null };
      for (let i = 0; i < maxAttempts; i++) {
        if (stopped) throw new RelayStopped();
        // The subscription lost its lease (another relay holds the batch now): deliver no more of it.
        if (signal.aborted) throw new RelayStopped();
        const n = (attempts.get(event.id) ?? 0) + 1;
        attempts.set(event.id, n);
        const outcome = await attempt(event, body, n, signal);
        if (outcome.ok) {
          delivered.add(event.id);
          break;
        }
        if (signal.aborted) throw new RelayStopped();
        last = outcome;
        // The backoff grows with every failed attempt at this event, across rounds too.
        if (i < maxAttempts - 1) await sleep(Math.floor(random() * Math.min(maxDelayMs, baseDelayMs * 2 ** Math.min(n - 1, 30))), signal);
      }
      if (!delivered.has(event.id)) {
        if (stopped) throw new RelayStopped();
        throw new WebhookDeliveryError(event.id, attempts.get(event.id) ?? 0, last.status, last.error ?? 'an unknown failure');
      }
    }
    // The subscription acknowledges the batch now.
    delivered.clear();
    attempts.clear();
  }

  const subscribeOptions: SubscribeOptions = { onError: report, maxBackoffMs: maxDelayMs };
  if (o.batchSize !== undefined) subscribeOptions.batchSize = o.batchSize;
  if (o.pollMs !== undefined) subscribeOptions.pollMs = o.pollMs;
  if (o.leaseMs !== undefined) subscribeOptions.leaseMs = o.leaseMs;
  if (types) subscribeOptions.types = types;
  const subscription = engine.subscribe(consumer, deliver, subscribeOptions);
  let stopping: Promise<void> | null = null;
  return {
    consumer,
    stop() {
      if (!stopping) {
        stopped = true;
        backoff.interrupt();
        stopping = subscription.stop();
      }
      return stopping;
    },
  };
}
