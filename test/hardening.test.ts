/**
 * Hostile and unusual input: every public function answers bad input with a LaurelError and changes nothing;
 * keys named after Object.prototype members work; numbers outside the exact range are refused; composite
 * chains settle in linear time; attribute-gated achievements settle on every call; bodies over the node
 * adapter's cap are answered 413 whatever their size.
 */
import http from 'node:http';
import v8 from 'node:v8';
import vm from 'node:vm';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addDecimal, applyAccrue, applyCompletion, applyEvent, applyIdentify, boardIndex, compareDecimal, ConflictError, createEngine, decimalOf, defineConfig, isLaurelError, replayResponse, StorageUnavailableError, viewState, withRankIndex, type CommitResult, type RankIndex, type Store, type UserState } from '../src/index.js';
import { createHttpHandler, toNodeListener } from '../src/http.js';
import { createMemoryStore } from '../src/memory.js';
import { sequentialIds } from '../src/testing/index.js';
import { setup } from './helpers.js';

const PROTO_KEYS = ['toString', 'valueOf', 'hasOwnProperty', 'isPrototypeOf', 'propertyIsEnumerable', 'toLocaleString', '__defineGetter__', '__lookupSetter__'] as const;

const protoConfig = defineConfig({
  metrics: [{ key: 'toString', name: 'Metric named toString' }, { key: 'valueOf', name: 'Metric named valueOf' }],
  attributes: [{ key: 'hasOwnProperty', name: 'Attr', type: 'user' }, { key: 'isPrototypeOf', name: 'Event attr', type: 'event' }],
  achievements: [
    { key: 'valueOf', name: 'valueOf achievement', trigger: 'metric', metricKey: 'toString', metricValue: 2 },
    { key: 'hasOwnProperty', name: 'hasOwnProperty achievement', trigger: 'metric', metricKey: 'valueOf', metricValue: 5 },
    { key: 'toLocaleString', name: 'filtered', trigger: 'metric', metricKey: 'toString', metricValue: 1, eventAttributes: { isPrototypeOf: 'x' } },
    { key: 'propertyIsEnumerable', name: 'composite', trigger: 'achievement', achievementKeys: ['valueOf', 'toLocaleString'] },
  ],
  streak: { frequency: 'daily', metrics: [{ key: 'toString', threshold: 1 }] },
  pointsSystems: [{ key: 'toString', name: 'Points named toString', triggers: [{ key: 'toString', type: 'metric', metricKey: 'toString', metricThreshold: 1, points: 3 }, { key: 'valueOf', type: 'achievement', achievementKey: 'valueOf', points: 100 }] }],
  leaderboards: [{ key: 'valueOf', name: 'Board named valueOf', rankBy: 'metric', metricKey: 'toString', start: '2026-01-01', breakdownAttributes: ['hasOwnProperty'] }],
});

