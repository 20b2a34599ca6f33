import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { addDecimal, applyEvent, createEngine, defineConfig, isLaurelError, type UserState } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { arbEventSequence, sequentialIds, type ArbEvent } from '../src/testing/index.js';

const config = defineConfig({
  timeZone: 'Europe/Paris',
  metrics: [{ key: 'lessons', name: 'Lessons' }, { key: 'quizzes', name: 'Quizzes' }],
  attributes: [{ key: 'device', name: 'Device', type: 'event' }],
  achievements: [
    { key: 'five', name: 'Five', trigger: 'metric', metricKey: 'lessons', metricValue: 5 },
    { key: 'ios3', name: 'iOS 3', trigger: 'metric', metricKey: 'lessons', metricValue: 3, eventAttributes: { device: 'a' } },
    { key: 'streak3', name: 'Streak 3', trigger: 'streak', streakLength: 3 },
    { key: 'both', name: 'Both', trigger: 'achievement', achievementKeys: ['five', 'streak3'] },
  ],
  streak: { frequency: 'daily', freezes: { initial: 1, max: 2, autoEarn: { everyDays: 3, amount: 1 } } },
  pointsSystems: [
    { key: 'xp', name: 'XP', levels: [{ key: 'b', name: 'B', points: 0 }, { key: 's', name: 'S', points: 50 }], triggers: [{ key: 'lessons', type: 'metric', metricKey: 'lessons', metricThreshold: 2, points: 10 }, { key: 'streak', type: 'streak', streakLengthThreshold: 2, points: 5 }, { key: 'five', type: 'achievement', achievementKey: 'five', points: 25 }] },
    { key: 'energy', name: 'Energy', maxPoints: 5, triggers: [{ key: 'signup', type: 'user_creation', points: 5 }, { key: 'refill', type: 'time', timeUnit: 'hour', timeInterval: 6, points: 1 }, { key: 'per-quiz', type: 'metric', metricKey: 'quizzes', metricThreshold: 1, points: -1 }] },
  ],
  leaderboards: [{ key: 'weekly', name: 'Weekly', rankBy: 'metric', metricKey: 'lessons', start: '2024-01-01', runUnit: 'day', runInterval: 7 }],
});

const START = Date.parse('2026-01-05T08:00:00Z');

/** Folds events through the pure core only, one user state per user. */
function fold(events: ArbEvent[]) {
  const states = new Map<string, UserState>();
  const seen = new Set<string>();
  const newId = sequentialIds();
  let t = START;
  const responses = [];
  for (const e of events) {
    t += e.gapMs;
    const scope = e.idempotencyKey === undefined ? null : JSON.stringify([e.user.id, e.metricKey, e.idempotencyKey]);
    if (scope && seen.has(scope)) continue;
    const { state, response } = applyEvent(config, states.get(e.user.id) ?? null, e, { now: new Date(t), newId });
    states.set(e.user.id, state);
    if (scope) seen.add(scope);
    responses.push(response);
  }
  return { states, responses };
}

async function throughEngine(events: ArbEvent[]) {
  let now = new Date(START);
  const store = createMemoryStore();
  const engine = createEngine({ config, store, clock: () => now, newId: sequentialIds() });
  for (const e of events) {
    now = new Date(now.getTime() + e.gapMs);
    await engine.recordEvent(e.metricKey as 'lessons', { user: e.user, value: e.value, attributes: e.attributes ?? {} }, e.idempotencyKey === undefined ? {} : { idempotencyKey: e.idempotencyKey });
  }
  return store;
}

