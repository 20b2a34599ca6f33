/**
 * Two streak rules found broken by a fuzz of pauses and reminders (docs/rules.md, sections 12 and 15):
 * - Creating a pause dropped the user's pauses that ended before today, also one that still keeps the
 *   current week or month (a weekly streak paused on Monday, a new pause set on Wednesday: the week lost its
 *   pause and the streak broke).
 * - `emails.streak_reminder_due` is due only while the current period is not yet extended; with `hoursBefore`
 *   longer than a period (or 24 on a 23-hour DST day) it was emitted in a period already extended. It is now
 *   due when the first period not yet extended begins (or later, at `hoursBefore` before the lapse).
 */
import { describe, expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { sequentialIds } from '../src/testing/index.js';

describe('pauses', () => {
  it('a new pause keeps an earlier one that still covers the current week', async () => {
    const config = defineConfig({ metrics: [{ key: 'm', name: 'M' }], streak: { frequency: 'weekly' } });
    let now = Date.parse('2026-03-02T12:00:00Z'); // Monday of week 03-02
    const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds() });
    await engine.recordEvent('m', { user: { id: 'u', tz: 'UTC' }, value: 1 });
    const first = await engine.pauseStreak('u', { start: '2026-03-09', end: '2026-03-09' });
    now = Date.parse('2026-03-11T12:00:00Z'); // Wednesday of the paused week, nothing done in it
    expect((await engine.getStreak('u')).expires).toBe('2026-03-22');
    await engine.pauseStreak('u', { start: '2026-03-30', end: '2026-03-31' });
    expect((await engine.getStreak('u')).expires).toBe('2026-03-22');
    now = Date.parse('2026-03-17T12:00:00Z');
    const s = await engine.getStreak('u');
    expect(s.length).toBe(1);
    expect(s.streakHistory.slice(-3).map((h) => [h.periodStart, h.length, h.usedPause])).toEqual([
      ['2026-03-02', 1, false],
      ['2026-03-09', 1, true],
      ['2026-03-16', 1, false],
    ]);
    // Still there to delete while its week runs.
    now = Date.parse('2026-03-11T13:00:00Z');
    expect((await engine.deletePause('u', first.pause.id)).deleted).toBe(true);
  });
});

describe('streak reminders', () => {
  const remindersOf = async (engine: ReturnType<typeof createEngine>) => (await engine.readChanges({ limit: 100 })).events.filter((e) => e.type === 'emails.streak_reminder_due').map((e) => e.at);

  it.each([
    ['UTC', 30, '2026-03-02T10:00:00Z', '2026-03-02T20:00:00Z', '2026-03-03T00:00:00.000Z'],
    // 03-08 is 23 hours long in New York: 24 hours before its end is 03-07 23:00.
    ['America/New_York', 24, '2026-03-07T15:00:00Z', '2026-03-08T04:30:00Z', '2026-03-08T05:00:00.000Z'],
  ])('%s, %i hours before: none while today is extended, then due when tomorrow begins', async (tz, hoursBefore, eventAt, sweepAt, dueAt) => {
    const config = defineConfig({ metrics: [{ key: 'm', name: 'M' }], streak: { frequency: 'daily' }, notifications: { streakReminder: { hoursBefore } } });
    let now = Date.parse(eventAt);
    const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds() });
    await engine.recordEvent('m', { user: { id: 'u', tz }, value: 1 });
    now = Date.parse(sweepAt);
    await engine.sweep();
    expect(await remindersOf(engine)).toEqual([]);
    now = Date.parse(dueAt) + 60_000;
    await engine.sweep();
    expect(await remindersOf(engine)).toEqual([dueAt]);
  });
});

describe('moving west', () => {
  it('a positive event after a move west into a day not yet counted counts, though an event of value 0 came first', async () => {
    const config = defineConfig({ metrics: [{ key: 'm', name: 'M' }], streak: { frequency: 'daily' } });
    let now = Date.parse('2026-03-03T18:45:00Z'); // 03-04 00:30 in Kathmandu, 03-03 15:45 in Santiago
    const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds() });
    await engine.recordEvent('m', { user: { id: 'u', tz: 'Asia/Kathmandu' }, value: 0 });
    now += 60_000;
    const r = await engine.recordEvent('m', { user: { id: 'u', tz: 'America/Santiago' }, value: 1 });
    expect([r.currentStreak.length, r.currentStreak.extended !== null]).toEqual([1, true]);
    now = Date.parse('2026-03-04T18:00:00Z');
    expect((await engine.recordEvent('m', { user: { id: 'u' }, value: 1 })).currentStreak.length).toBe(2);
    // A day already counted still never counts again.
    now = Date.parse('2026-03-04T18:30:00Z');
    await engine.updateUser('u', { tz: 'Asia/Kathmandu' }); // 03-05 00:15 there
    await engine.recordEvent('m', { user: { id: 'u' }, value: 0 });
    await engine.updateUser('u', { tz: 'America/Santiago' }); // back to 03-04, counted
    expect((await engine.recordEvent('m', { user: { id: 'u' }, value: 1 })).currentStreak.length).toBe(2);
  });
});
