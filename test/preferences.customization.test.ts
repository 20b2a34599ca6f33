/**
 * A user's own streak rule applies only within the configuration's `streak.customization` (docs/rules.md,
 * section 12). When the configuration drops or narrows the customization, a rule it no longer allows stopped
 * applying nowhere: it still decided the user's streak and showed in their preferences, even after a
 * retroactive replay, while the same `updatePreferences` call is now refused. The configuration's rule now
 * counts for that user, and their preferences show it; the stored choice applies again if the customization
 * allows it again. Found by a fuzz of configuration changes.
 */
import { expect, it } from 'vitest';
import { createEngine, defineConfig, type ConfigInput } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { sequentialIds } from '../src/testing/index.js';

const cfg = (customization: ConfigInput['streak'] extends infer S ? (S extends { customization?: infer C } ? C | undefined : never) : never): ConfigInput => ({
  metrics: [
    { key: 'lessons', name: 'Lessons' },
    { key: 'quizzes', name: 'Quizzes' },
  ],
  streak: { frequency: 'daily', ...(customization ? { customization } : {}) },
});

const T0 = Date.parse('2026-03-02T10:00:00Z');
const DAY = 86_400_000;

it('a rule the customization no longer allows is not applied, and the preferences show the configuration rule', async () => {
  const store = createMemoryStore();
  const on = (c: ConfigInput, ms: number) => createEngine({ config: defineConfig(c), store, clock: () => new Date(ms), newId: sequentialIds(`i${ms}`) });
  const wide = cfg({ metrics: ['lessons', 'quizzes'] });
  await on(wide, T0).identifyUser({ id: 'u' });
  await on(wide, T0).updatePreferences('u', { streak: { mode: 'all', metrics: [{ key: 'quizzes', threshold: 1 }] } });
  // Under its own rule a lessons event does not count.
  expect((await on(wide, T0).recordEvent('lessons', { user: { id: 'u' }, value: 1 })).currentStreak.length).toBe(0);

  for (const [label, narrowed] of [
    ['removed', cfg(undefined)],
    ['narrowed to lessons', cfg({ metrics: ['lessons'] })],
    ['thresholds raised', cfg({ metrics: ['lessons', 'quizzes'], minThreshold: 5 })],
  ] as const) {
    const e = on(narrowed, T0 + DAY);
    expect((await e.getPreferences('u')).streak, label).toEqual({ enabled: true, mode: 'any', metrics: [] });
  }
  const e = on(cfg(undefined), T0 + DAY);
  await e.replay({ policy: 'retroactive', users: ['u'] });
  expect((await e.getPreferences('u')).streak).toEqual({ enabled: true, mode: 'any', metrics: [] });
  // The configuration's rule: the day-one lessons event counts now (retroactively), and today's extends it.
  expect((await e.recordEvent('lessons', { user: { id: 'u' }, value: 1 })).currentStreak.length).toBe(2);
  // Allowed again: the user's choice applies again.
  const again = on(wide, T0 + 2 * DAY);
  expect((await again.getPreferences('u')).streak).toEqual({ enabled: true, mode: 'all', metrics: [{ key: 'quizzes', threshold: 1 }] });
  // A lessons event does not extend the streak under the user's rule (still 2, from yesterday).
  expect((await again.recordEvent('lessons', { user: { id: 'u' }, value: 1 })).currentStreak.length).toBe(2);
  expect((await again.recordEvent('quizzes', { user: { id: 'u' }, value: 1 })).currentStreak.length).toBe(3);
});
