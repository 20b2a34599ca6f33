import { describe, expect, it } from 'vitest';
import {
  applyEvent,
  defineConfig,
  InvalidAttributeKeysError,
  isLaurelError,
  NotFoundError,
  ValidationError,
  type LaurelError,
} from '../src/index.js';
import { sequentialIds } from '../src/testing/index.js';
import { DAY, setup } from './helpers.js';

const config = defineConfig({
  timeZone: 'UTC',
  metrics: [{ key: 'lessons', name: 'Lessons completed' }, { key: 'quizzes', name: 'Quizzes' }],
  attributes: [
    { key: 'device', name: 'Device', type: 'event' },
    { key: 'lang', name: 'Language', type: 'event' },
    { key: 'plan', name: 'Plan', type: 'user' },
  ],
});

async function failure(p: Promise<unknown>): Promise<LaurelError> {
  try {
    await p;
  } catch (e) {
    expect(isLaurelError(e)).toBe(true);
    return e as LaurelError;
  }
  throw new Error('expected the call to fail');
}

describe('users (semantics 2)', () => {
  it('creates a user on the first event with createdAt = that instant; latest non-empty email and tz win', async () => {
    const t = setup(config);
    await t.engine.recordEvent('lessons', { user: { id: 'u1', email: 'a@x.io', tz: 'Europe/Paris' }, value: 1 });
    t.advance(DAY);
    await t.engine.recordEvent('lessons', { user: { id: 'u1', email: '', tz: '' }, value: 1 });
    let user = await t.engine.getUser('u1');
    expect(user).toMatchObject({ id: 'u1', email: 'a@x.io', tz: 'Europe/Paris', created: '2026-01-05T10:00:00.000Z' });
    await t.engine.recordEvent('lessons', { user: { id: 'u1', email: 'b@x.io', tz: 'Asia/Tokyo', attributes: { plan: 'pro' } }, value: 1 });
    user = await t.engine.getUser('u1');
    expect(user).toMatchObject({ email: 'b@x.io', tz: 'Asia/Tokyo', attributes: { plan: 'pro' }, created: '2026-01-05T10:00:00.000Z', updated: '2026-01-06T10:00:00.000Z' });
  });

  it('identifyUser creates and updates; updateUser needs an existing user; getUser 404s', async () => {
    const t = setup(config);
    const created = await t.engine.identifyUser({ id: 'u9', name: 'Ada' });
    expect(created).toMatchObject({ id: 'u9', name: 'Ada', email: null, tz: null, created: '2026-01-05T10:00:00.000Z' });
    const updated = await t.engine.updateUser('u9', { email: 'ada@x.io' });
    expect(updated).toMatchObject({ name: 'Ada', email: 'ada@x.io' });
    expect((await failure(t.engine.updateUser('ghost', { name: 'G' }))).status).toBe(404);
    expect(await failure(t.engine.getUser('ghost'))).toBeInstanceOf(NotFoundError);
  });
});

describe('values and totals (semantics 2)', () => {
  it('sums exactly: 0.1 + 0.2 = 0.3 and a thousand 0.01 give 10', async () => {
    const t = setup(config);
    await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 0.1 });
    const r = await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 0.2 });
    expect(r.total).toBe(0.3);
    let last = 0;
    for (let i = 0; i < 1000; i++) last = (await t.engine.recordEvent('quizzes', { user: { id: 'u2' }, value: 0.01 })).total;
    expect(last).toBe(10);
  });

  it('accepts negative and decimal values', async () => {
    const t = setup(config);
    await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 5 });
    expect((await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: -7.25 })).total).toBe(-2.25);
  });

  it('returns the response shape of the issue', async () => {
    const t = setup(config);
    const res = await t.engine.recordEvent('lessons', { user: { id: 'u1', email: 'a@b.c', tz: 'Europe/Paris' }, value: 1, attributes: { device: 'ios' } }, { idempotencyKey: 'lesson-42' });
    expect(res).toEqual({
      metricId: config.metrics[0]?.id,
      eventId: expect.any(String),
      total: 1,
      achievements: [],
      currentStreak: { length: 0, frequency: 'daily', started: null, periodStart: null, periodEnd: null, expires: null, extended: false },
      points: {},
      leaderboards: {},
      idempotencyKey: 'lesson-42',
      idempotentReplayed: false,
    });
    const plain = await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
    expect(plain).not.toHaveProperty('idempotencyKey');
    expect(plain).not.toHaveProperty('idempotentReplayed');
  });
});

