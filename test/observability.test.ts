import { AsyncLocalStorage } from 'node:async_hooks';
import diagnostics from 'node:diagnostics_channel';
import { context, ROOT_CONTEXT, SpanStatusCode, trace, type Context, type ContextManager, type Span, type SpanOptions, type Tracer } from '@opentelemetry/api';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ConflictError, createEngine, defineConfig, type CallErrorInfo, type CallInfo, type CallMessage, type ConflictInfo, type EngineHooks, type RetryInfo } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { otelHooks } from '../src/otel.js';

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 1 }] }],
  leaderboards: [{ key: 'all', name: 'All', rankBy: 'metric', metricKey: 'lessons', start: '2020-01-01' }],
});
const clock = () => new Date('2025-03-01T12:00:00Z');

/** A memory store whose first `n` commits fail with a ConflictError (as a concurrent writer would cause). */
function conflicting(n: number) {
  let left = n;
  return createMemoryStore({
    beforeCommit: () => {
      if (left > 0) {
        left--;
        throw new ConflictError('stale version (injected)');
      }
    },
  });
}

/** Hooks that record everything they are called with. */
function recorder() {
  const seen = { commits: [] as CallInfo[], retries: [] as RetryInfo[], conflicts: [] as ConflictInfo[], errors: [] as CallErrorInfo[] };
  const hooks: EngineHooks = {
    onCommit: (i) => void seen.commits.push({ ...i }),
    onRetry: (i) => void seen.retries.push(i),
    onConflict: (i) => void seen.conflicts.push(i),
    onError: (i) => void seen.errors.push(i),
  };
  return { seen, hooks };
}

