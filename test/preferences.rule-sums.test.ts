/**
 * A user's own streak rule, set mid-period, counts the period's sums so far (docs/rules.md, section 12: "a new
 * rule applies from the next event on (the current period's sums so far are kept)"), also of a metric the
 * rule in force before did not count. Only the counted metrics' sums were kept: b 0.6 then b 0.6 under a new
 * rule "b >= 1" did not extend. Found by a streak fuzz against a day-by-day model.
 */
import { expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';

it.each([
  ['the configured rule counts a only', [{ key: 'a', threshold: 1 }]],
  ['the configured rule counts b with a higher threshold', [{ key: 'a', threshold: 9 }, { key: 'b', threshold: 9 }]],
  ['the configured rule is any event', undefined],
] as const)('%s: b 0.6, then the rule b >= 1, then b 0.6 extends', async (_label, metrics) => {
  const engine = createEngine({
    config: defineConfig({
      metrics: [{ key: 'a', name: 'A' }, { key: 'b', name: 'B' }],
      streak: { frequency: 'daily', ...(metrics ? { metrics: metrics.map((m) => ({ ...m })) } : {}), customization: { metrics: ['a', 'b'] } },
    }),
    store: createMemoryStore(),
    clock: () => new Date('2026-03-02T09:00:00Z'),
  });
  const first = await engine.recordEvent('b', { user: { id: 'u' }, value: 0.6 });
  expect(first.currentStreak.length).toBe(metrics === undefined ? 1 : 0);
  await engine.updatePreferences('u', { streak: { metrics: [{ key: 'b', threshold: 1 }] } });
  const second = await engine.recordEvent('b', { user: { id: 'u' }, value: 0.6 });
  expect(second.currentStreak.length).toBe(1);
  expect(second.currentStreak.extended).toBe(metrics !== undefined);
});

it("back to the configuration's rule (not among the customization's metrics) mid-period: its sums so far count", async () => {
  // Found by a review of the fix above: only the customization's metrics were kept.
  const engine = createEngine({
    config: defineConfig({ metrics: [{ key: 'a', name: 'A' }, { key: 'b', name: 'B' }], streak: { frequency: 'daily', metrics: [{ key: 'a', threshold: 1 }], customization: { metrics: ['b'] } } }),
    store: createMemoryStore(),
    clock: () => new Date('2026-03-02T09:00:00Z'),
  });
  await engine.identifyUser({ id: 'u' });
  await engine.updatePreferences('u', { streak: { metrics: [{ key: 'b', threshold: 5 }] } });
  expect((await engine.recordEvent('a', { user: { id: 'u' }, value: 0.6 })).currentStreak.length).toBe(0);
  await engine.updatePreferences('u', { streak: { metrics: null } });
  expect((await engine.recordEvent('a', { user: { id: 'u' }, value: 0.6 })).currentStreak.length).toBe(1);
});
