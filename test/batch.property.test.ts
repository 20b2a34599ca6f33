/**
 * `recordEvents` and the immutable state representation: a batch gives exactly what recording the same
 * events one by one gives, and no call ever writes into a state it was given.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { applyEvent, createEngine, defineConfig, isLaurelError, StorageUnavailableError, type EventResponse, type Store, type UserState } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { arbEventSequence, sequentialIds, type ArbEvent } from '../src/testing/index.js';

/** One-metric events: `[user id, value]` each. */
const lessons = (...events: [string, number][]) => events.map(([id, value]) => ({ metricKey: 'lessons' as const, user: { id }, value }));
/** A daily streak with reminders 30 hours before it lapses. */
const reminders = defineConfig({ timeZone: 'UTC', metrics: [{ key: 'lessons', name: 'Lessons' }], streak: { frequency: 'daily' }, notifications: { streakReminder: { hoursBefore: 30 } } });

export const batchConfig = defineConfig({
  timeZone: 'Europe/Paris',
  metrics: [{ key: 'lessons', name: 'Lessons' }, { key: 'quizzes', name: 'Quizzes' }],
  attributes: [{ key: 'device', name: 'Device', type: 'event' }],
  achievements: [
    { key: 'five', name: 'Five', trigger: 'metric', metricKey: 'lessons', metricValue: 5 },
    { key: 'ios3', name: 'iOS 3', trigger: 'metric', metricKey: 'lessons', metricValue: 3, eventAttributes: { device: 'a' } },
    { key: 'streak2', name: 'Streak 2', trigger: 'streak', streakLength: 2 },
    { key: 'both', name: 'Both', trigger: 'achievement', achievementKeys: ['five', 'streak2'] },
  ],
  streak: { frequency: 'daily', freezes: { initial: 1, max: 2, autoEarn: { everyDays: 3, amount: 1 } } },
  pointsSystems: [
    { key: 'xp', name: 'XP', levels: [{ key: 'b', name: 'B', points: 0 }, { key: 's', name: 'S', points: 50 }], triggers: [{ key: 'lessons', type: 'metric', metricKey: 'lessons', metricThreshold: 2, points: 10 }, { key: 'streak', type: 'streak', streakLengthThreshold: 2, points: 5 }, { key: 'five', type: 'achievement', achievementKey: 'five', points: 25 }] },
    // Blocking consumption: quizzes fail with INSUFFICIENT_POINTS once the energy is spent.
    { key: 'energy', name: 'Energy', maxPoints: 3, triggers: [{ key: 'signup', type: 'user_creation', points: 3 }, { key: 'refill', type: 'time', timeUnit: 'hour', timeInterval: 6, points: 1 }, { key: 'per-quiz', type: 'metric', metricKey: 'quizzes', metricThreshold: 1, points: -1, blockIfOutOfPoints: true }] },
  ],
  leaderboards: [
    { key: 'weekly', name: 'Weekly', rankBy: 'metric', metricKey: 'lessons', start: '2024-01-01', runUnit: 'day', runInterval: 7, maxParticipants: 2 },
    { key: 'xp', name: 'XP board', rankBy: 'points', pointsSystemKey: 'xp', start: '2024-01-01' },
    { key: 'streaks', name: 'Streaks', rankBy: 'streak', start: '2024-01-01' },
  ],
});

const START = Date.parse('2026-01-05T08:00:00Z');
type Outcome = { ok: true; response: EventResponse } | { ok: false; code: string };

/** An engine whose clock moves `stepMs` on every reading, so two runs that read it in the same order agree. */
function engineOn(store: Store, stepMs: number) {
  let n = 0;
  return createEngine({ config: batchConfig, store, clock: () => new Date(START + stepMs * n++), newId: sequentialIds() });
}

// Some events are invalid (a non-finite value, an unknown metric): they fail alone, in both runs alike.
const arbEvents = arbEventSequence(batchConfig, { users: ['u1', 'u2', 'u3', 'u4'], maxLength: 40, idempotency: true, allowNegative: false }).chain((events) =>
  fc.tuple(fc.constant(events), fc.array(fc.integer({ min: 0, max: events.length - 1 }), { maxLength: 3 })).map(([list, bad]) =>
    list.map((e, i) => (bad.includes(i) ? (i % 2 ? { ...e, value: Number.NaN } : { ...e, metricKey: 'nope' }) : e)),
  ),
);
/** The memory store as a minimal custom store: no optional methods, no thresholds in its commit results. */
function bareStore(store: Store): Store {
  const { commitBatch: _c, loadForEvents: _l, ...rest } = store as Store & { userCount: number };
  return {
    ...rest,
    async commit(c) {
      const result = await store.commit(c);
      return { ...result, ranks: result.ranks.map(({ threshold: _t, ...change }) => change) };
    },
  };
}

