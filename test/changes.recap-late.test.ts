/**
 * `emails.recap_due`: at the start of each period, for the period that ended, when the user had an event
 * since the last recap was due (docs/rules.md, section 15); reads and commits stay correct without a sweep.
 * With no commit of the user for more than one period (no sweeper, or one that was down), the recap named
 * the period just ended (an idle day) instead of the one the activity fell in, and was dated late. It is now
 * the activity's period, due when the next began, whatever the sweeps. Found by a fuzz of change notifications.
 */
import { expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { sequentialIds } from '../src/testing/index.js';

it('the same recap with a daily sweep and with none', async () => {
  const config = defineConfig({ timeZone: 'UTC', metrics: [{ key: 'lessons', name: 'Lessons' }], notifications: { recap: { frequency: 'daily' } } });
  const run = async (sweepDaily: boolean) => {
    let now = Date.parse('2026-01-05T10:00:00Z');
    const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds() });
    await engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 }); // active on Jan 5 only
    for (let d = 0; d < 3; d++) {
      now += 86_400_000;
      if (sweepDaily) await engine.sweep();
    }
    await engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 }); // Jan 8
    const { events } = await engine.readChanges({ limit: 100 });
    return events.filter((e) => e.type === 'emails.recap_due').map((e) => [e.at, (e.payload as { recap: unknown }).recap]);
  };
  const swept = await run(true);
  expect(swept).toEqual([['2026-01-06T00:00:00.000Z', { periodStart: '2026-01-05', periodEnd: '2026-01-05' }]]);
  expect(await run(false)).toEqual(swept);
});

it('after a move west the activity of a day not yet recapped is recapped', async () => {
  const config = defineConfig({ timeZone: 'UTC', metrics: [{ key: 'lessons', name: 'Lessons' }], notifications: { recap: { frequency: 'daily' } } });
  let now = Date.parse('2026-01-05T01:00:00Z'); // Jan 5 10:00 in Tokyo
  const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds() });
  await engine.recordEvent('lessons', { user: { id: 'u', tz: 'Asia/Tokyo' }, value: 1 });
  now = Date.parse('2026-01-05T17:00:00Z'); // Jan 6 02:00 in Tokyo: Jan 5 is recapped
  await engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
  now = Date.parse('2026-01-08T20:00:00Z'); // Jan 8 12:00 in Los Angeles, where the Jan 6 activity reads as Jan 5
  await engine.recordEvent('lessons', { user: { id: 'u', tz: 'America/Los_Angeles' }, value: 1 });
  const { events } = await engine.readChanges({ limit: 100 });
  expect(events.filter((e) => e.type === 'emails.recap_due').map((e) => (e.payload as { recap: { periodStart: string } }).recap.periodStart)).toEqual(['2026-01-05', '2026-01-06']);
});
