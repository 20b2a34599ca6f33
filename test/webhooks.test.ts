/**
 * The webhook relay (issue 15) against a real loopback HTTP receiver that fails, times out, refuses
 * connections and recovers: every event is delivered at least once, first deliveries in outbox order, every
 * signature verifies, and every attempt's outcome is recorded.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createEngine,
  createWebhookRelay,
  defineConfig,
  isLaurelErrorCode,
  signWebhookPayload,
  verifyWebhookSignature,
  WebhookDeliveryError,
  type DeliveryRecord,
  type WebhookRelay,
  type WebhookRelayOptions,
} from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { sequentialIds } from '../src/testing/index.js';
import { allChanges } from './helpers.js';

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  achievements: [{ key: 'two', name: 'Two', trigger: 'metric', metricKey: 'lessons', metricValue: 2 }],
  streak: { frequency: 'daily' },
  pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'l', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }] }],
});
const SECRET = 'whsec_test_secret';

function setup() {
  const store = createMemoryStore();
  const engine = createEngine({ config, store, clock: () => new Date('2026-01-05T10:00:00Z'), newId: sequentialIds() });
  return { engine, store };
}
type Setup = ReturnType<typeof setup>;


type Mode = 'ok' | 'fail' | 'hang' | 'partial';
interface Received {
  body: string;
  headers: IncomingHttpHeaders;
  mode: Mode;
}

/** A webhook receiver on 127.0.0.1 whose behaviour the test sets: answer 204, answer 500, or never answer. */
async function startReceiver() {
  const received: Received[] = [];
  const r = {
    mode: 'ok' as Mode,
    received,
    port: 0,
    server: null as Server | null,
    url: '',
    async listen(port = 0) {
      const server = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const mode = r.mode;
          received.push({ body: Buffer.concat(chunks).toString('utf8'), headers: req.headers, mode });
          if (mode === 'ok') res.writeHead(204).end();
          else if (mode === 'fail') res.writeHead(500, { 'Content-Type': 'text/plain' }).end('receiver down');
          // 'partial': a 200 whose body never ends.
          else if (mode === 'partial') res.writeHead(200, { 'Content-Type': 'text/plain' }).write('partial');
          // 'hang': no answer; the relay's timeout aborts the request.
        });
      });
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, '127.0.0.1', () => resolve());
      });
      r.server = server;
      r.port = (server.address() as AddressInfo).port;
      r.url = `http://127.0.0.1:${r.port}/hooks/laurel`;
    },
    async close() {
      const server = r.server;
      if (!server) return;
      r.server = null;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
  await r.listen();
  return r;
}
type Receiver = Awaited<ReturnType<typeof startReceiver>>;

async function until(cond: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});
async function receiver(): Promise<Receiver> {
  const r = await startReceiver();
  cleanup.push(() => r.close());
  return r;
}
function relay(s: Setup, opts: Partial<WebhookRelayOptions> & Pick<WebhookRelayOptions, 'url'>): WebhookRelay {
  const rel = createWebhookRelay(s.engine, { secret: SECRET, consumer: 'hooks', timeoutMs: 200, pollMs: 20, maxAttempts: 2, baseDelayMs: 10, maxDelayMs: 40, random: () => 0.5, ...opts });
  cleanup.push(() => rel.stop());
  return rel;
}
async function record(s: Setup, userId: string, value = 1) {
  await s.engine.recordEvent('lessons', { user: { id: userId }, value });
}
const header = (h: IncomingHttpHeaders, name: string) => h[name.toLowerCase()] as string | undefined;