describe('engine hooks', () => {
  it('onCommit after a writing call, with its timings; reads and failures commit nothing', async () => {
    const { seen, hooks } = recorder();
    const engine = createEngine({ config, clock, hooks });
    await engine.recordEvent('lessons', { user: { id: 'u1' }, value: 2 });
    expect(seen.commits).toHaveLength(1);
    const [info] = seen.commits;
    expect(info).toMatchObject({ operation: 'recordEvent', userId: 'u1', metricKey: 'lessons', commits: 1, retries: 0, conflicts: 0 });
    expect(info?.durationMs).toBeGreaterThanOrEqual(0);
    expect(info?.commitMs).toBeGreaterThanOrEqual(0);
    expect(info?.commitMs).toBeLessThanOrEqual(info?.durationMs as number);
    expect(info?.args[0]).toBe('lessons');

    await engine.getUser('u1');
    await engine.getLeaderboard('all');
    expect(seen.commits).toHaveLength(1);
    await engine.identifyUser({ id: 'u2', tz: 'Europe/Paris' });
    await engine.adjustPoints('u2', 'xp', 5);
    expect(seen.commits.map((c) => [c.operation, c.userId])).toEqual([
      ['recordEvent', 'u1'],
      ['identifyUser', 'u2'],
      ['adjustPoints', 'u2'],
    ]);
    expect(seen.errors).toEqual([]);
  });

  it('a batch counts each user\'s commit once, in one onCommit', async () => {
    const { seen, hooks } = recorder();
    const engine = createEngine({ config, clock, hooks });
    await engine.recordEvents([
      { metricKey: 'lessons', user: { id: 'a' }, value: 1 },
      { metricKey: 'lessons', user: { id: 'b' }, value: 1 },
      { metricKey: 'lessons', user: { id: 'c' }, value: 1 },
    ]);
    expect(seen.commits).toHaveLength(1);
    expect(seen.commits[0]).toMatchObject({ operation: 'recordEvents', userId: undefined, commits: 3 });
  });

  it('conflicts of a batch commit are reported for the batch, as are the retries of its events', async () => {
    const { seen, hooks } = recorder();
    const inner = createMemoryStore();
    let raced = false;
    const store = {
      ...inner,
      commitBatch: async (commits: Parameters<NonNullable<typeof inner.commitBatch>>[0]) => {
        if (raced) return (inner.commitBatch as NonNullable<typeof inner.commitBatch>)(commits);
        raced = true;
        return commits.map(() => new ConflictError('raced (injected)'));
      },
    };
    const engine = createEngine({ config, clock, hooks, store });
    const results = await engine.recordEvents([
      { metricKey: 'lessons', user: { id: 'a' }, value: 1 },
      { metricKey: 'lessons', user: { id: 'b' }, value: 2 },
    ]);
    expect(results.map((r) => r.ok && r.response.total)).toEqual([1, 2]);
    expect(seen.conflicts.map((c) => [c.operation, c.userId])).toEqual([
      ['recordEvents', 'a'],
      ['recordEvents', 'b'],
    ]);
    expect(seen.commits).toEqual([expect.objectContaining({ operation: 'recordEvents', commits: 2, conflicts: 2 })]);
  });

  it('onError when a call fails, with its code and duration; the caller gets the same error', async () => {
    const { seen, hooks } = recorder();
    const engine = createEngine({ config, clock, hooks });
    const error = await engine.getUser('nobody').catch((e: unknown) => e);
    expect(seen.errors).toHaveLength(1);
    expect(seen.errors[0]).toMatchObject({ operation: 'getUser', userId: 'nobody', code: 'NOT_FOUND', commits: 0 });
    expect(seen.errors[0]?.error).toBe(error);
    expect(seen.errors[0]?.durationMs).toBeGreaterThanOrEqual(0);
    await expect(engine.recordEvent('lessons', { user: { id: 'u' }, value: Number.NaN })).rejects.toMatchObject({ code: 'VALIDATION' });
    expect(seen.errors[1]).toMatchObject({ operation: 'recordEvent', code: 'VALIDATION' });
    expect(seen.commits).toHaveLength(0);
  });

  it('onConflict for every conflict and onRetry for every retry, then onCommit with the counts', async () => {
    const { seen, hooks } = recorder();
    const engine = createEngine({ config, clock, hooks, store: conflicting(2), retry: { attempts: 5, baseDelayMs: 1 } });
    const res = await engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
    expect(res.total).toBe(1);
    expect(seen.conflicts.map((c) => [c.operation, c.userId, c.attempt])).toEqual([
      ['recordEvent', 'u', 1],
      ['recordEvent', 'u', 2],
    ]);
    expect(seen.conflicts[0]?.error).toBeInstanceOf(ConflictError);
    expect(seen.retries.map((r) => [r.operation, r.userId, r.attempt])).toEqual([
      ['recordEvent', 'u', 1],
      ['recordEvent', 'u', 2],
    ]);
    for (const r of seen.retries) {
      expect(r.delayMs).toBeGreaterThanOrEqual(0);
      expect(r.delayMs).toBeLessThanOrEqual(2 ** (r.attempt - 1));
      expect(r.elapsedMs).toBeGreaterThanOrEqual(0);
    }
    expect(seen.commits).toEqual([expect.objectContaining({ operation: 'recordEvent', commits: 1, retries: 2, conflicts: 2 })]);
    expect(seen.errors).toEqual([]);
  });

  it('retries spent: a conflict per attempt, a retry between attempts, and onError with CONFLICT', async () => {
    const { seen, hooks } = recorder();
    const engine = createEngine({ config, clock, hooks, store: conflicting(100), retry: { attempts: 3, baseDelayMs: 0 } });
    await expect(engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 })).rejects.toBeInstanceOf(ConflictError);
    expect(seen.conflicts.map((c) => c.attempt)).toEqual([1, 2, 3]);
    expect(seen.retries.map((r) => r.attempt)).toEqual([1, 2]);
    expect(seen.errors).toEqual([expect.objectContaining({ operation: 'recordEvent', code: 'CONFLICT', retries: 2, conflicts: 3, commits: 0 })]);
    expect(seen.commits).toEqual([]);
  });

  it('a throwing or rejecting hook never changes a call\'s outcome', async () => {
    const boom = () => {
      throw new Error('hook failed');
    };
    const reject = () => Promise.reject(new Error('hook rejected'));
    const hooks: EngineHooks[] = [
      { onCommit: boom, onRetry: boom, onConflict: boom, onError: boom },
      { onCommit: reject as never, onError: reject as never },
      { onCall: () => boom() }, // never calls run
      {
        onCall: (_info, run) => {
          run();
          run(); // a second call runs nothing
          throw new Error('after run');
        },
      },
      { onCall: (_info, run) => Promise.resolve().then(run).then(boom) },
    ];
    let commits = 0;
    const engine = createEngine({ config, clock, hooks: [...hooks, { onCommit: () => void commits++ }], store: conflicting(1), retry: { baseDelayMs: 0 } });
    const res = await engine.recordEvent('lessons', { user: { id: 'u' }, value: 3 });
    expect(res.total).toBe(3);
    expect(commits).toBe(1);
    expect((await engine.getUserMetric('u', 'lessons')).current).toBe(3);
    await expect(engine.getUser('nobody')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect((await engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 })).total).toBe(4);
  });

  it('keeps the engine\'s shape: config, store and detached methods', async () => {
    const store = createMemoryStore();
    const engine = createEngine({ config, clock, store, hooks: {} });
    expect(engine.config).toBe(config);
    expect(engine.store).toBe(store);
    const { recordEvent, getUser } = engine;
    expect(recordEvent.name).toBe('recordEvent');
    await recordEvent('lessons', { user: { id: 'd' }, value: 1 });
    expect((await getUser('d')).id).toBe('d');
  });

  it('covers the change-notification methods too; subscribe stays synchronous', async () => {
    const operations: string[] = [];
    const engine = createEngine({ config, clock, hooks: { onCall: (info, run) => (operations.push(info.operation), run()) } });
    await engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
    const page = await engine.readChanges({ limit: 10 });
    expect(page.events.length).toBeGreaterThan(0);
    const delivered: unknown[] = [];
    const sub = engine.subscribe('test', (events) => void delivered.push(...events), { pollMs: 5 });
    expect(typeof sub.stop).toBe('function');
    for (let i = 0; i < 100 && delivered.length < page.events.length; i++) await new Promise((r) => setTimeout(r, 5));
    await sub.stop();
    expect(delivered).toHaveLength(page.events.length);
    await engine.sweep();
    expect(operations).toEqual(['recordEvent', 'readChanges', 'subscribe', 'sweep']);
  });

  it('refuses hooks that are not functions', () => {
    expect(() => createEngine({ config, hooks: { onCommit: 5 } as never })).toThrow(/hooks.onCommit must be a function/);
    expect(() => createEngine({ config, hooks: [null] as never })).toThrow(/hooks must be an object/);
  });
});