describe('keys named after Object.prototype members', () => {
  it('metrics, achievements, points systems, boards and attributes named toString/valueOf/hasOwnProperty work', async () => {
    const t = setup(protoConfig);
    const first = await t.engine.recordEvent('toString', { user: { id: 'p', attributes: { hasOwnProperty: 'g' } }, value: 1, attributes: { isPrototypeOf: 'x' } });
    expect(first.total).toBe(1);
    expect(first.achievements.map((a) => a.key)).toEqual(['toLocaleString']);
    expect(first.points.toString).toMatchObject({ total: 3, added: 3 });
    expect(first.points.valueOf).toBeUndefined();
    expect(first.leaderboards.valueOf).toMatchObject({ rank: 1, value: 1, userAttributes: { hasOwnProperty: 'g' } });
    // No inherited members in the response's records either: a board or attribute key that is not there reads undefined.
    expect((first.leaderboards as Record<string, unknown>).toString).toBeUndefined();
    expect((first.leaderboards.valueOf?.userAttributes as Record<string, unknown>).toString).toBeUndefined();
    expect(JSON.parse(JSON.stringify(first.leaderboards))).toEqual({ valueOf: expect.objectContaining({ value: 1 }) });
    expect(first.currentStreak.length).toBe(1);
    const second = await t.engine.recordEvent('toString', { user: { id: 'p' }, value: 1 });
    expect(second.achievements.map((a) => a.key)).toEqual(['valueOf', 'propertyIsEnumerable']);
    expect(second.points.toString).toMatchObject({ total: 106 });
    // hasOwnProperty (the achievement) is not completed just because an object has a method of that name.
    const mine = await t.engine.getUserAchievements('p', { includeIncomplete: true });
    expect(mine.find((a) => a.key === 'hasOwnProperty')).toMatchObject({ achievedAt: null, progress: { current: 0, target: 5 } });
    expect((await t.engine.getUserMetric('p', 'valueOf')).current).toBe(0);
    expect((await t.engine.getUserMetrics('p')).map((m) => [m.key, m.current])).toEqual([['toString', 2], ['valueOf', 0]]);
    expect((await t.engine.getPointsSummary('p', 'toString')).total).toBe(106);
    expect((await t.engine.getLeaderboard('valueOf', { userAttributes: { hasOwnProperty: 'g' } })).rankings).toMatchObject([{ userId: 'p', rank: 1, value: 2 }]);
    await t.engine.recordEvent('valueOf', { user: { id: 'p' }, value: 5 });
    expect((await t.engine.getUserAchievements('p')).map((a) => a.key).sort()).toEqual(['hasOwnProperty', 'propertyIsEnumerable', 'toLocaleString', 'valueOf']);
  });

  it('a state parsed from JSON (plain objects) is read by own keys only', () => {
    const ctx = { now: new Date('2026-01-05T10:00:00Z'), newId: sequentialIds() };
    const { state } = applyEvent(protoConfig, null, { metricKey: 'valueOf', user: { id: 'j' }, value: 1 }, ctx);
    const plain = JSON.parse(JSON.stringify(state)) as UserState;
    const next = applyEvent(protoConfig, plain, { metricKey: 'toString', user: { id: 'j' }, value: 1 }, ctx);
    expect(next.response.total).toBe(1);
    expect(Object.keys(next.state.achievements)).toEqual([]);
    for (const key of PROTO_KEYS) expect(Object.hasOwn(next.state.metrics, key) ? next.state.metrics[key] : undefined).toBe(key === 'toString' ? 1 : key === 'valueOf' ? 1 : undefined);
  });

  it('no key of a state is ever __proto__: trigger ids cannot be, and a stored state\'s are dropped', () => {
    expect(() => defineConfig({ metrics: [{ key: 'm', name: 'M' }], pointsSystems: [{ key: 'p', name: 'P', triggers: [{ key: 'per-m', id: '__proto__', type: 'metric', metricKey: 'm', metricThreshold: 1, points: 1 }] }] })).toThrow(/reserved/);
    const ctx = { now: new Date('2026-01-05T10:00:00Z'), newId: sequentialIds() };
    const { state } = applyEvent(protoConfig, null, { metricKey: 'valueOf', user: { id: 'k' }, value: 1 }, ctx);
    const hostile = JSON.parse(JSON.stringify(state).replace('"metrics":{', '"metrics":{"__proto__":{"polluted":1},')) as UserState;
    expect(Object.hasOwn(hostile.metrics, '__proto__')).toBe(true);
    const next = applyEvent(protoConfig, hostile, { metricKey: 'valueOf', user: { id: 'k' }, value: 1 }, ctx).state;
    expect(Object.hasOwn(next.metrics, '__proto__')).toBe(false);
    expect(Object.getPrototypeOf(next.metrics)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(next.metrics.valueOf).toBe(2);
  });
});

describe('numbers outside the exact range', () => {
  const config = defineConfig({
    metrics: [{ key: 'm', name: 'M' }],
    pointsSystems: [
      { key: 'xp', name: 'XP', triggers: [{ key: 'per-m', type: 'metric', metricKey: 'm', metricThreshold: 1, points: 1_000_000 }] },
      { key: 'big', name: 'Big', triggers: [{ key: 'hourly', type: 'time', timeUnit: 'hour', timeInterval: 1, points: 4_000_000_000_000_000 }] },
    ],
    leaderboards: [{ key: 'b', name: 'B', rankBy: 'metric', metricKey: 'm', start: '2026-01-01' }],
  });

  it('refuses values beyond 2^53 - 1 and non-finite values, recording nothing', async () => {
    const t = setup(config);
    for (const value of [1e308, -1e308, Number.MAX_SAFE_INTEGER + 2, Infinity, NaN]) {
      await expect(t.engine.recordEvent('m', { user: { id: 'n' }, value })).rejects.toMatchObject({ code: 'VALIDATION' });
    }
    expect(t.store.userCount).toBe(0);
  });

  it('refuses an event whose total would leave the exact range; the state is unchanged', async () => {
    const t = setup(config);
    await t.engine.recordEvent('m', { user: { id: 'n' }, value: Number.MAX_SAFE_INTEGER - 1 });
    const before = await t.store.loadUser('n');
    await expect(t.engine.recordEvent('m', { user: { id: 'n' }, value: 5 })).rejects.toMatchObject({ code: 'VALIDATION', issues: [{ path: ['value'] }] });
    expect(await t.store.loadUser('n')).toEqual(before);
    // Decimal sums stay exact while a number carries them (0.1 + 0.2 = 0.3); beyond that the total is the
    // nearest number, as in JavaScript, so binary noise or dust never makes later events fail.
    for (const value of [0.1, 0.2, 2.5, 0.000000001, 123456.789012345]) await t.engine.recordEvent('m', { user: { id: 'g' }, value });
    expect((await t.engine.getUserMetric('g', 'm')).current).toBe(123459.589012346);
    await t.engine.recordEvent('m', { user: { id: 'f' }, value: 0.1 + 0.2 });
    expect((await t.engine.recordEvent('m', { user: { id: 'f' }, value: 0.1 + 0.2 })).total).toBe(0.6000000000000001);
    let total = 0.6000000000000001;
    for (let i = 0; i < 200; i++) total = (await t.engine.recordEvent('m', { user: { id: 'f' }, value: 7 / 60 })).total;
    expect(Math.abs(total - (0.6000000000000001 + 200 * (7 / 60)))).toBeLessThan(1e-9);
    await t.engine.recordEvent('m', { user: { id: 'dust' }, value: 5e-324 });
    expect((await t.engine.recordEvent('m', { user: { id: 'dust' }, value: 1 })).total).toBe(1);
    expect((await t.store.loadUser('f'))?.state.metrics.m).toBe(total);
  });

  it('points never leave the exact range: awards are cut to fit 2^53 - 1 and nothing non-finite is stored', async () => {
    const t = setup(config);
    await t.engine.recordEvent('m', { user: { id: 'p' }, value: 9_100_000_000 });
    const xp = await t.engine.getPointsSummary('p', 'xp');
    expect(xp.total).toBe(Number.MAX_SAFE_INTEGER);
    t.advance(10 * 3_600_000);
    const big = await t.engine.getPointsSummary('p', 'big');
    expect(big.total).toBe(Number.MAX_SAFE_INTEGER);
    await t.engine.accrue('p');
    const state = (await t.store.loadUser('p'))?.state;
    expect(JSON.stringify(state)).not.toMatch(/Infinity|NaN|"total":null/);
    expect(Number.isSafeInteger(state?.points.big?.total)).toBe(true);
  });
});

describe('long breakdown groups', () => {
  it('a group of 1000-character attribute values gets a short, stable index name', async () => {
    const config = defineConfig({ metrics: [{ key: 'm', name: 'M' }], attributes: [{ key: 'team', name: 'Team', type: 'user' }], leaderboards: [{ key: 'b', name: 'B', rankBy: 'metric', metricKey: 'm', start: '2026-01-01', breakdownAttributes: ['team'] }] });
    const t = setup(config);
    const team = '用'.repeat(1000);
    const res = await t.engine.recordEvent('m', { user: { id: 'u', attributes: { team } }, value: 1 });
    expect(res.leaderboards.b).toMatchObject({ rank: 1, userAttributes: { team } });
    expect((await t.engine.getLeaderboard('b', { userAttributes: { team } })).rankings).toMatchObject([{ userId: 'u', rank: 1 }]);
    expect(boardIndex('b', '2026-01-01', `["${team}"]`)).toMatch(/^lb\|b\|2026-01-01\|#[0-9a-f-]{36}$/);
  });
});

describe('linear composite settling', () => {
  it('a 12 000-deep composite chain compiles and settles in linear time without a stack overflow', async () => {
    const n = 12_000;
    const achievements = [
      { key: 'a0', name: 'A0', trigger: 'metric' as const, metricKey: 'm', metricValue: 1 },
      // Declared in reverse dependency order: the worst case for a settle-until-nothing-changes loop.
      ...Array.from({ length: n }, (_, i) => ({ key: `a${n - i}`, name: `A${n - i}`, trigger: 'achievement' as const, achievementKeys: [`a${n - i - 1}`] })),
    ];
    const started = performance.now();
    const config = defineConfig({ metrics: [{ key: 'm', name: 'M' }], achievements });
    const t = setup(config);
    const res = await t.engine.recordEvent('m', { user: { id: 'c' }, value: 1 });
    expect(res.achievements).toHaveLength(n + 1);
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it('a cycle in a long chain is still reported with its path', () => {
    const n = 5_000;
    const achievements = Array.from({ length: n }, (_, i) => ({ key: `c${i}`, name: `C${i}`, trigger: 'achievement' as const, achievementKeys: [`c${(i + 1) % n}`] }));
    expect(() => defineConfig({ metrics: [{ key: 'm', name: 'M' }], achievements })).toThrow(/prerequisite cycle: c0 -> c1/);
  });
});

describe('attribute-gated achievements', () => {
  const config = defineConfig({
    metrics: [{ key: 'lessons', name: 'Lessons' }, { key: 'cards', name: 'Cards' }],
    attributes: [{ key: 'plan', name: 'Plan', type: 'user' }],
    achievements: [
      { key: 'pro-5', name: 'Pro five', trigger: 'metric', metricKey: 'lessons', metricValue: 5, userAttributes: { plan: 'pro' } },
      { key: 'done', name: 'Done', trigger: 'achievement', achievementKeys: ['pro-5'] },
    ],
    pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'pro-5', type: 'achievement', achievementKey: 'pro-5', points: 50 }] }],
  });

  it('unlock as soon as the user gains the attribute, by identify, update, an event on another metric or accrue', async () => {
    for (const how of ['identify', 'update', 'other-event', 'accrue-after-direct-state'] as const) {
      const t = setup(config);
      await t.engine.recordEvent('lessons', { user: { id: 'g' }, value: 5 });
      expect(await t.engine.getUserAchievements('g')).toEqual([]);
      if (how === 'identify') await t.engine.identifyUser({ id: 'g', attributes: { plan: 'pro' } });
      else if (how === 'update') await t.engine.updateUser('g', { attributes: { plan: 'pro' } });
      else if (how === 'other-event') await t.engine.recordEvent('cards', { user: { id: 'g', attributes: { plan: 'pro' } }, value: 1 });
      else {
        await t.engine.updateUser('g', { attributes: { plan: 'pro' } });
        await t.engine.accrue('g');
      }
      expect((await t.engine.getUserAchievements('g')).map((a) => a.key)).toEqual(['pro-5', 'done']);
      expect((await t.engine.getPointsSummary('g', 'xp')).total).toBe(50);
    }
  });
});