describe('createWebhookRelay against a loopback receiver', () => {
  it('delivers every event at least once, in outbox order, through failures, timeouts and refused connections', async () => {
    const s = setup();
    await record(s, 'u1');
    await record(s, 'u1');
    await record(s, 'u2', 3);
    const rx = await receiver();
    rx.mode = 'fail';
    const outcomes: DeliveryRecord[] = [];
    const errors: unknown[] = [];
    relay(s, { url: rx.url, onDelivery: (r) => outcomes.push(r), onError: (e) => errors.push(e) });

    // Fails: two rounds of two attempts at the first event, each answered 500.
    await until(() => outcomes.filter((o) => o.status === 500).length >= 4, 'four 500 answers');
    expect(errors.some((e) => e instanceof WebhookDeliveryError)).toBe(true);
    // Times out: the receiver never answers.
    rx.mode = 'hang';
    await until(() => outcomes.some((o) => o.error?.includes('timed out')), 'a timeout');
    // Refuses: nothing listens on the port.
    const port = rx.port;
    await rx.close();
    const refusedFrom = outcomes.length;
    await until(() => outcomes.slice(refusedFrom).some((o) => o.status === null && /ECONNREFUSED/.test(o.error ?? '')), 'a refused connection');
    // Recovers on the same port; more events arrive meanwhile.
    rx.mode = 'ok';
    await rx.listen(port);
    await record(s, 'u3');
    const events = await allChanges(s.engine);
    expect(events.length).toBeGreaterThan(7);
    await until(() => events.every((e) => outcomes.some((o) => o.ok && o.eventId === e.id)), 'every event delivered');

    // Every event delivered; the first deliveries (and the first attempts) follow the outbox.
    const ok = rx.received.filter((r) => r.mode === 'ok');
    const firstIds = (list: Received[]) => [...new Set(list.map((r) => header(r.headers, 'Laurel-Event-Id')))];
    expect(firstIds(ok)).toEqual(events.map((e) => e.id));
    expect(firstIds(rx.received)).toEqual(events.map((e) => e.id));

    // Every request received, failed or not, is signed and verifies on its raw body; its body is the payload.
    const byId = new Map(events.map((e) => [e.id, e]));
    for (const r of rx.received) {
      const sig = header(r.headers, 'Laurel-Signature');
      expect(verifyWebhookSignature({ body: r.body, header: sig, secret: SECRET })).toBe(true);
      expect(verifyWebhookSignature({ body: Buffer.from(r.body), header: sig, secret: SECRET })).toBe(true);
      const event = byId.get(header(r.headers, 'Laurel-Event-Id')!)!;
      expect(JSON.parse(r.body)).toEqual(event.payload);
      expect(header(r.headers, 'Laurel-Event-Type')).toBe(event.type);
      expect(header(r.headers, 'Laurel-Event-At')).toBe(event.at);
      expect(header(r.headers, 'Content-Type')).toBe('application/json');
      // A tampered body, another secret or a timestamp past the tolerance does not verify.
      const tampered = r.body.replace('"type":"', '"type":"x');
      expect(tampered).not.toBe(r.body);
      expect(verifyWebhookSignature({ body: tampered, header: sig, secret: SECRET })).toBe(false);
      expect(verifyWebhookSignature({ body: r.body, header: sig, secret: `${SECRET}x` })).toBe(false);
      const t = Number(/t=(\d+)/.exec(sig!)![1]);
      expect(verifyWebhookSignature({ body: r.body, header: sig, secret: SECRET, now: (t + 301) * 1000 })).toBe(false);
      expect(verifyWebhookSignature({ body: r.body, header: sig, secret: SECRET, now: (t + 299) * 1000 })).toBe(true);
    }

    // The outcomes are recorded: the first event's attempts failed (500, timeout, refused), then succeeded.
    const recorded = (await s.engine.readDeliveries('hooks', { limit: 1000 })).reverse();
    expect(recorded).toEqual(outcomes);
    const first = recorded.filter((r) => r.eventId === events[0]!.id);
    expect(first.map((r) => r.attempt)).toEqual(first.map((_, i) => i + 1));
    expect(first.at(-1)).toMatchObject({ ok: true, status: 204, error: null, consumer: 'hooks' });
    expect(first.slice(0, -1).every((r) => !r.ok)).toBe(true);
    expect(first[0]).toMatchObject({ ok: false, status: 500 });
    expect(first.some((r) => r.status === null && r.error?.includes('timed out'))).toBe(true);
    expect(first.some((r) => r.status === null && /ECONNREFUSED/.test(r.error ?? ''))).toBe(true);
    for (const r of recorded) expect(r.ms).toBeGreaterThanOrEqual(0);
    // The attempt number is sent too.
    expect(rx.received.filter((r) => header(r.headers, 'Laurel-Event-Id') === events[0]!.id).map((r) => Number(header(r.headers, 'Laurel-Delivery-Attempt')))).toEqual(
      first.filter((r) => r.status !== null || r.error?.includes('timed out')).map((r) => r.attempt),
    );
  });

  it('moves the durable cursor: a relay started again on the consumer posts only newer events', async () => {
    const s = setup();
    await record(s, 'u1');
    const rx = await receiver();
    const first = relay(s, { url: rx.url });
    const before = await allChanges(s.engine);
    await until(() => rx.received.length >= before.length, 'the first events');
    await first.stop();
    await record(s, 'u2');
    const after = (await allChanges(s.engine)).slice(before.length);
    expect(after.length).toBeGreaterThan(0);
    const count = rx.received.length;
    relay(s, { url: rx.url });
    await until(() => rx.received.length >= count + after.length, 'the newer events');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(rx.received.slice(count).map((r) => header(r.headers, 'Laurel-Event-Id'))).toEqual(after.map((e) => e.id));
  });

  it('posts only the types asked for', async () => {
    const s = setup();
    await record(s, 'u1');
    await record(s, 'u1');
    const rx = await receiver();
    const wanted = (await allChanges(s.engine)).filter((e) => e.type === 'achievement.completed');
    expect(wanted.length).toBe(1);
    relay(s, { url: rx.url, types: ['achievement.completed'] });
    await until(() => rx.received.length >= 1, 'the achievement');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(rx.received.map((r) => header(r.headers, 'Laurel-Event-Type'))).toEqual(['achievement.completed']);
  });

  it('records refused connections to a port nobody listens on, and keeps retrying', async () => {
    const s = setup();
    await record(s, 'u1');
    const rx = await receiver();
    const url = rx.url;
    await rx.close();
    const outcomes: DeliveryRecord[] = [];
    relay(s, { url, onDelivery: (r) => outcomes.push(r) });
    await until(() => outcomes.length >= 5, 'five attempts');
    expect(outcomes.every((o) => !o.ok && o.status === null && o.error !== null)).toBe(true);
    const [id] = new Set(outcomes.map((o) => o.eventId));
    expect(outcomes.map((o) => o.eventId).every((e) => e === id)).toBe(true);
    expect(outcomes.slice(0, 5).map((o) => o.attempt)).toEqual([1, 2, 3, 4, 5]);
  });

  it('stop() ends a backoff at once and lets a request in flight finish', async () => {
    const s = setup();
    await record(s, 'u1');
    const rx = await receiver();
    rx.mode = 'fail';
    const outcomes: DeliveryRecord[] = [];
    const waiting = relay(s, { url: rx.url, baseDelayMs: 30_000, maxDelayMs: 60_000, random: () => 0.99, onDelivery: (r) => outcomes.push(r) });
    await until(() => outcomes.length >= 1, 'a failure');
    let t0 = Date.now();
    await waiting.stop();
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(outcomes.length).toBe(1);

    rx.mode = 'hang';
    const inFlight = relay(s, { url: rx.url, timeoutMs: 300, onDelivery: (r) => outcomes.push(r) });
    const seen = rx.received.length;
    await until(() => rx.received.length > seen, 'a request in flight');
    t0 = Date.now();
    await inFlight.stop();
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(outcomes.at(-1)).toMatchObject({ ok: false, status: null, error: 'timed out after 300 ms' });
    expect(rx.received.length).toBe(seen + 1);
    // The event was never delivered: the cursor did not move.
    const recorded = await s.engine.readDeliveries('hooks');
    expect(recorded.every((r) => !r.ok)).toBe(true);
  });

  it('an answer whose body has not ended within timeoutMs counts as failed, even with a 2xx status', async () => {
    const s = setup();
    const r = await receiver();
    r.mode = 'partial';
    await record(s, 'u1');
    const outcomes: DeliveryRecord[] = [];
    relay(s, { url: r.url, onDelivery: (o) => outcomes.push(o) });
    await until(() => outcomes.length >= 1, 'an outcome');
    expect(outcomes[0]).toMatchObject({ ok: false, status: 200, error: 'timed out after 200 ms', attempt: 1 });
    expect(outcomes[0]!.ms).toBeGreaterThanOrEqual(190);
  });

  it('reads a large answer to its end keeping only its start: a 1 GiB error body costs no more than its first bytes', async () => {
    const s = setup();
    await record(s, 'u1');
    // 1 GiB of answer, the same 1 MiB chunk 1,024 times (a text of it would pass the longest string V8 makes).
    const chunk = new Uint8Array(2 ** 20).fill(0x78);
    let sent = 0;
    const fetch = (async () =>
      new Response(
        new ReadableStream<Uint8Array>({
          pull(controller) {
            if (sent++ < 1024) controller.enqueue(chunk);
            else controller.close();
          },
        }),
        { status: 500 },
      )) as unknown as typeof globalThis.fetch;
    const outcomes: DeliveryRecord[] = [];
    const heapBefore = process.memoryUsage().heapUsed;
    relay(s, { url: 'https://hooks.example.com/laurel', fetch, timeoutMs: 60_000, onDelivery: (r) => outcomes.push(r) });
    await until(() => outcomes.length >= 1, 'an outcome', 60_000);
    // Read to its end (every chunk pulled), its first 200 characters named in the failure.
    expect(sent).toBe(1025);
    expect(outcomes[0]).toMatchObject({ ok: false, status: 500, error: `HTTP 500: ${'x'.repeat(200)}`, attempt: 1 });
    expect(process.memoryUsage().heapUsed - heapBefore).toBeLessThan(64 * 2 ** 20);
  }, 90_000);

  it('reads an answer body that is a Node stream (as node-fetch gives) or holds chunks of another realm the same way', async () => {
    const { Readable } = await import('node:stream');
    const { runInNewContext } = await import('node:vm');
    const s = setup();
    await record(s, 'u1');
    // First a chunk made in another context (not this realm's Uint8Array), then 256 MiB of Buffers.
    const foreign = runInNewContext('new Uint8Array([98, 111, 111, 109, 33])') as Uint8Array;
    const chunk = Buffer.alloc(2 ** 20, 0x79);
    let sent = 0;
    async function* answer() {
      yield foreign;
      for (; sent < 256; sent++) yield chunk;
    }
    const fetch = (async () => ({ status: 503, body: Readable.from(answer()) })) as unknown as typeof globalThis.fetch;
    const outcomes: DeliveryRecord[] = [];
    relay(s, { url: 'https://hooks.example.com/laurel', fetch, timeoutMs: 60_000, onDelivery: (r) => outcomes.push(r) });
    await until(() => outcomes.length >= 1, 'an outcome', 60_000);
    expect(sent).toBe(256);
    expect(outcomes[0]).toMatchObject({ ok: false, status: 503, error: `HTTP 503: boom!${'y'.repeat(195)}`, attempt: 1 });
  }, 90_000);

  it('sends the extra headers through an injected fetch', async () => {
    const s = setup();
    await record(s, 'u1');
    const calls: { url: string; init: RequestInit }[] = [];
    const fetch = (async (url: string, init: RequestInit) => {
      calls.push({ url, init });
      return new Response(null, { status: 202 });
    }) as unknown as typeof globalThis.fetch;
    const outcomes: DeliveryRecord[] = [];
    relay(s, { url: 'https://hooks.example.com/laurel', headers: { Authorization: 'Bearer abc' }, fetch, onDelivery: (r) => outcomes.push(r) });
    await until(() => outcomes.length >= 1, 'a call');
    const { url, init } = calls[0]!;
    expect(url).toBe('https://hooks.example.com/laurel');
    expect(init.method).toBe('POST');
    const headers = init.headers as Record<string, string>;
    expect(headers.Authorization).toBe('Bearer abc');
    expect(verifyWebhookSignature({ body: init.body as string, header: headers['Laurel-Signature'], secret: SECRET })).toBe(true);
    expect(outcomes[0]).toMatchObject({ ok: true, status: 202, attempt: 1 });
    expect(headers['Tenant-ID']).toBeUndefined();
  });

  it("a relay over a tenant's engine posts that tenant's events only, with its Tenant-ID", async () => {
    const s = setup();
    await record(s, 'u1');
    const acme = { engine: s.engine.tenant('acme'), store: s.store };
    await record(acme, 'a1');
    const calls: RequestInit[] = [];
    const fetch = (async (_url: string, init: RequestInit) => {
      calls.push(init);
      return new Response(null, { status: 200 });
    }) as unknown as typeof globalThis.fetch;
    const outcomes: DeliveryRecord[] = [];
    relay(acme, { url: 'https://hooks.example.com/laurel', fetch, onDelivery: (r) => outcomes.push(r) });
    const expected = (await allChanges(acme.engine)).length;
    await until(() => outcomes.length >= expected, 'every acme event');
    expect(expected).toBeGreaterThan(0);
    expect(calls.map((c) => (c.headers as Record<string, string>)['Tenant-ID'])).toEqual(Array(expected).fill('acme'));
    expect(calls.every((c) => !String(c.body).includes('"u1"'))).toBe(true);
    expect(() => createWebhookRelay(s.engine, { secret: SECRET, consumer: 'c', url: 'https://x.example.com', headers: { 'tenant-id': 'x' } })).toThrow(/tenant-id/i);
  });
});

