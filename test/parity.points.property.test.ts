/**
 * Issue 14, points, as properties (docs/rules.md section 6): for random users, attributes and totals, the
 * histogram (unfiltered and filtered by one or two attributes) equals a naive recomputation from every
 * user's state; and an attribute-filtered time trigger pays exactly the grants that fell due while the user
 * had the attribute. Many runs on the memory store, a few on PostgreSQL.
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { defineConfig } from '../src/index.js';
import { onEachStore, setupOn, type StoreName } from './stores.js';

const HOUR = 3_600_000;

const config = defineConfig({
  metrics: [
    { key: 'lessons', name: 'Lessons' },
    { key: 'penalties', name: 'Penalties' },
  ],
  attributes: [
    { key: 'plan', name: 'Plan', type: 'user' },
    { key: 'country', name: 'Country', type: 'user' },
  ],
  pointsSystems: [
    {
      key: 'score',
      name: 'Score',
      allowNegative: true,
      triggers: [
        { key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 1 },
        { key: 'per-penalty', type: 'metric', metricKey: 'penalties', metricThreshold: 1, points: -1 },
      ],
    },
    {
      key: 'energy',
      name: 'Energy',
      triggers: [
        { key: 'welcome', type: 'user_creation', points: 1 },
        { key: 'pro-hourly', type: 'time', timeUnit: 'hour', timeInterval: 1, points: 1, userAttributes: { plan: 'pro' } },
      ],
    },
  ],
});

const USERS = ['a', 'b', 'c', 'd', 'e', 'f', 'toString'];
const VALUES = [0, 1, 3, 9, 10, 11, 99, 100, 101, 950, 1000, 1001, 5000, 123_456];
const FILTERS: Record<string, string>[] = [{}, { plan: 'pro' }, { country: 'uk' }, { plan: 'free' }, { plan: 'pro', country: 'uk' }, { plan: 'free', country: 'fr' }];

const attrs = fc.record({ plan: fc.constantFrom('pro', 'free'), country: fc.constantFrom('uk', 'fr') }, { requiredKeys: [] });
const op = fc.oneof(
  fc.record({ kind: fc.constant('lesson' as const), user: fc.constantFrom(...USERS), value: fc.constantFrom(...VALUES), attributes: attrs }),
  fc.record({ kind: fc.constant('penalty' as const), user: fc.constantFrom(...USERS), value: fc.constantFrom(...VALUES), attributes: attrs }),
  fc.record({ kind: fc.constant('update' as const), user: fc.constantFrom(...USERS), attributes: attrs }),
);

/** The service's buckets computed naively from a list of totals (`from - 1 < t <= to`, the first `t <= 0`). */
function naiveHistogram(totals: number[]) {
  const max = Math.max(0, ...totals);
  let top = 10;
  while (top < max) top *= 10;
  const width = top / 10;
  const ranges = [{ from: 0, to: 0 }, ...Array.from({ length: 10 }, (_, i) => ({ from: i * width + 1, to: (i + 1) * width }))];
  return ranges.map((r, i) => ({ ...r, users: totals.filter((t) => (i === 0 ? t <= 0 : r.from - 1 < t && t <= r.to)).length }));
}

async function histogramsMatch(kind: StoreName, ops: fc.Arbitrary<{ kind: 'lesson' | 'penalty' | 'update'; user: string; value?: number; attributes: { plan?: string; country?: string } }[]>, runs: number) {
  await fc.assert(
    fc.asyncProperty(ops, async (list) => {
      const t = await setupOn(kind, config);
      for (const o of list) {
        const attributes = Object.keys(o.attributes).length > 0 ? { attributes: o.attributes as Record<string, string> } : {};
        if (o.kind === 'update') await t.engine.identifyUser({ id: o.user, ...attributes });
        else await t.engine.recordEvent(o.kind === 'lesson' ? 'lessons' : 'penalties', { user: { id: o.user, ...attributes }, value: o.value as number });
        t.advance(60_000);
      }
      const states = (await t.store.loadUsers(USERS)).flatMap((v) => (v ? [v.state] : []));
      for (const filter of FILTERS) {
        const matching = states.filter((s) => Object.entries(filter).every(([k, v]) => Object.hasOwn(s.user.attributes, k) && s.user.attributes[k] === v));
        const expected = naiveHistogram(matching.map((s) => s.points.score?.total ?? 0));
        expect(await t.engine.getPointsHistogram('score', { userAttributes: filter }), JSON.stringify(filter)).toEqual(expected);
      }
    }),
    { numRuns: runs },
  );
}

/**
 * The grants an hourly trigger filtered by plan=pro pays: those of the creation-anchored schedule whose
 * instant falls while the user is pro, judging a grant due at a call's very instant by the plan before it.
 */
function naiveGrants(created: number, calls: { at: number; plan: string | undefined }[], end: number): number {
  let n = 0;
  for (let k = 1; created + k * HOUR <= end; k++) {
    const at = created + k * HOUR;
    let plan: string | undefined;
    for (const c of calls) if (c.at < at && c.plan !== undefined) plan = c.plan;
    if (plan === 'pro') n++;
  }
  return n;
}

async function grantsMatch(kind: StoreName, runs: number) {
  const step = fc.record({ gap: fc.oneof(fc.integer({ min: 0, max: 5 * HOUR }), fc.constantFrom(HOUR, 2 * HOUR, 30 * 60_000)), plan: fc.constantFrom('pro', 'free', undefined), read: fc.boolean() });
  await fc.assert(
    fc.asyncProperty(fc.constantFrom('pro', 'free', undefined), fc.array(step, { maxLength: 12 }), async (first, steps) => {
      const t = await setupOn(kind, config, '2026-01-05T10:00:00Z');
      const created = t.now().getTime();
      const calls: { at: number; plan: string | undefined }[] = [{ at: created, plan: first }];
      await t.engine.identifyUser({ id: 'u', ...(first ? { attributes: { plan: first } } : {}) });
      for (const s of steps) {
        t.advance(s.gap);
        if (s.read) {
          // A read shows the grants due so far, by the plan in force, and commits nothing.
          const seen = (await t.engine.getPointsSummary('u', 'energy')).total;
          expect(seen).toBe(1 + naiveGrants(created, calls, t.now().getTime()));
        }
        await t.engine.updateUser('u', s.plan ? { attributes: { plan: s.plan } } : { name: 'n' });
        calls.push({ at: t.now().getTime(), plan: s.plan });
      }
      t.advance(3 * HOUR);
      await t.engine.accrue('u');
      const total = (await t.engine.getPointsSummary('u', 'energy')).total;
      expect(total).toBe(1 + naiveGrants(created, calls, t.now().getTime()));
      // Replayed from the ledger (user rows), the same grants.
      const report = await t.engine.replay({ policy: 'retroactive', users: ['u'], dryRun: true });
      expect(report.diffs).toEqual([]);
    }),
    { numRuns: runs },
  );
}

onEachStore('points histogram property', (kind) => {
  const runs = kind === 'memory' ? 80 : 8;
  it('the histogram (unfiltered, by one attribute, by two) equals a naive recomputation from every user state', async () => {
    await histogramsMatch(kind, fc.array(op, { minLength: 1, maxLength: 25 }), runs);
  });

  it('an attribute-filtered time trigger pays exactly the grants due while the user had the attribute', async () => {
    await grantsMatch(kind, runs);
  });
});