describe('foundation properties', () => {
  it('is deterministic: same config, state, event, clock and ids give the same result', () => {
    fc.assert(
      fc.property(arbEventSequence(config, { maxLength: 15, allowNegative: true }), (events) => {
        expect(fold(events)).toEqual(fold(events));
      }),
      { numRuns: 60 },
    );
  });

  it('never mutates its inputs', () => {
    fc.assert(
      fc.property(arbEventSequence(config, { maxLength: 12, allowNegative: true }), (events) => {
        let state: UserState | null = null;
        let t = START;
        const newId = sequentialIds();
        for (const e of events.map((x) => ({ ...x, user: { id: 'u1' } }))) {
          t += e.gapMs;
          const frozenState = structuredClone(state);
          const frozenEvent = structuredClone(e);
          const result = applyEvent(config, state, e, { now: new Date(t), newId });
          expect(state).toEqual(frozenState);
          expect(e).toEqual(frozenEvent);
          state = result.state;
        }
      }),
      { numRuns: 60 },
    );
  });

  it('total = exact decimal sum of the values applied', () => {
    fc.assert(
      fc.property(arbEventSequence(config, { maxLength: 25, decimals: 3, allowNegative: true }), (events) => {
        const { states } = fold(events);
        const expected = new Map<string, string>();
        const seen = new Set<string>();
        for (const e of events) {
          const scope = e.idempotencyKey === undefined ? null : JSON.stringify([e.user.id, e.metricKey, e.idempotencyKey]);
          if (scope && seen.has(scope)) continue;
          if (scope) seen.add(scope);
          const k = `${e.user.id}/${e.metricKey}`;
          expected.set(k, addDecimal(expected.get(k) ?? '0', e.value));
        }
        for (const [k, total] of expected) {
          const [user, metric] = k.split('/') as [string, string];
          expect(states.get(user)?.metrics[metric]).toBe(Number(total));
        }
      }),
      { numRuns: 100 },
    );
  });

  it('a repeated idempotency key changes nothing', async () => {
    await fc.assert(
      fc.asyncProperty(arbEventSequence(config, { maxLength: 10, allowNegative: true }), fc.integer({ min: 0, max: 9 }), async (events, pick) => {
        let now = new Date(START);
        const store = createMemoryStore();
        const engine = createEngine({ config, store, clock: () => now, newId: sequentialIds() });
        for (const e of events) {
          now = new Date(now.getTime() + e.gapMs);
          await engine.recordEvent(e.metricKey as 'lessons', { user: e.user, value: e.value, attributes: e.attributes ?? {} }, { idempotencyKey: `key-${events.indexOf(e)}` });
        }
        const i = pick % events.length;
        const e = events[i] as ArbEvent;
        const before = await store.loadUser(e.user.id);
        const ledgerBefore = await store.readLedger({ userId: e.user.id, kind: 'metric', key: e.metricKey, order: 'asc' });
        const replay = await engine.recordEvent(e.metricKey as 'lessons', { user: e.user, value: e.value + 1 }, { idempotencyKey: `key-${i}` });
        expect(replay.idempotentReplayed).toBe(true);
        expect(await store.loadUser(e.user.id)).toEqual(before);
        expect(await store.readLedger({ userId: e.user.id, kind: 'metric', key: e.metricKey, order: 'asc' })).toEqual(ledgerBefore);
      }),
      { numRuns: 40 },
    );
  });

  it('recording events one by one through the engine equals folding them through applyEvent', async () => {
    await fc.assert(
      fc.asyncProperty(arbEventSequence(config, { maxLength: 20, idempotency: true, allowNegative: true }), async (events) => {
        const { states } = fold(events);
        const store = await throughEngine(events);
        // Ids are opaque (a replay's lazy view draws ids too), so completion ids are compared by presence.
        // `notices` is the engine's change-notification bookkeeping (core/changes.ts), not the pure core's.
        const withoutIds = (s: UserState | undefined) => {
          if (!s) return s;
          const { notices: _notices, ...rest } = s;
          return { ...rest, achievements: Object.fromEntries(Object.entries(s.achievements).map(([k, v]) => [k, v.achievedAt])) };
        };
        for (const [userId, state] of states) expect(withoutIds((await store.loadUser(userId))?.state)).toEqual(withoutIds(state));
      }),
      { numRuns: 60 },
    );
  });

  it('a failing call records nothing, whatever came before', async () => {
    await fc.assert(
      fc.asyncProperty(arbEventSequence(config, { maxLength: 8, allowNegative: true }), fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY), async (events, bad) => {
        const store = await throughEngine(events);
        const engine = createEngine({ config, store });
        const userId = (events[0] as ArbEvent).user.id;
        const before = await store.loadUser(userId);
        await engine.recordEvent('lessons', { user: { id: userId }, value: bad }).then(
          () => expect.unreachable(),
          (e) => expect(isLaurelError(e)).toBe(true),
        );
        expect(await store.loadUser(userId)).toEqual(before);
      }),
      { numRuns: 30 },
    );
  });
});