describe('diagnostics_channel', () => {
  const unsubscribe: (() => void)[] = [];
  afterEach(() => {
    for (const u of unsubscribe.splice(0)) u();
  });
  const on = (name: string) => {
    const messages: unknown[] = [];
    const fn = (m: unknown) => void messages.push(m);
    diagnostics.subscribe(name, fn);
    unsubscribe.push(() => diagnostics.unsubscribe(name, fn));
    return messages;
  };

  it('publishes every call on the laurel:call tracing channel, and commits, retries and conflicts', async () => {
    const events: [string, string, unknown][] = [];
    const tracing = diagnostics.tracingChannel<unknown, CallMessage>('laurel:call');
    const subscribers = {
      start: (m: CallMessage) => void events.push(['start', m.operation, m.userId]),
      end: (m: CallMessage) => void events.push(['end', m.operation, m.userId]),
      asyncStart: (m: CallMessage) => void events.push(['asyncStart', m.operation, m.durationMs !== undefined]),
      asyncEnd: (m: CallMessage) => void events.push(['asyncEnd', m.operation, 'result' in m]),
      error: (m: CallMessage) => void events.push(['error', m.operation, (m.error as { code?: string }).code]),
    };
    tracing.subscribe(subscribers);
    unsubscribe.push(() => tracing.unsubscribe(subscribers));
    const commits = on('laurel:commit');
    const retries = on('laurel:retry');
    const conflicts = on('laurel:conflict');

    // No hooks: the channels alone observe the engine.
    const engine = createEngine({ config, clock, store: conflicting(1), retry: { baseDelayMs: 0 } });
    await engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
    await engine.getUser('nobody').catch(() => undefined);
    expect(events).toEqual([
      ['start', 'recordEvent', 'u'],
      ['end', 'recordEvent', 'u'],
      ['asyncStart', 'recordEvent', true],
      ['asyncEnd', 'recordEvent', true],
      ['start', 'getUser', 'nobody'],
      ['end', 'getUser', 'nobody'],
      ['error', 'getUser', 'NOT_FOUND'],
      ['asyncStart', 'getUser', true],
      ['asyncEnd', 'getUser', false],
    ]);
    expect(commits).toEqual([expect.objectContaining({ operation: 'recordEvent', userId: 'u', commits: 1, retries: 1, conflicts: 1 })]);
    expect(retries).toEqual([expect.objectContaining({ operation: 'recordEvent', userId: 'u', attempt: 1 })]);
    expect(conflicts).toEqual([expect.objectContaining({ operation: 'recordEvent', userId: 'u', attempt: 1 })]);
  });

  it('a store bound to the start channel is the context of everything the call does (APM style)', async () => {
    const als = new AsyncLocalStorage<string>();
    const tracing = diagnostics.tracingChannel<string, CallMessage>('laurel:call');
    tracing.start.bindStore(als, (m) => `${m.operation}:${m.userId}`);
    unsubscribe.push(() => void tracing.start.unbindStore(als));
    const seen: (string | undefined)[] = [];
    const store = createMemoryStore({ beforeCommit: () => void seen.push(als.getStore()) });
    const engine = createEngine({ config, clock, store });
    await engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
    await engine.accrue('u');
    await engine.identifyUser({ id: 'u', name: 'U' });
    expect(seen).toEqual(['recordEvent:u', 'identifyUser:u']);
    expect(als.getStore()).toBeUndefined();
  });

  it('nested calls inside a batch are part of it', async () => {
    const starts = on('tracing:laurel:call:start') as CallMessage[];
    const store = createMemoryStore();
    const engine = createEngine({ config, clock, store });
    await engine.recordEvents([{ metricKey: 'lessons', user: { id: 'a' }, value: 1 }]);
    expect(starts.map((m) => m.operation)).toEqual(['recordEvents']);
  });
});