describe('verifyWebhookSignature', () => {
  const body = '{"type":"streak.started"}';
  const at = new Date('2026-01-05T10:00:00Z');
  const t = at.getTime() / 1000;

  it('accepts its own signature within the tolerance and nothing else', () => {
    const sig = signWebhookPayload({ body, secret: SECRET, timestamp: at });
    expect(sig).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(verifyWebhookSignature({ body, header: sig, secret: SECRET, now: at })).toBe(true);
    expect(verifyWebhookSignature({ body, header: sig, secret: SECRET, now: (t - 300) * 1000 })).toBe(true);
    expect(verifyWebhookSignature({ body, header: sig, secret: SECRET, now: (t + 301) * 1000 })).toBe(false);
    expect(verifyWebhookSignature({ body, header: sig, secret: SECRET, now: (t + 3600) * 1000, toleranceSeconds: 7200 })).toBe(true);
    expect(verifyWebhookSignature({ body: `${body} `, header: sig, secret: SECRET, now: at })).toBe(false);
    expect(verifyWebhookSignature({ body, header: sig, secret: 'other', now: at })).toBe(false);
    // A timestamp changed after signing breaks the signature.
    expect(verifyWebhookSignature({ body, header: sig.replace(`t=${t}`, `t=${t + 1}`), secret: SECRET, now: at })).toBe(false);
  });

  it('takes any v1 entry (secret rotation) and refuses malformed headers', () => {
    const sig = signWebhookPayload({ body, secret: SECRET, timestamp: t });
    const v1 = sig.split(',v1=')[1]!;
    expect(verifyWebhookSignature({ body, header: `t=${t},v1=${'0'.repeat(64)},v1=${v1}`, secret: SECRET, now: at })).toBe(true);
    expect(verifyWebhookSignature({ body, header: ` t=${t} , v1=${v1} `, secret: SECRET, now: at })).toBe(true);
    for (const header of [undefined, null, '', 'garbage', `v1=${v1}`, `t=${t}`, `t=abc,v1=${v1}`, `t=${t},v1=${v1.slice(2)}`, `t=${t},v0=${v1}`, `t=${t},t=${t},v1=${v1}`]) {
      expect(verifyWebhookSignature({ body, header, secret: SECRET, now: at })).toBe(false);
    }
    expect(() => verifyWebhookSignature({ body, header: sig, secret: '' })).toThrow(/secret/);
  });
});