const toBatch = (e: ArbEvent) => ({ metricKey: e.metricKey as 'lessons', user: e.user, value: e.value, ...(e.attributes ? { attributes: e.attributes } : {}), ...(e.idempotencyKey !== undefined ? { idempotencyKey: e.idempotencyKey } : {}) });

async function snapshot(store: Store, users: string[]) {
  const out: unknown[] = [];
  for (const id of users) {
    out.push(await store.loadUser(id));
    for (const [kind, key] of [['metric', 'lessons'], ['metric', 'quizzes'], ['points', 'xp'], ['points', 'energy'], ['streak', 'streak']] as const) out.push(await store.readLedger({ userId: id, kind, key, order: 'asc' }));
  }
  out.push(await store.getCounters(['users', 'achievement:five', 'achievement:both']));
  return JSON.parse(JSON.stringify(out));
}

describe('recordEvents', () => {
  it('a batch gives the responses, errors, states, ledgers and ranks of recording the events one by one', async () => {
    await fc.assert(
      fc.asyncProperty(arbEvents, fc.array(fc.integer({ min: 1, max: 12 }), { minLength: 1, maxLength: 10 }), fc.constantFrom(60_000, 3_600_000, 40_000_000), async (events, sizes, stepMs) => {
        const singleStore = createMemoryStore();
        const single = engineOn(singleStore, stepMs);
        const expected: Outcome[] = [];
        for (const e of events) {
          try {
            expected.push({ ok: true, response: await single.recordEvent(e.metricKey as 'lessons', e, e.idempotencyKey === undefined ? {} : { idempotencyKey: e.idempotencyKey }) });
          } catch (error) {
            if (!isLaurelError(error)) throw error;
            expected.push({ ok: false, code: error.code });
          }
        }
        const batchStore = createMemoryStore();
        const batch = engineOn(batchStore, stepMs);
        const actual: Outcome[] = [];
        for (let i = 0, k = 0; i < events.length; k++) {
          const size = sizes[k % sizes.length] as number;
          const results = await batch.recordEvents(events.slice(i, i + size).map(toBatch));
          actual.push(...results.map((r): Outcome => (r.ok ? r : { ok: false, code: r.error.code })));
          i += size;
        }
        expect(JSON.parse(JSON.stringify(actual))).toEqual(JSON.parse(JSON.stringify(expected)));
        // A store with neither commitBatch nor loadForEvents nor thresholds in its commits: the same again.
        const plain = bareStore(createMemoryStore());
        const fallback = engineOn(plain, stepMs);
        const viaFallback: Outcome[] = [];
        for (let i = 0, k = 0; i < events.length; k++) {
          const size = sizes[k % sizes.length] as number;
          viaFallback.push(...(await fallback.recordEvents(events.slice(i, i + size).map(toBatch))).map((r): Outcome => (r.ok ? r : { ok: false, code: r.error.code })));
          i += size;
        }
        expect(JSON.parse(JSON.stringify(viaFallback))).toEqual(JSON.parse(JSON.stringify(expected)));
        const users = ['u1', 'u2', 'u3', 'u4'];
        expect(await snapshot(batchStore, users)).toEqual(await snapshot(singleStore, users));
        for (const board of ['lb|streaks|2024-01-01|', 'lb|xp|2024-01-01|']) expect(await batchStore.readRange(board, 0, 10)).toEqual(await singleStore.readRange(board, 0, 10));
      }),
      { numRuns: 120 },
    );
  });

  it('a store without commitBatch or loadForEvents gives the same results', async () => {
    const events = Array.from({ length: 60 }, (_, i) => ({ metricKey: (i % 3 ? 'lessons' : 'quizzes') as 'lessons' | 'quizzes', user: { id: `u${i % 5}` }, value: 1 + (i % 4), idempotencyKey: `k${i % 30}` }));
    const plain = createMemoryStore();
    const { commitBatch: _c, loadForEvents: _l, ...bare } = plain as Store & { userCount: number };
    const a = await engineOn(bare as Store, 600_000).recordEvents(events);
    const b = await engineOn(createMemoryStore(), 600_000).recordEvents(events);
    expect(JSON.parse(JSON.stringify(a))).toEqual(JSON.parse(JSON.stringify(b)));
    expect(a.filter((r) => r.ok && r.response.idempotentReplayed).length).toBeGreaterThan(5);
  });

  it('a conflict from another writer sends that user\'s events again; the others commit once', async () => {
    const store = createMemoryStore();
    const other = engineOn(store, 60_000);
    await other.recordEvent('lessons', { user: { id: 'busy' }, value: 1 });
    // A store wrapper that lets another process write "busy" between the batch's load and its commit.
    let raced = false;
    const racing: Store = {
      ...store,
      loadForEvents: store.loadForEvents?.bind(store),
      async commitBatch(commits) {
        if (!raced) {
          raced = true;
          await other.recordEvent('lessons', { user: { id: 'busy' }, value: 100 });
        }
        return (store.commitBatch as NonNullable<Store['commitBatch']>)(commits);
      },
    };
    const engine = engineOn(racing, 60_000);
    const results = await engine.recordEvents([
      { metricKey: 'lessons', user: { id: 'busy' }, value: 2 },
      { metricKey: 'lessons', user: { id: 'calm' }, value: 3 },
      { metricKey: 'lessons', user: { id: 'busy' }, value: 4 },
    ]);
    expect(results.map((r) => (r.ok ? r.response.total : r.error.code))).toEqual([103, 3, 107]);
    expect((await store.loadUser('busy'))?.state.metrics.lessons).toBe(107);
    expect((await store.loadUser('calm'))?.version).toBe(1);
  });

  it('a storage fault fails the user\'s commit and every later event of that user in the batch, replays included', async () => {
    let failOnce = true;
    const store = createMemoryStore({
      beforeCommit: () => {
        if (failOnce) {
          failOnce = false;
          throw new Error('connection reset');
        }
      },
    });
    const engine = engineOn(store, 60_000);
    const results = await engine.recordEvents([
      { metricKey: 'lessons', user: { id: 'u' }, value: 5, idempotencyKey: 'msg-1' },
      { metricKey: 'lessons', user: { id: 'u' }, value: 5, idempotencyKey: 'msg-1' },
      { metricKey: 'quizzes', user: { id: 'u' }, value: 9 },
    ]);
    expect(results.map((r) => (r.ok ? 'ok' : r.error.code))).toEqual(['STORAGE_UNAVAILABLE', 'STORAGE_UNAVAILABLE', 'STORAGE_UNAVAILABLE']);
    expect(await store.loadUser('u')).toBeNull();
    // Sent again, the events apply once.
    const again = await engine.recordEvents([
      { metricKey: 'lessons', user: { id: 'u' }, value: 5, idempotencyKey: 'msg-1' },
      { metricKey: 'lessons', user: { id: 'u' }, value: 5, idempotencyKey: 'msg-1' },
    ]);
    expect(again.map((r) => (r.ok ? [r.response.total, r.response.idempotentReplayed] : r.error.code))).toEqual([[5, false], [5, true]]);
  });

  it('a streak reminder from a batch carries the streak history, as one by one (the earlier events of the batch included)', async () => {
    const run = async (batch: boolean) => {
      const store = createMemoryStore();
      let now = Date.parse('2026-01-05T10:00:00Z');
      const engine = createEngine({ config: reminders, store, clock: () => new Date(now), newId: sequentialIds() });
      await engine.recordEvent('lessons', { user: { id: 'a' }, value: 1 });
      now = Date.parse('2026-01-06T22:00:00Z');
      // a's event does not extend today (a value of 0), so the reminder before a's streak lapses is due.
      const events = lessons(['b', 1], ['a', 0], ['b', 2]);
      if (batch) await engine.recordEvents(events);
      else for (const e of events) await engine.recordEvent(e.metricKey, e);
      return (await store.readChanges({ limit: 100 })).events.map(({ position: _p, ...e }) => e);
    };
    const one = await run(false);
    const histories = one.filter((e) => e.type === 'emails.streak_reminder_due').map((e) => (e.payload as { streak: { streakHistory: unknown[] } }).streak.streakHistory);
    expect(histories.length).toBeGreaterThan(0);
    for (const h of histories) expect(h).toHaveLength(7);
    expect(await run(true)).toEqual(one);
  });

  it('a streak reminder whose history read fails fails that user\'s event alone, as one by one; nothing of it is stored', async () => {
    const run = async (batch: boolean) => {
      const inner = createMemoryStore();
      let down = false;
      // The memory store without its direct path, whose streak-ledger reads of user a fail while down.
      const store: Store = { ...inner, loadForEvents: (inner.loadForEvents as NonNullable<Store['loadForEvents']>).bind(inner), commitBatch: (inner.commitBatch as NonNullable<Store['commitBatch']>).bind(inner) };
      store.readLedger = async (q) => {
        if (down && q.userId === 'a' && q.kind === 'streak') throw new StorageUnavailableError('read down');
        return inner.readLedger(q);
      };
      let now = Date.parse('2026-01-05T10:00:00Z');
      const engine = createEngine({ config: reminders, store, clock: () => new Date(now), newId: sequentialIds() });
      await engine.recordEvent('lessons', { user: { id: 'a' }, value: 1 });
      now = Date.parse('2026-01-06T22:00:00Z');
      down = true;
      // a's events do not extend today (values of 0), so each is due the reminder, whose history read fails.
      const events = lessons(['b', 1], ['a', 0], ['c', 2], ['a', 0]);
      const out: unknown[] = [];
      if (batch) for (const r of await engine.recordEvents(events)) out.push(r.ok ? r.response.total : r.error.code);
      else for (const e of events) out.push(await engine.recordEvent(e.metricKey, e).then((r) => r.total, (err: { code: string }) => err.code));
      return { out, a: (await inner.loadUser('a'))?.state.metrics.lessons };
    };
    const one = await run(false);
    expect(one).toEqual({ out: [1, 'STORAGE_UNAVAILABLE', 2, 'STORAGE_UNAVAILABLE'], a: 1 });
    expect(await run(true)).toEqual(one);
  });

  it('a user counted under earlier rules is reconciled at its first event of the batch: the ids, responses and states of one by one', async () => {
    const base = {
      timeZone: 'UTC',
      metrics: [{ key: 'lessons', name: 'Lessons' }],
      pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'l', type: 'metric' as const, metricKey: 'lessons', metricThreshold: 1, points: 10 }] }],
    };
    const five = { key: 'five', name: 'Five', trigger: 'metric' as const, metricKey: 'lessons', metricValue: 5 };
    const before = defineConfig({ ...base, achievements: [five] });
    const after = defineConfig({ ...base, achievements: [five, { key: 'two', name: 'Two', trigger: 'metric' as const, metricKey: 'lessons', metricValue: 2 }] });
    const run = async (batch: boolean) => {
      const store = createMemoryStore();
      let now = Date.parse('2026-01-05T10:00:00Z');
      const clock = () => new Date((now += 1000));
      await createEngine({ config: before, store, clock, newId: sequentialIds('a') }).recordEvent('lessons', { user: { id: 'stale' }, value: 3 });
      const engine = createEngine({ config: after, store, clock, newId: sequentialIds('b') });
      const events = lessons(['fresh', 1], ['stale', 1], ['fresh', 1], ['stale', 1]);
      const responses: unknown[] = [];
      if (batch) for (const r of await engine.recordEvents(events)) responses.push(r.ok ? r.response : r.error.code);
      else for (const e of events) responses.push(await engine.recordEvent(e.metricKey, e));
      return { responses, users: await store.loadUsers(['stale', 'fresh']), ledger: await store.readUserLedger('stale', { limit: 100 }) };
    };
    const one = await run(false);
    expect(JSON.stringify(one)).toContain('"two"');
    expect(await run(true)).toEqual(one);
  });

  it('refuses a non-array and more than 10,000 events, recording nothing', async () => {
    const store = createMemoryStore();
    const engine = engineOn(store, 1000);
    await expect(engine.recordEvents('x' as never)).rejects.toMatchObject({ code: 'VALIDATION' });
    await expect(engine.recordEvents(Array.from({ length: 10_001 }, () => ({ metricKey: 'lessons', user: { id: 'u' }, value: 1 })))).rejects.toMatchObject({ code: 'VALIDATION' });
    expect(store.userCount).toBe(0);
  });
});