/** A context manager on AsyncLocalStorage (what @opentelemetry/context-async-hooks provides), for the test. */
class TestContextManager implements ContextManager {
  private readonly als = new AsyncLocalStorage<Context>();
  active(): Context {
    return this.als.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(ctx: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F> {
    return this.als.run(ctx, () => fn.apply(thisArg, args));
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    return this;
  }
}

interface RecordedSpan {
  name: string;
  parent: RecordedSpan | undefined;
  attributes: Record<string, unknown>;
  events: { name: string; attributes: Record<string, unknown> | undefined }[];
  status: { code: SpanStatusCode; message?: string | undefined };
  exceptions: unknown[];
  ended: boolean;
}

/** A tracer that records its spans (what an SDK with an in-memory exporter would give). */
function testTracer(): { tracer: Tracer; spans: RecordedSpan[] } {
  const spans: RecordedSpan[] = [];
  const tracer = {
    startSpan(name: string, options: SpanOptions = {}, ctx: Context = context.active()): Span {
      const parent = (trace.getSpan(ctx) as unknown as { record?: RecordedSpan } | undefined)?.record;
      const record: RecordedSpan = { name, parent, attributes: { ...options.attributes }, events: [], status: { code: SpanStatusCode.UNSET }, exceptions: [], ended: false };
      spans.push(record);
      const span = {
        record,
        spanContext: () => ({ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: `b7ad6b71692033${String(spans.length).padStart(2, '0')}`, traceFlags: 1 }),
        setAttribute: (k: string, v: unknown) => ((record.attributes[k] = v), span),
        setAttributes: (a: Record<string, unknown>) => (Object.assign(record.attributes, a), span),
        addEvent: (n: string, a?: Record<string, unknown>) => (record.events.push({ name: n, attributes: a }), span),
        addLink: () => span,
        addLinks: () => span,
        setStatus: (s: RecordedSpan['status']) => ((record.status = s), span),
        updateName: (n: string) => ((record.name = n), span),
        end: () => void (record.ended = true),
        isRecording: () => !record.ended,
        recordException: (e: unknown) => void record.exceptions.push(e),
      };
      return span as unknown as Span;
    },
    startActiveSpan() {
      throw new Error('not used');
    },
  };
  return { tracer: tracer as unknown as Tracer, spans };
}

describe('laurel/otel', () => {
  beforeAll(() => {
    context.setGlobalContextManager(new TestContextManager());
  });
  afterAll(() => {
    context.disable();
    trace.disable();
  });

  it('spans each call with its attributes; the span is active inside the call', async () => {
    const { tracer, spans } = testTracer();
    const inside: unknown[] = [];
    const store = createMemoryStore({ beforeCommit: () => void inside.push((trace.getActiveSpan() as unknown as { record: RecordedSpan } | undefined)?.record.name) });
    const engine = createEngine({ config, clock, store, hooks: otelHooks(tracer) });
    await engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
    await engine.getLeaderboard('all');
    expect(spans.map((s) => s.name)).toEqual(['laurel.recordEvent', 'laurel.getLeaderboard']);
    expect(spans[0]?.attributes).toEqual({ 'laurel.operation': 'recordEvent', 'laurel.user_id': 'u1', 'laurel.metric_key': 'lessons', 'laurel.commits': 1, 'laurel.retries': 0, 'laurel.conflicts': 0 });
    expect(spans[1]?.attributes).toMatchObject({ 'laurel.operation': 'getLeaderboard', 'laurel.commits': 0 });
    expect(spans[1]?.attributes).not.toHaveProperty('laurel.user_id');
    expect(spans.every((s) => s.ended && s.status.code === SpanStatusCode.UNSET && s.parent === undefined)).toBe(true);
    expect(inside).toEqual(['laurel.recordEvent']);
  });

  it('a failed call: error status, the exception recorded, error.type the Laurel code', async () => {
    const { tracer, spans } = testTracer();
    const engine = createEngine({ config, clock, hooks: otelHooks({ tracer }) });
    const error = await engine.getUser('nobody').catch((e: unknown) => e);
    expect(spans).toHaveLength(1);
    expect(spans[0]).toMatchObject({ name: 'laurel.getUser', ended: true, status: { code: SpanStatusCode.ERROR }, attributes: { 'error.type': 'NOT_FOUND', 'laurel.user_id': 'nobody' } });
    expect(spans[0]?.exceptions).toEqual([error]);
  });

  it('retries and conflicts are events on the call\'s span; calls nest under the caller\'s span', async () => {
    const { tracer, spans } = testTracer();
    const engine = createEngine({ config, clock, store: conflicting(2), retry: { baseDelayMs: 0 }, hooks: otelHooks({ tracer, userId: false }) });
    const outer = tracer.startSpan('http.request');
    await context.with(trace.setSpan(context.active(), outer), () => engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 }));
    outer.end();
    const span = spans.find((s) => s.name === 'laurel.recordEvent') as RecordedSpan;
    expect(span.parent?.name).toBe('http.request');
    expect(span.attributes).not.toHaveProperty('laurel.user_id');
    expect(span.attributes).toMatchObject({ 'laurel.retries': 2, 'laurel.conflicts': 2, 'laurel.commits': 1 });
    expect(span.events.map((e) => [e.name, e.attributes?.['laurel.attempt']])).toEqual([
      ['laurel.conflict', 1],
      ['laurel.retry', 1],
      ['laurel.conflict', 2],
      ['laurel.retry', 2],
    ]);
  });

  it('uses the global tracer provider by default, together with other hooks', async () => {
    const { tracer, spans } = testTracer();
    trace.setGlobalTracerProvider({ getTracer: () => tracer });
    const { seen, hooks } = recorder();
    const engine = createEngine({ config, clock, hooks: [otelHooks(), hooks] });
    await engine.identifyUser({ id: 'g' });
    expect(spans.map((s) => s.name)).toEqual(['laurel.identifyUser']);
    expect(seen.commits).toHaveLength(1);
  });
});