describe('bad input: typed error, nothing recorded (semantics 2, 8)', () => {
  const cases: [string, () => unknown, string, number][] = [
    ['NaN value', () => ({ user: { id: 'u1' }, value: Number.NaN }), 'VALIDATION', 400],
    ['Infinity value', () => ({ user: { id: 'u1' }, value: Number.POSITIVE_INFINITY }), 'VALIDATION', 400],
    ['-Infinity value', () => ({ user: { id: 'u1' }, value: Number.NEGATIVE_INFINITY }), 'VALIDATION', 400],
    ['string value', () => ({ user: { id: 'u1' }, value: '1' }), 'VALIDATION', 400],
    ['empty user id', () => ({ user: { id: '' }, value: 1 }), 'VALIDATION', 400],
    ['256-char user id', () => ({ user: { id: 'x'.repeat(256) }, value: 1 }), 'VALIDATION', 400],
    ['missing user', () => ({ value: 1 }), 'VALIDATION', 400],
    ['bad tz', () => ({ user: { id: 'u1', tz: 'Mars/Olympus' }, value: 1 }), 'VALIDATION', 400],
    ['non-string attribute value', () => ({ user: { id: 'u1' }, value: 1, attributes: { device: 3 } }), 'VALIDATION', 400],
    ['unknown attribute keys', () => ({ user: { id: 'u1' }, value: 1, attributes: { colour: 'red', device: 'ios', size: 'L' } }), 'INVALID_ATTRIBUTE_KEYS', 400],
    ['__proto__ attribute key', () => ({ user: { id: 'u1' }, value: 1, attributes: JSON.parse('{"__proto__": "x"}') }), 'INVALID_ATTRIBUTE_KEYS', 400],
    ['user attribute sent as event attribute', () => ({ user: { id: 'u1' }, value: 1, attributes: { plan: 'pro' } }), 'INVALID_ATTRIBUTE_KEYS', 400],
    ['event attribute sent as user attribute', () => ({ user: { id: 'u1', attributes: { device: 'ios' } }, value: 1 }), 'INVALID_ATTRIBUTE_KEYS', 400],
  ];
  for (const [name, input, code, status] of cases) {
    it(`rejects ${name}`, async () => {
      const t = setup(config);
      await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 2 });
      const before = await t.store.loadUser('u1');
      const error = await failure(t.engine.recordEvent('lessons', input() as never));
      expect(error.code).toBe(code);
      expect(error.status).toBe(status);
      expect(await t.store.loadUser('u1')).toEqual(before);
      expect(await t.store.readLedger({ userId: 'u1', kind: 'metric', key: 'lessons', order: 'asc' })).toHaveLength(1);
    });
  }

  it('uses the exact attribute error text, keys in the order sent', async () => {
    const t = setup(config);
    const error = await failure(t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1, attributes: { zeta: 'a', device: 'ios', alpha: 'b' } }));
    expect(error).toBeInstanceOf(InvalidAttributeKeysError);
    expect(error.message).toBe('Invalid attribute keys: zeta, alpha. Please ensure all attribute keys match those set up in the configuration.');
  });

  it('an unknown metric is a not-found error and creates no user', async () => {
    const t = setup(config);
    const error = await failure(t.engine.recordEvent('lesons' as 'lessons', { user: { id: 'u1' }, value: 1 }));
    expect(error).toBeInstanceOf(NotFoundError);
    expect(error.status).toBe(404);
    expect(error.message).toContain('lesons');
    expect(await t.store.loadUser('u1')).toBeNull();
  });

  it('validation errors name the offending input', async () => {
    const t = setup(config);
    const error = await failure(t.engine.recordEvent('lessons', { user: { id: 'x'.repeat(256) }, value: 1 }));
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.message).toContain('user.id');
    expect(error.message).toContain('256');
  });
});

describe('idempotency (semantics 3)', () => {
  it('applies a key once per (user, metric, key) and replays the current state', async () => {
    const t = setup(config);
    const first = await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 3 }, { idempotencyKey: 'k' });
    expect(first).toMatchObject({ total: 3, idempotencyKey: 'k', idempotentReplayed: false });
    await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
    const replay = await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 3 }, { idempotencyKey: 'k' });
    expect(replay).toMatchObject({ total: 4, achievements: [], points: {}, leaderboards: {}, idempotencyKey: 'k', idempotentReplayed: true, eventId: first.eventId });
    expect(replay.currentStreak.extended).toBe(false);
    // Same key, other metric or other user: a different scope.
    expect((await t.engine.recordEvent('quizzes', { user: { id: 'u1' }, value: 1 }, { idempotencyKey: 'k' })).idempotentReplayed).toBe(false);
    expect((await t.engine.recordEvent('lessons', { user: { id: 'u2' }, value: 1 }, { idempotencyKey: 'k' })).idempotentReplayed).toBe(false);
    expect(await t.store.readLedger({ userId: 'u1', kind: 'metric', key: 'lessons', order: 'asc' })).toHaveLength(2);
  });

  it('keeps keys forever', async () => {
    const t = setup(config);
    await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1 }, { idempotencyKey: 'old' });
    t.advance(400 * DAY);
    expect((await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1 }, { idempotencyKey: 'old' })).idempotentReplayed).toBe(true);
  });
});

describe('the pure core', () => {
  it('applyEvent takes time and ids from the context and returns state, response and effects', () => {
    const newId = sequentialIds();
    const { state, response, effects } = applyEvent(config, null, { metricKey: 'lessons', user: { id: 'u1' }, value: 2 }, { now: new Date('2026-03-01T00:00:00Z'), newId });
    expect(state.metrics.lessons).toBe(2);
    expect(state.user.created).toBe('2026-03-01T00:00:00.000Z');
    expect(response.eventId).toBe('id-1');
    expect(effects.ledger).toEqual([{ id: 'id-1', userId: 'u1', kind: 'metric', key: 'lessons', at: '2026-03-01T00:00:00.000Z', delta: 2, total: 2, data: { user: {} } }]);
    expect(effects.created).toBe(true);
    expect(effects.counters).toEqual({ users: 1 });
  });
});