describe('createWebhookRelay options', () => {
  it('refuses bad options with ValidationErrors naming them', () => {
    const s = setup();
    const base = { url: 'https://example.com/hooks', secret: SECRET, consumer: 'hooks' };
    const bad: [Partial<WebhookRelayOptions> | Record<string, unknown>, string][] = [
      [{ url: 'ftp://example.com/hooks' }, 'url'],
      [{ url: 'not a url' }, 'url'],
      [{ url: 'https://user:pw@example.com/' }, 'url'],
      [{ secret: '' }, 'secret'],
      [{ consumer: '' }, 'consumer'],
      [{ types: [] }, 'types'],
      [{ types: ['streak.nope'] }, 'types'],
      [{ timeoutMs: 0 }, 'timeoutMs'],
      [{ maxAttempts: 0 }, 'maxAttempts'],
      [{ baseDelayMs: -1 }, 'baseDelayMs'],
      [{ baseDelayMs: 1000, maxDelayMs: 10 }, 'maxDelayMs'],
      [{ headers: { 'Laurel-Signature': 'x' } }, 'headers'],
      [{ headers: { 'X-Ok': 'a\r\nb' } }, 'headers'],
      [{ headers: { 'bad name': 'x' } }, 'headers'],
      [{ fetch: 'no' }, 'fetch'],
      [{ batchSize: 0 }, 'batchSize'],
    ];
    for (const [patch, name] of bad) {
      let error: unknown;
      try {
        createWebhookRelay(s.engine, { ...base, ...patch } as WebhookRelayOptions);
      } catch (e) {
        error = e;
      }
      expect(isLaurelErrorCode(error, 'VALIDATION'), `${name}: ${JSON.stringify(patch)}`).toBe(true);
      expect((error as Error).message).toContain(name);
    }
  });
});