describe('every public function throws only LaurelErrors for bad input', () => {
  const config = defineConfig({
    metrics: [{ key: 'm', name: 'M' }],
    attributes: [{ key: 'city', name: 'City', type: 'user' }],
    achievements: [{ key: 'api', name: 'API', trigger: 'api' }],
    streak: { frequency: 'daily' },
    pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'per-m', type: 'metric', metricKey: 'm', metricThreshold: 1, points: 1 }] }],
    leaderboards: [{ key: 'b', name: 'B', rankBy: 'metric', metricKey: 'm', start: '2026-01-01', breakdownAttributes: ['city'] }],
  });
  const ctx = { now: new Date('2026-01-05T10:00:00Z'), newId: sequentialIds() };

  it('undefined prior means a new user; bad contexts, configs and priors are ValidationErrors', () => {
    expect(applyEvent(config, undefined, { metricKey: 'm', user: { id: 'u' }, value: 1 }, ctx).response.total).toBe(1);
    expect(applyIdentify(config, undefined, { id: 'u' }, ctx).state.user.id).toBe('u');
    const bad: [string, () => unknown][] = [
      ['no context', () => applyEvent(config, null, { metricKey: 'm', user: { id: 'u' }, value: 1 }, undefined as never)],
      ['invalid date', () => applyEvent(config, null, { metricKey: 'm', user: { id: 'u' }, value: 1 }, { now: new Date('nope'), newId: ctx.newId })],
      ['year 50', () => applyEvent(config, null, { metricKey: 'm', user: { id: 'u' }, value: 1 }, { now: new Date('0050-01-01T00:00:00Z'), newId: ctx.newId })],
      ['no newId', () => applyEvent(config, null, { metricKey: 'm', user: { id: 'u' }, value: 1 }, { now: ctx.now } as never)],
      ['not a config', () => applyEvent({} as never, null, { metricKey: 'm', user: { id: 'u' }, value: 1 }, ctx)],
      ['null event', () => applyEvent(config, null, null as never, ctx)],
      ['garbage prior', () => applyEvent(config, { user: 5 } as never, { metricKey: 'm', user: { id: 'u' }, value: 1 }, ctx)],
      ['prior with an unknown zone', () => applyEvent(config, { user: { id: 'u', tz: 'Not/AZone', created: '2026-01-01T00:00:00.000Z', updated: '2026-01-01T00:00:00.000Z' } } as never, { metricKey: 'm', user: { id: 'u' }, value: 1 }, ctx)],
      ['prior with a garbage creation instant', () => applyEvent(config, { user: { id: 'u', created: 'garbage', updated: 'x' } } as never, { metricKey: 'm', user: { id: 'u' }, value: 1 }, ctx)],
      ['prior metrics not strings', () => applyEvent(config, { user: { id: 'u', created: 'x', updated: 'x' }, metrics: { m: 5 } } as never, { metricKey: 'm', user: { id: 'u' }, value: 1 }, ctx)],
      ['accrue without prior', () => applyAccrue(config, undefined as never, ctx)],
      ['view without state', () => viewState(config, null as never, ctx)],
      ['completion of unknown', () => applyCompletion(config, null, null as never, { id: 'u' }, ctx)],
      ['replay of unknown metric', () => replayResponse(config, applyIdentify(config, null, { id: 'u' }, ctx).state, 'nope', 'e', 'k', ctx)],
    ];
    for (const [name, run] of bad) {
      let thrown: unknown = null;
      try {
        run();
      } catch (e) {
        thrown = e;
      }
      expect(isLaurelError(thrown), `${name}: ${String(thrown)}`).toBe(true);
    }
  });

  it('engine calls with fuzzed arguments reject only with LaurelErrors and never corrupt state', async () => {
    let clockValue: unknown = new Date('2026-01-05T10:00:00Z');
    const store = createMemoryStore();
    const engine = createEngine({ config, store, clock: () => clockValue as Date, newId: sequentialIds() });
    await engine.recordEvent('m', { user: { id: 'known', attributes: { city: 'x' } }, value: 3 });
    const before = await store.loadUser('known');
    const junk = fc.oneof(
      fc.anything(),
      fc.constantFrom(null, undefined, '', 'known', 'm', 'xp', 'b', 'api', '\u0000', '\uD800', 'a\uDC00b', 'toString', '__proto__', { id: 'known' }, { user: { id: 'x\u0000' }, value: 1 }, { user: { id: 'known' }, value: 1e308 }, { id: '\uD83D' }, { run: '0050-01-01' }, { userAttributes: { nope: '1' } }, { limit: -1 }, [], new Date('x')),
    );
    const methods = Object.keys(engine).filter((k) => typeof (engine as Record<string, unknown>)[k] === 'function');
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...methods), fc.array(junk, { maxLength: 4 }), fc.constantFrom<unknown>(new Date('2026-01-05T12:00:00Z'), new Date('bad'), new Date('0001-01-01T00:00:00Z'), 'not a date'), async (method, args, clock) => {
        clockValue = clock;
        try {
          await (engine as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[method]?.(...args);
        } catch (e) {
          expect(isLaurelError(e), `${method}(${args.map((a) => { try { return JSON.stringify(a); } catch { return String(a); } }).join(', ')}) threw ${String(e)}`).toBe(true);
        }
      }),
      { numRuns: 1500 },
    );
    const after = await store.loadUser('known');
    // Only well-formed calls for "known" may have changed it (deleteUser and resetUser may have erased it or
    // its progress); any metric total it has stays a finite number.
    if (after?.state.metrics.m !== undefined) expect(typeof after.state.metrics.m).toBe('number');
    if (after) expect(Number.isFinite(Number(after.state.metrics.m ?? 0))).toBe(true);
    expect(before?.state.user.id).toBe('known');
  }, 60_000);

  it('the other public functions throw only LaurelErrors for junk arguments', () => {
    const fns: [string, (...a: unknown[]) => unknown][] = [
      ['defineConfig', defineConfig as never],
      ['decimalOf', decimalOf as never],
      ['addDecimal', addDecimal as never],
      ['compareDecimal', compareDecimal as never],
      ['createMemoryStore', createMemoryStore as never],
      ['createEngine', createEngine as never],
      ['createHttpHandler', (o: unknown) => createHttpHandler(createEngine({ config }), o as never)],
    ];
    const junk = fc.oneof(fc.anything(), fc.constantFrom('1e999999999', '1e-999999', '-', '', 'NaN', Infinity, -0, 1e308, null, undefined, { apiKeys: 5 }, { config: {} }));
    fc.assert(
      fc.property(fc.constantFrom(...fns), fc.array(junk, { maxLength: 3 }), ([name, fn], args) => {
        try {
          fn(...args);
        } catch (e) {
          expect(isLaurelError(e), `${name} threw ${String(e)}`).toBe(true);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('NUL characters and lone surrogates are refused everywhere, up front', async () => {
    const t = setup(config);
    const bad = ['a\u0000b', '\uD800', 'x\uDFFFy', '\uDBFF'];
    for (const s of bad) {
      await expect(t.engine.recordEvent('m', { user: { id: s }, value: 1 })).rejects.toMatchObject({ code: 'VALIDATION' });
      await expect(t.engine.recordEvent('m', { user: { id: 'ok', name: s }, value: 1 })).rejects.toMatchObject({ code: 'VALIDATION' });
      await expect(t.engine.recordEvent('m', { user: { id: 'ok', attributes: { city: s } }, value: 1 })).rejects.toMatchObject({ code: 'VALIDATION' });
      await expect(t.engine.recordEvent('m', { user: { id: 'ok' }, value: 1 }, { idempotencyKey: s })).rejects.toMatchObject({ code: 'VALIDATION' });
      await expect(t.engine.getUser(s)).rejects.toMatchObject({ code: 'VALIDATION' });
      await expect(t.engine.getLeaderboard('b', { userId: s })).rejects.toMatchObject({ code: 'VALIDATION' });
      expect(() => defineConfig({ metrics: [{ key: 'm', name: s }] })).toThrow(/well-formed text/);
    }
    expect(t.store.userCount).toBe(0);
    // Well-formed astral characters are fine.
    await expect(t.engine.recordEvent('m', { user: { id: '🙂' }, value: 1 }, { idempotencyKey: '🙂' })).resolves.toMatchObject({ total: 1 });
  });
});

describe('HTTP: bodies over the node adapter cap get a readable 413', () => {
  const config = defineConfig({ metrics: [{ key: 'm', name: 'M' }] });
  const engine = createEngine({ config });
  let server: http.Server;
  let port = 0;
  beforeAll(async () => {
    server = http.createServer(toNodeListener(createHttpHandler(engine, { apiKeys: ['k'] })));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  /** Sends `size` bytes of body in 64 KiB chunks (with or without Content-Length) and reads the status. */
  function send(size: number, withLength: boolean): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const headers: Record<string, string | number> = { 'x-api-key': 'k', 'content-type': 'application/json' };
      if (withLength) headers['content-length'] = size;
      const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/metrics/m/event', headers, agent: false }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      const chunk = Buffer.alloc(65_536, 0x20);
      let sent = 0;
      const pump = () => {
        while (sent < size) {
          const n = Math.min(chunk.length, size - sent);
          sent += n;
          if (!req.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return void req.once('drain', pump);
        }
        req.end();
      };
      pump();
    });
  }

  it('with and without Content-Length, at 2 MiB and 16 MiB', async () => {
    for (const size of [2 * 1_048_576, 16 * 1_048_576]) {
      for (const withLength of [true, false]) {
        const res = await send(size, withLength);
        expect(res.status, `${size} bytes, content-length ${withLength}`).toBe(413);
        expect(JSON.parse(res.body)).toMatchObject({ error: expect.stringMatching(/exceeds/) });
      }
    }
  });

  it('a raw client that writes its whole body before reading still reads the 413', async () => {
    const size = 4 * 1_048_576;
    const reply = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1');
      let data = '';
      socket.setEncoding('latin1');
      socket.on('data', (c: string) => (data += c));
      socket.on('error', reject);
      socket.on('end', () => resolve(data));
      socket.write(`POST /v1/metrics/m/event HTTP/1.1\r\nHost: x\r\nx-api-key: k\r\ncontent-type: application/json\r\ncontent-length: ${size}\r\nconnection: close\r\n\r\n`);
      socket.end(Buffer.alloc(size, 0x20));
    });
    expect(reply).toMatch(/^HTTP\/1\.1 413/);
  });
});

describe('zone names: canonical, and no spelling grows memory', () => {
  const config = defineConfig({ timeZone: 'europe/PARIS', metrics: [{ key: 'm', name: 'M' }], attributes: [{ key: 'city', name: 'City', type: 'user' }] });

  it('zones are matched in any letter case and stored by their canonical name', async () => {
    expect(config.timeZone).toBe('Europe/Paris');
    const t = setup(config);
    await t.engine.recordEvent('m', { user: { id: 'z', tz: 'america/santiago' }, value: 1 });
    expect((await t.engine.getUser('z')).tz).toBe('America/Santiago');
    const before = await t.engine.getUser('z');
    t.advance(60_000);
    await t.engine.identifyUser({ id: 'z', tz: 'AMERICA/SANTIAGO' });
    // Another spelling of the same zone is no change: `updated` stays.
    expect(await t.engine.getUser('z')).toEqual(before);
  });

  it('20 000 failing engine and HTTP calls with distinct zone spellings grow the heap by less than 20 MB', async () => {
    const g = (globalThis as { gc?: () => void }).gc ?? (v8.setFlagsFromString('--expose-gc'), vm.runInNewContext('gc') as () => void);
    const t = setup(config);
    const handler = createHttpHandler(t.engine, { apiKeys: ['k'] });
    const bases = ['America/Argentina/ComodRivadavia', 'Europe/Paris', 'America/Los_Angeles', 'Australia/Lord_Howe', 'America/Indiana/Indianapolis'];
    let n = 0;
    const spelling = () => {
      const base = bases[n % bases.length] as string;
      const bits = Math.floor(n++ / bases.length);
      let out = '';
      let i = 0;
      for (const ch of base) out += (bits >> i++ % 24) & 1 ? ch.toUpperCase() : ch.toLowerCase();
      return out;
    };
    // Outcomes are counted, not asserted one by one: each `expect` keeps a little state in vitest.
    const outcomes = new Map<string, number>();
    const count = (what: string) => outcomes.set(what, (outcomes.get(what) ?? 0) + 1);
    const fail = async (i: number) => {
      const tz = spelling();
      // Each call validates (and canonicalises) the zone, then fails: an undeclared attribute, or an HTTP 400.
      if (i % 2 === 0) {
        try {
          await t.engine.recordEvent('m', { user: { id: `u${i}`, tz, attributes: { nope: 'x' } as never }, value: 1 });
          count('succeeded');
        } catch (e) {
          count(isLaurelError(e) ? e.code : 'untyped');
        }
      } else {
        const res = await handler(new Request('http://x/v1/metrics/m/event', { method: 'POST', headers: { 'x-api-key': 'k', 'content-type': 'application/json' }, body: JSON.stringify({ user: { id: `u${i}`, tz, attributes: { nope: 'x' } }, value: 1 }) }));
        await res.text();
        count(`http ${res.status}`);
      }
    };
    for (let i = 0; i < 2_000; i++) await fail(i);
    g();
    g();
    const before = process.memoryUsage();
    for (let i = 0; i < 20_000; i++) await fail(i);
    g();
    g();
    const after = process.memoryUsage();
    const MB = 1024 * 1024;
    const growth = `heap +${((after.heapUsed - before.heapUsed) / MB).toFixed(1)} MB, rss +${((after.rss - before.rss) / MB).toFixed(1)} MB`;
    expect(after.heapUsed - before.heapUsed, growth).toBeLessThan(20 * MB);
    expect(after.rss - before.rss, growth).toBeLessThan(64 * MB);
    expect(t.store.userCount).toBe(0);
    expect(Object.fromEntries(outcomes)).toEqual({ INVALID_ATTRIBUTE_KEYS: 11_000, 'http 400': 11_000 });
  }, 60_000);
});

describe('review findings', () => {
  const config = defineConfig({
    metrics: [{ key: 'm', name: 'M' }],
    attributes: [{ key: 'plan', name: 'Plan', type: 'user' }],
    achievements: [{ key: 'pro', name: 'Pro', trigger: 'metric', metricKey: 'm', metricValue: 1, userAttributes: { plan: 'pro' } }],
    leaderboards: [
      { key: 'a', name: 'A', rankBy: 'metric', metricKey: 'm', start: '2026-01-01' },
      { key: 'b', name: 'B', rankBy: 'metric', metricKey: 'm', start: '2026-01-01', runUnit: 'month' },
      { key: 'c', name: 'C', rankBy: 'metric', metricKey: 'm', start: '2026-01-01', runUnit: 'year' },
    ],
  });

  it('a rank index that fails after the commit, with an onError that throws, still gives success once, after one index call', async () => {
    const store = createMemoryStore();
    let calls = 0;
    const down = async () => {
      calls++;
      await new Promise((r) => setTimeout(r, 20));
      throw new StorageUnavailableError('index down');
    };
    const index = { apply: down, getEntry: down, readRange: down, countEntries: down, readRankHistory: down, scanUsers: down } as unknown as RankIndex;
    const degraded: unknown[] = [];
    const engine = createEngine({ config, store: withRankIndex(store, index, { onError: () => { throw new Error('logger failed'); } }), onDegraded: (e) => degraded.push(e) });
    const res = await engine.recordEvent('m', { user: { id: 'u' }, value: 1 });
    expect(Object.values(res.leaderboards).map((b) => b.rank)).toEqual([null, null, null]);
    expect(calls).toBe(1);
    expect((await store.loadUser('u'))?.state.metrics.m).toBe(1);
    calls = 0;
    const sim = await engine.simulateEvent('m', { user: { id: 'u' }, value: 1 });
    expect(Object.values(sim.leaderboards).map((b) => b.rank)).toEqual([null, null, null]);
    expect(calls).toBe(1);
    expect(degraded).toHaveLength(1);
  });

  it('a rank read that fails after the commit with any error (a custom store\'s CONFLICT, a TypeError) degrades: recorded once, never retried, never reported failed', async () => {
    const full = defineConfig({ metrics: [{ key: 'm', name: 'M' }], leaderboards: [{ key: 'a', name: 'A', rankBy: 'metric', metricKey: 'm', start: '2026-01-01', maxParticipants: 2 }] });
    for (const thrown of [new ConflictError('read conflict'), new TypeError('bug in a custom store')]) {
      const inner = createMemoryStore();
      // A custom store that reports no thresholds in its commits (so the engine reads them) and whose reads fail.
      const strip = (r: CommitResult): CommitResult => ({ ...r, ranks: r.ranks.map(({ threshold: _t, ...c }) => c) });
      const store: Store = {
        ...inner,
        loadForEvents: (inner.loadForEvents as NonNullable<Store['loadForEvents']>).bind(inner),
        commit: async (c) => strip(await inner.commit(c)),
        commitBatch: async (cs) => (await (inner.commitBatch as NonNullable<Store['commitBatch']>)(cs)).map((r) => (r instanceof Error ? r : strip(r))),
        readRange: async () => {
          throw thrown;
        },
      };
      const degraded: unknown[] = [];
      const engine = createEngine({ config: full, store, newId: sequentialIds(), retry: { attempts: 3, baseDelayMs: 0 }, onDegraded: (e) => degraded.push(e) });
      const one = await engine.recordEvent('m', { user: { id: 'a' }, value: 1 });
      expect(one.leaderboards.a).toMatchObject({ rank: null, previousRank: null });
      expect((await inner.loadUser('a'))?.state.metrics.m).toBe(1);
      const batch = await engine.recordEvents([
        { metricKey: 'm', user: { id: 'a' }, value: 1 },
        { metricKey: 'm', user: { id: 'b' }, value: 2 },
      ]);
      expect(batch.map((r) => (r.ok ? r.response.total : r.error.code))).toEqual([2, 2]);
      expect([(await inner.loadUser('a'))?.state.metrics.m, (await inner.loadUser('b'))?.state.metrics.m]).toEqual([2, 2]);
      expect(degraded.length).toBeGreaterThanOrEqual(2);
      expect(degraded.every((e) => isLaurelError(e))).toBe(true);
    }
  });

  it('accrue saves achievements it unlocks', async () => {
    const t = setup(config);
    await t.engine.recordEvent('m', { user: { id: 'g' }, value: 1 });
    await t.store.commit({ ...(await (async () => { const l = await t.store.loadUser('g'); const state = structuredClone(l!.state); state.user.attributes = { plan: 'pro' }; return { userId: 'g', expectedVersion: l!.version, state }; })()), ledger: [], leaderboard: [], counters: {}, idempotency: null });
    await t.engine.accrue('g');
    expect((await t.store.loadUser('g'))?.state.achievements.pro).toBeDefined();
    expect((await t.engine.listAchievements())[0]?.completions).toBe(1);
  });

  it('dates at the end of the range stay bounded: summaries and runs near 8999-12-31, 9999 refused', async () => {
    const t = setup(config, '8999-12-20T00:00:00Z');
    const res = await t.engine.recordEvent('m', { user: { id: 'late' }, value: 1 });
    expect(res.leaderboards.b?.start).toBe('8999-12-01');
    expect(res.leaderboards.c?.start).toBe('8999-01-01');
    const started = performance.now();
    expect(await t.engine.getMetricEventSummary('late', 'm', { aggregation: 'monthly', startDate: '8999-01-01', endDate: '8999-12-31' })).toHaveLength(12);
    expect(await t.engine.getMetricEventSummary('late', 'm', { aggregation: 'weekly', startDate: '8999-12-01', endDate: '8999-12-31' })).toHaveLength(6);
    expect(performance.now() - started).toBeLessThan(1000);
    await expect(t.engine.getMetricEventSummary('late', 'm', { aggregation: 'daily', startDate: '9999-12-01', endDate: '9999-12-31' })).rejects.toMatchObject({ code: 'VALIDATION' });
    await expect(t.engine.getLeaderboard('b', { run: '9999-12-31' })).rejects.toMatchObject({ code: 'VALIDATION' });
    expect(() => defineConfig({ metrics: [{ key: 'm', name: 'M' }], leaderboards: [{ key: 'x', name: 'X', rankBy: 'metric', metricKey: 'm', start: '2026-01-01', runUnit: 'year', runInterval: 5000 }] })).toThrow(/runInterval/);
  });

  it('an id source that returns something no store can key is a typed error, on every store alike', async () => {
    for (const bad of [42, '', 'a\u0000b', 'x'.repeat(256)]) {
      const engine = createEngine({ config, newId: () => bad as string });
      await expect(engine.recordEvent('m', { user: { id: 'u' }, value: 1 })).rejects.toMatchObject({ code: 'VALIDATION' });
    }
  });
});