const deepFreeze = <T>(value: T): T => {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
};

describe('immutable states', () => {
  it('structural sharing never writes into a prior state: deep-frozen priors, and every prior reads the same after later calls', () => {
    fc.assert(
      fc.property(arbEventSequence(batchConfig, { users: ['u1', 'u2'], maxLength: 40, allowNegative: false }), fc.boolean(), (events, viaJson) => {
        const newId = sequentialIds();
        let t = START;
        const states = new Map<string, UserState>();
        const seen: [UserState, string][] = [];
        for (const e of events) {
          t += e.gapMs;
          const before = states.get(e.user.id);
          // A prior from a store is parsed JSON (checked and copied once); one from the core is used as is.
          const prior = before && viaJson ? deepFreeze(JSON.parse(JSON.stringify(before)) as UserState) : before;
          try {
            const { state } = applyEvent(batchConfig, prior ?? null, e, { now: new Date(t), newId });
            states.set(e.user.id, state);
            seen.push([state, JSON.stringify(state)]);
          } catch (error) {
            if (!isLaurelError(error)) throw error;
          }
        }
        for (const [state, json] of seen) expect(JSON.stringify(state)).toBe(json);
        // Outside production every part of a state the core returns is frozen.
        for (const [state] of seen) {
          expect(Object.isFrozen(state) && Object.isFrozen(state.metrics) && Object.isFrozen(state.points) && Object.isFrozen(state.user.attributes)).toBe(true);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('getUser hands out a copy: changing it changes nothing stored', async () => {
    const store = createMemoryStore();
    const engine = engineOn(store, 1000);
    await engine.identifyUser({ id: 'c', attributes: {} });
    const user = await engine.getUser('c');
    user.tz = 'Not/AZone';
    user.attributes.plan = 'pro';
    expect((await engine.getUser('c')).tz).toBeNull();
    expect((await engine.recordEvent('lessons', { user: { id: 'c' }, value: 1 })).total).toBe(1);
  });

  it('a descriptor clone of a state is checked again, like any state from outside the core', () => {
    const newId = sequentialIds();
    const { state } = applyEvent(batchConfig, null, { metricKey: 'lessons', user: { id: 'd' }, value: 1 }, { now: new Date(START), newId });
    // Copies every own property, the core's mark included, with one change (as Immer's strict mode would).
    const descriptors = Object.getOwnPropertyDescriptors(state) as PropertyDescriptorMap;
    descriptors.user = { value: { ...state.user, tz: 'Not/AZone' }, enumerable: true, writable: true, configurable: true };
    const broken = Object.defineProperties({}, descriptors) as UserState;
    expect(() => applyEvent(batchConfig, broken, { metricKey: 'lessons', user: { id: 'd' }, value: 1 }, { now: new Date(START), newId })).toThrow(/prior state/);
    // The same clone keeping the prototype, and a child of the state that overrides a field: checked again too.
    const sameProto = Object.create(Object.getPrototypeOf(state) as object, descriptors) as UserState;
    expect(() => applyEvent(batchConfig, sameProto, { metricKey: 'lessons', user: { id: 'd' }, value: 1 }, { now: new Date(START), newId })).toThrow(/prior state/);
    const child = Object.create(state, { metrics: { value: { lessons: 'abc' }, enumerable: true } }) as UserState;
    expect(() => applyEvent(batchConfig, child, { metricKey: 'lessons', user: { id: 'd' }, value: 1 }, { now: new Date(START), newId })).toThrow(/prior state/);
  });

  it('a state is plain JSON data: a plain object equal (strictly) to its JSON round trip', () => {
    const { state } = applyEvent(batchConfig, null, { metricKey: 'lessons', user: { id: 'p' }, value: 1 }, { now: new Date(START), newId: sequentialIds() });
    expect(Object.getPrototypeOf(state)).toBe(Object.prototype);
    expect(state).toStrictEqual(JSON.parse(JSON.stringify(state)));
  });

  it('a state shares every record the call did not change with its prior', () => {
    const newId = sequentialIds();
    const first = applyEvent(batchConfig, null, { metricKey: 'lessons', user: { id: 'u' }, value: 1 }, { now: new Date(START), newId }).state;
    const next = applyEvent(batchConfig, first, { metricKey: 'lessons', user: { id: 'u' }, value: 1 }, { now: new Date(START + 60_000), newId }).state;
    expect(next.user).toBe(first.user);
    expect(next.achievements).toBe(first.achievements);
    expect(next.metrics).not.toBe(first.metrics);
    expect(next.points.energy).toBe(first.points.energy);
    expect(first.metrics.lessons).toBe(1);
    expect(next.metrics.lessons).toBe(2);
  });
});
