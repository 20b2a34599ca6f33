/**
 * Issue 13, runtime boosts (docs/rules.md section 12): createBoost, deleteBoost, listBoosts and getUserBoosts
 * on the memory store and PostgreSQL: a user's boost multiplies that user's awards only, within its dates,
 * with its rounding; statuses; idempotency; replay; erasure and reset; validation.
 */
import { describe, expect, it } from 'vitest';
import { defineConfig, type CreateBoostResult } from '../src/index.js';
import { createHttpHandler } from '../src/http.js';
import { HOUR } from './helpers.js';
import { onEachStore, setupOn } from './stores.js';

const config = defineConfig({
  attributes: [{ key: 'plan', name: 'Plan', type: 'user' }],
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  pointsSystems: [
    {
      key: 'xp',
      name: 'XP',
      triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 5 }],
      boosts: [
        { key: 'pro', name: 'Pro', multiplier: 2, start: '2026-01-01', userAttributes: { plan: 'pro' } },
        { key: 'old', name: 'Old', multiplier: 3, start: '2025-01-01', end: '2025-01-31' },
      ],
    },
    { key: 'energy', name: 'Energy', triggers: [{ key: 'hourly', type: 'time', timeUnit: 'hour', timeInterval: 1, points: 1 }] },
  ],
});

const boost = (userId: string, extra: Partial<Parameters<ReturnType<typeof engineOf>['createBoost']>[0]> = {}) => ({
  pointsSystemKey: 'xp' as const,
  userId,
  name: 'Welcome back',
  start: '2026-03-02',
  end: '2026-03-03',
  multiplier: 1.5,
  ...extra,
});
const engineOf = (t: Awaited<ReturnType<typeof setupOn<typeof config>>>) => t.engine;

onEachStore('runtime boosts', (kind) => {
  it("a user's boost multiplies that user's awards only, within its dates, with its rounding", async () => {
    const t = await setupOn(kind, config, '2026-03-01T09:00:00Z');
    await t.engine.identifyUser({ id: 'u1' });
    await t.engine.identifyUser({ id: 'u2' });
    const created: CreateBoostResult = await t.engine.createBoost(boost('u1', { rounding: 'up' }));
    expect(created.boost).toMatchObject({ userId: 'u1', pointsSystemKey: 'xp', name: 'Welcome back', start: '2026-03-02', end: '2026-03-03', multiplier: 1.5, rounding: 'up' });
    // Before its start: not applied.
    expect((await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1 })).points.xp?.added).toBe(5);
    t.set('2026-03-02T09:00:00Z');
    const boosted = await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
    // 5 x 1.5 = 7.5, rounded up.
    expect(boosted.points.xp?.awards).toMatchObject([{ awarded: 8, boosts: [{ id: created.boost.id, key: created.boost.id, name: 'Welcome back', multiplier: 1.5 }] }]);
    // Another user: not boosted.
    expect((await t.engine.recordEvent('lessons', { user: { id: 'u2' }, value: 1 })).points.xp?.awards[0]?.boosts).toBeUndefined();
    // Stacked with a configured boost the user is eligible for: configured first, multiplied, rounded once by
    // the first boost's rounding (down).
    await t.engine.updateUser('u1', { attributes: { plan: 'pro' } });
    const stacked = await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
    expect(stacked.points.xp?.awards).toMatchObject([{ awarded: 15, boosts: [{ key: 'pro' }, { key: created.boost.id }] }]);
    // After its end: not applied.
    t.set('2026-03-04T09:00:00Z');
    expect((await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1 })).points.xp?.awards[0]?.boosts).toEqual([{ id: expect.any(String), key: 'pro', name: 'Pro', multiplier: 2 }]);
    expect((await t.engine.getPointsSummary('u1', 'xp')).total).toBe(5 + 8 + 15 + 10);
    await t.engine.accrue('u1');
    await t.engine.accrue('u2');
    const report = await t.engine.replay({ policy: 'retroactive', dryRun: true, users: ['u1', 'u2'] });
    expect(report.diffs.filter((d) => d.changed)).toEqual([]);
  });

  it('boosts time grants one by one when the user has a boost (no batched run across it)', async () => {
    const t = await setupOn(kind, config, '2026-03-02T00:00:00Z');
    await t.engine.identifyUser({ id: 'u1', tz: 'UTC' });
    await t.engine.createBoost({ pointsSystemKey: 'energy', userId: 'u1', name: 'Double', start: '2026-03-02', end: '2026-03-02', multiplier: 2 });
    t.set('2026-03-04T00:00:00Z');
    // 23 grants on 2 March (01:00 to 23:00) doubled, 25 from 3 March 00:00 to 4 March 00:00.
    expect((await t.engine.getPointsSummary('u1', 'energy')).total).toBe(23 * 2 + 25);
    await t.engine.accrue('u1');
    const report = await t.engine.replay({ policy: 'retroactive', dryRun: true, users: ['u1'] });
    expect(report.diffs.filter((d) => d.changed)).toEqual([]);
  });

  it('listBoosts shows configured and runtime boosts with their status; getUserBoosts the active ones applying to the user', async () => {
    const t = await setupOn(kind, config, '2026-03-02T09:00:00Z');
    await t.engine.identifyUser({ id: 'u1', attributes: { plan: 'pro' } });
    await t.engine.identifyUser({ id: 'u2' });
    const active = (await t.engine.createBoost(boost('u1'))).boost;
    const scheduled = (await t.engine.createBoost(boost('u1', { name: 'Later', start: '2026-04-01', end: null }))).boost;
    const other = (await t.engine.createBoost(boost('u2', { multiplier: 3, rounding: 'nearest' }))).boost;
    const list = await t.engine.listBoosts('xp');
    expect(list.map((b) => [b.name, b.status, b.userId])).toEqual([
      ['Pro', 'active', null],
      ...[active, scheduled, other].sort((a, b) => (a.id < b.id ? -1 : 1)).map((b) => [b.name, b.id === scheduled.id ? 'scheduled' : 'active', b.userId]),
    ]);
    expect(list.find((b) => b.id === other.id)).toEqual({ id: other.id, name: 'Welcome back', status: 'active', start: '2026-03-02', end: '2026-03-03', multiplier: 3, rounding: 'nearest', userId: 'u2' });
    expect((await t.engine.listBoosts('xp', { includeFinished: true })).map((b) => b.name)).toContain('Old');
    expect(await t.engine.listBoosts('energy')).toEqual([]);
    expect((await t.engine.getUserBoosts('u1', 'xp')).map((b) => [b.name, b.status])).toEqual([
      ['Pro', 'active'],
      ['Welcome back', 'active'],
    ]);
    expect((await t.engine.getUserBoosts('u2', 'xp')).map((b) => b.id)).toEqual([other.id]);
    // Finished: listed only with includeFinished; no longer the user's.
    t.set('2026-03-05T09:00:00Z');
    expect((await t.engine.listBoosts('xp')).map((b) => b.id)).not.toContain(active.id);
    expect((await t.engine.listBoosts('xp', { includeFinished: true })).find((b) => b.id === active.id)?.status).toBe('finished');
    expect((await t.engine.getUserBoosts('u1', 'xp')).map((b) => b.name)).toEqual(['Pro']);
    await expect(t.engine.getUserBoosts('nobody', 'xp')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(t.engine.listBoosts('gems' as 'xp')).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('deleteBoost removes the boost from the user and from every list; unknown ids are NOT_FOUND', async () => {
    const t = await setupOn(kind, config, '2026-03-02T09:00:00Z');
    await t.engine.identifyUser({ id: 'u1' });
    const { boost: b } = await t.engine.createBoost(boost('u1', { multiplier: 2 }));
    expect(await t.engine.deleteBoost(b.id)).toMatchObject({ id: b.id });
    expect(await t.engine.listBoosts('xp', { includeFinished: true })).toEqual(expect.not.arrayContaining([expect.objectContaining({ id: b.id })]));
    expect(await t.engine.getUserBoosts('u1', 'xp')).toEqual([]);
    expect((await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1 })).points.xp?.added).toBe(5);
    await expect(t.engine.deleteBoost(b.id)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(t.engine.deleteBoost('nope')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    const report = await t.engine.replay({ policy: 'retroactive', dryRun: true, users: ['u1'] });
    expect(report.diffs.filter((d) => d.changed)).toEqual([]);
  });

  it('createBoost is idempotent with a key', async () => {
    const t = await setupOn(kind, config, '2026-03-02T09:00:00Z');
    await t.engine.identifyUser({ id: 'u1' });
    const first = await t.engine.createBoost(boost('u1'), { idempotencyKey: 'k1' });
    const again = await t.engine.createBoost(boost('u1'), { idempotencyKey: 'k1' });
    expect(first.idempotentReplayed).toBe(false);
    expect(again).toMatchObject({ idempotentReplayed: true, boost: first.boost });
    expect((await t.engine.listBoosts('xp')).filter((b) => b.userId === 'u1')).toHaveLength(1);
  });

  it('deleteUser removes the user\'s boosts from every read; resetUser removes them too', async () => {
    const t = await setupOn(kind, config, '2026-03-02T09:00:00Z');
    await t.engine.identifyUser({ id: 'u1' });
    await t.engine.identifyUser({ id: 'u2' });
    await t.engine.identifyUser({ id: 'u3' });
    const b1 = (await t.engine.createBoost(boost('u1'))).boost;
    const b2 = (await t.engine.createBoost(boost('u2'))).boost;
    const b3 = (await t.engine.createBoost(boost('u3'))).boost;
    await t.engine.deleteUser('u1');
    await t.engine.resetUser('u3');
    expect((await t.engine.listBoosts('xp', { includeFinished: true })).filter((b) => b.userId !== null).map((b) => b.id)).toEqual([b2.id]);
    expect(await t.store.getBoost(b1.id)).toBeNull();
    expect(await t.store.getBoost(b3.id)).toBeNull();
    await expect(t.engine.deleteBoost(b1.id)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(await t.engine.getUserBoosts('u3', 'xp')).toEqual([]);
    expect((await t.engine.recordEvent('lessons', { user: { id: 'u3' }, value: 1 })).points.xp?.added).toBe(5);
    // A new user under the erased id has no boosts.
    await t.engine.identifyUser({ id: 'u1' });
    expect(await t.engine.getUserBoosts('u1', 'xp')).toEqual([]);
  });

  it('refuses bad input, changing nothing', async () => {
    const t = await setupOn(kind, config, '2026-03-02T09:00:00Z');
    await t.engine.identifyUser({ id: 'u1' });
    await expect(t.engine.createBoost(boost('u1', { pointsSystemKey: 'gems' as 'xp' }))).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(t.engine.createBoost(boost('nobody'))).rejects.toMatchObject({ code: 'NOT_FOUND' });
    for (const bad of [{ end: '2026-03-01' }, { start: '2026-02-30' }, { end: 'soon' }, { multiplier: 0 }, { multiplier: -2 }, { multiplier: 1 }, { multiplier: 100 }, { multiplier: Number.NaN }, { name: '' }, { name: 'x'.repeat(256) }, { rounding: 'sideways' as 'up' }]) {
      await expect(t.engine.createBoost(boost('u1', bad)), JSON.stringify(bad)).rejects.toMatchObject({ code: 'VALIDATION' });
    }
    await expect(t.engine.runOperations('u1', [{ op: 'createBoost', system: 'xp', name: 'n', start: '2026-03-02', multiplier: 2, id: 'mine' }])).rejects.toMatchObject({ code: 'VALIDATION' });
    await expect(t.engine.deleteBoost('')).rejects.toMatchObject({ code: 'VALIDATION' });
    expect(await t.engine.listBoosts('xp')).toEqual([expect.objectContaining({ name: 'Pro' })]);
    // At most 20 scheduled or active boosts per user and system; finished ones do not count.
    for (let i = 0; i < 20; i++) await t.engine.createBoost(boost('u1', { start: '2026-03-02', end: '2026-03-02' }));
    await expect(t.engine.createBoost(boost('u1'))).rejects.toMatchObject({ code: 'VALIDATION' });
    t.advance(48 * HOUR);
    await t.engine.createBoost(boost('u1', { start: '2026-03-04', end: null }));
    const stored = (await t.store.loadUser('u1'))?.state.boosts ?? [];
    expect(stored).toHaveLength(1);
  });
});

describe('runtime boosts over HTTP', () => {
  it('GET /points/{key}/boosts and GET /users/{id}/points/{key}/boosts answer the hosted service\'s PointsBoost lists', async () => {
    const t = await setupOn('memory', config, '2026-03-02T09:00:00Z');
    const handler = createHttpHandler(t.engine, { apiKeys: ['k'] });
    const get = async (path: string) => {
      const res = await handler(new Request(`http://laurel.test/v1${path}`, { headers: { 'x-api-key': 'k' } }));
      return { status: res.status, body: (await res.json()) as unknown };
    };
    await t.engine.identifyUser({ id: 'u1' });
    const { boost: b } = await t.engine.createBoost(boost('u1', { multiplier: 2 }));
    const mine = { id: b.id, name: 'Welcome back', status: 'active', start: '2026-03-02', end: '2026-03-03', multiplier: 2, rounding: 'down' };
    expect(await get('/points/xp/boosts')).toEqual({ status: 200, body: [{ id: expect.any(String), name: 'Pro', status: 'active', start: '2026-01-01', end: null, multiplier: 2, rounding: 'down' }, mine] });
    expect(((await get('/points/xp/boosts?includeFinished=true')).body as { name: string }[]).map((x) => x.name)).toEqual(['Pro', 'Old', 'Welcome back']);
    expect(await get('/users/u1/points/xp/boosts')).toEqual({ status: 200, body: [mine] });
    expect((await get('/users/nobody/points/xp/boosts')).status).toBe(404);
    expect((await get('/points/nope/boosts')).status).toBe(404);
  });
});
