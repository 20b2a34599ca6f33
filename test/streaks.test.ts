import { describe, expect, it } from 'vitest';
import { defineConfig } from '../src/index.js';
import { DAY, HOUR, setup } from './helpers.js';

const daily = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }, { key: 'words', name: 'Words' }],
  streak: { frequency: 'daily' },
});

const u = (id = 'u1', tz = 'UTC') => ({ id, tz });

describe('daily streaks (semantics 5)', () => {
  it('any positive event qualifies a period; zero and negative values do not', async () => {
    const t = setup(daily, '2026-01-05T10:00:00Z');
    let r = await t.engine.recordEvent('lessons', { user: u(), value: 0 });
    expect(r.currentStreak).toMatchObject({ length: 0, started: null, expires: null, extended: false, periodStart: '2026-01-05', periodEnd: '2026-01-05' });
    r = await t.engine.recordEvent('words', { user: u(), value: -3 });
    expect(r.currentStreak.length).toBe(0);
    r = await t.engine.recordEvent('words', { user: u(), value: 2 });
    expect(r.currentStreak).toEqual({ length: 1, frequency: 'daily', started: '2026-01-05', periodStart: '2026-01-05', periodEnd: '2026-01-05', expires: '2026-01-06', extended: true });
  });

  it('extends once per period: a second event the same day changes nothing', async () => {
    const t = setup(daily, '2026-01-05T10:00:00Z');
    await t.engine.recordEvent('lessons', { user: u(), value: 1 });
    t.advance(HOUR);
    const again = await t.engine.recordEvent('lessons', { user: u(), value: 1 });
    expect(again.currentStreak).toMatchObject({ length: 1, extended: false });
    t.advance(DAY);
    const next = await t.engine.recordEvent('lessons', { user: u(), value: 1 });
    expect(next.currentStreak).toMatchObject({ length: 2, started: '2026-01-05', periodStart: '2026-01-06', expires: '2026-01-07', extended: true });
  });

  it('expires is the last day of the next period; before acting today it is today', async () => {
    const t = setup(daily, '2026-01-05T10:00:00Z');
    await t.engine.recordEvent('lessons', { user: u(), value: 1 });
    t.advance(DAY);
    const s = await t.engine.getStreak('u1');
    expect(s).toMatchObject({ length: 1, periodStart: '2026-01-06', expires: '2026-01-06' });
  });

  it('a missed period resets: reads show 0, the next qualifying event starts again at 1', async () => {
    const t = setup(daily, '2026-01-05T10:00:00Z');
    await t.engine.recordEvent('lessons', { user: u(), value: 1 });
    t.advance(DAY);
    await t.engine.recordEvent('lessons', { user: u(), value: 1 });
    t.advance(2 * DAY); // 2026-01-07 passes unqualified
    expect((await t.engine.getStreak('u1')).length).toBe(0);
    expect((await t.engine.getStreaks(['u1']))[0]).toMatchObject({ streakLength: 0 });
    const r = await t.engine.recordEvent('lessons', { user: u(), value: 1 });
    expect(r.currentStreak).toMatchObject({ length: 1, started: '2026-01-08', extended: true });
  });

  it('a read the same day as the last qualifying period still shows the streak', async () => {
    const t = setup(daily, '2026-01-05T10:00:00Z');
    await t.engine.recordEvent('lessons', { user: u(), value: 1 });
    t.advance(DAY + 13 * HOUR); // 2026-01-06 23:00, not yet acted today
    expect((await t.engine.getStreak('u1')).length).toBe(1);
  });

  it('history lists the last N periods oldest first with the length as of each', async () => {
    const t = setup(daily, '2026-01-05T10:00:00Z');
    for (const gap of [0, 1, 1, 2, 1]) {
      t.advance(gap * DAY);
      await t.engine.recordEvent('lessons', { user: u(), value: 1 });
    }
    // Qualified 5th, 6th, 7th; missed 8th; qualified 9th, 10th.
    const s = await t.engine.getStreak('u1', { historyPeriods: 7 });
    expect(s.streakHistory.map((h) => [h.periodStart, h.length])).toEqual([
      ['2026-01-04', 0],
      ['2026-01-05', 1],
      ['2026-01-06', 2],
      ['2026-01-07', 3],
      ['2026-01-08', 0],
      ['2026-01-09', 1],
      ['2026-01-10', 2],
    ]);
    expect(s.extended).toBe('2026-01-10T10:00:00.000Z');
    expect((await t.engine.getStreak('u1')).streakHistory).toHaveLength(7);
    await expect(t.engine.getStreak('u1', { historyPeriods: 0 })).rejects.toMatchObject({ status: 400 });
  });

  it('getStreaks orders longest first and leaves unknown users out', async () => {
    const t = setup(daily, '2026-01-05T10:00:00Z');
    await t.engine.recordEvent('lessons', { user: u('a'), value: 1 });
    await t.engine.recordEvent('lessons', { user: u('b'), value: 1 });
    t.advance(DAY);
    await t.engine.recordEvent('lessons', { user: u('b'), value: 1 });
    expect(await t.engine.getStreaks(['a', 'b', 'ghost'])).toEqual([
      { userId: 'b', streakLength: 2, extended: '2026-01-06T10:00:00.000Z' },
      { userId: 'a', streakLength: 1, extended: '2026-01-05T10:00:00.000Z' },
    ]);
  });
});

describe('streak conditions', () => {
  const cfg = (mode: 'any' | 'all') =>
    defineConfig({
      metrics: [{ key: 'lessons', name: 'Lessons' }, { key: 'words', name: 'Words' }],
      streak: { frequency: 'daily', metrics: [{ key: 'lessons', threshold: 2 }, { key: 'words', threshold: 10 }], mode },
    });

  it('a metric meets its threshold when its sum in the period reaches it (mode any)', async () => {
    const t = setup(cfg('any'));
    expect((await t.engine.recordEvent('lessons', { user: u(), value: 1 })).currentStreak.length).toBe(0);
    expect((await t.engine.recordEvent('lessons', { user: u(), value: 1 })).currentStreak).toMatchObject({ length: 1, extended: true });
    t.advance(DAY);
    expect((await t.engine.recordEvent('words', { user: u(), value: 10 })).currentStreak.length).toBe(2);
  });

  it('mode all needs every metric; sums reset with the period', async () => {
    const t = setup(cfg('all'));
    await t.engine.recordEvent('lessons', { user: u(), value: 2 });
    expect((await t.engine.recordEvent('words', { user: u(), value: 9 })).currentStreak.length).toBe(0);
    expect((await t.engine.recordEvent('words', { user: u(), value: 1 })).currentStreak.length).toBe(1);
    t.advance(DAY);
    expect((await t.engine.recordEvent('words', { user: u(), value: 10 })).currentStreak.length).toBe(1);
    expect((await t.engine.recordEvent('lessons', { user: u(), value: 2 })).currentStreak).toMatchObject({ length: 2, extended: true });
  });
});

describe('freezes', () => {
  const cfg = defineConfig({
    metrics: [{ key: 'lessons', name: 'Lessons' }],
    streak: { frequency: 'daily', freezes: { initial: 1, max: 2, autoEarn: { everyDays: 7, amount: 1 } } },
  });

  it('a missed period consumes a freeze and keeps the streak without adding to it', async () => {
    const t = setup(cfg, '2026-01-05T10:00:00Z');
    await t.engine.recordEvent('lessons', { user: u(), value: 1 });
    t.advance(DAY);
    await t.engine.recordEvent('lessons', { user: u(), value: 1 });
    t.advance(2 * DAY); // 2026-01-07 missed
    const read = await t.engine.getStreak('u1', { historyPeriods: 4 });
    expect(read).toMatchObject({ length: 2, freezes: 0, maxFreezes: 2, freezeAutoEarnInterval: 7, freezeAutoEarnAmount: 1 });
    expect(read.streakHistory.map((h) => [h.periodStart, h.length, h.usedFreeze])).toEqual([
      ['2026-01-05', 1, false],
      ['2026-01-06', 2, false],
      ['2026-01-07', 2, true],
      ['2026-01-08', 2, false],
    ]);
    const r = await t.engine.recordEvent('lessons', { user: u(), value: 1 });
    expect(r.currentStreak).toMatchObject({ length: 3, freezes: 0, started: '2026-01-05', extended: true });
    // The freeze was materialised by the write: history is the same after it.
    expect((await t.engine.getStreak('u1', { historyPeriods: 4 })).streakHistory[2]).toMatchObject({ periodStart: '2026-01-07', usedFreeze: true });
  });

  it('with no freeze left, the next missed period breaks the streak', async () => {
    const t = setup(cfg, '2026-01-05T10:00:00Z');
    await t.engine.recordEvent('lessons', { user: u(), value: 1 });
    t.advance(3 * DAY); // 6th frozen, 7th breaks
    expect(await t.engine.getStreak('u1')).toMatchObject({ length: 0, freezes: 0, started: null, expires: null });
  });

  it('earns freezes every everyDays days after creation, never above max', async () => {
    const t = setup(cfg, '2026-01-05T10:00:00Z');
    await t.engine.identifyUser(u()); // no streak yet, so nothing consumes freezes
    t.advance(7 * DAY - 11 * HOUR); // 2026-01-11 23:00: not yet
    expect((await t.engine.getStreak('u1')).freezes).toBe(1);
    t.advance(HOUR); // 2026-01-12 00:00, seven days after the creation day
    expect((await t.engine.getStreak('u1')).freezes).toBe(2);
    t.advance(14 * DAY);
    expect((await t.engine.getStreak('u1')).freezes).toBe(2);
  });

  it('freezes earned during a gap cover the periods after they were earned', async () => {
    const t = setup(cfg, '2026-01-05T10:00:00Z');
    for (let i = 0; i < 6; i++) {
      await t.engine.recordEvent('lessons', { user: u(), value: 1 });
      t.advance(DAY);
    } // qualified 5th..10th; now 11th
    t.advance(2 * DAY); // missed 11th (freeze 1 -> 0) and 12th (earned on the 12th: 1 -> 0)
    expect(await t.engine.getStreak('u1')).toMatchObject({ length: 6, freezes: 0 });
    t.advance(DAY); // 13th missed, nothing left
    expect((await t.engine.getStreak('u1')).length).toBe(0);
  });
});

describe('time zones', () => {
  it('Pacific/Kiritimati (UTC+14) and Pacific/Pago_Pago (UTC-11) acting at the same instant land on different local days', async () => {
    const t = setup(daily, '2026-03-10T09:30:00Z');
    const kiri = await t.engine.recordEvent('lessons', { user: u('kiri', 'Pacific/Kiritimati'), value: 1 });
    const pago = await t.engine.recordEvent('lessons', { user: u('pago', 'Pacific/Pago_Pago'), value: 1 });
    expect(kiri.currentStreak).toMatchObject({ periodStart: '2026-03-10', started: '2026-03-10' });
    expect(pago.currentStreak).toMatchObject({ periodStart: '2026-03-09', started: '2026-03-09' });
    t.set('2026-03-10T10:30:00Z'); // Kiritimati: 2026-03-11 00:30; Pago Pago: still 2026-03-09 23:30
    expect((await t.engine.recordEvent('lessons', { user: u('kiri', 'Pacific/Kiritimati'), value: 1 })).currentStreak).toMatchObject({ length: 2, periodStart: '2026-03-11' });
    expect((await t.engine.recordEvent('lessons', { user: u('pago', 'Pacific/Pago_Pago'), value: 1 })).currentStreak).toMatchObject({ length: 1, extended: false, periodStart: '2026-03-09' });
  });

  it('Europe/Berlin 2024-03-31 (23 hours) is one period', async () => {
    const t = setup(daily, '2024-03-30T23:30:00Z'); // 2024-03-31 00:30 CET
    const first = await t.engine.recordEvent('lessons', { user: u('b', 'Europe/Berlin'), value: 1 });
    expect(first.currentStreak).toMatchObject({ length: 1, periodStart: '2024-03-31', periodEnd: '2024-03-31' });
    t.set('2024-03-31T21:30:00Z'); // 23:30 CEST, 22 elapsed hours later, same local day
    expect((await t.engine.recordEvent('lessons', { user: u('b', 'Europe/Berlin'), value: 1 })).currentStreak).toMatchObject({ length: 1, extended: false, periodStart: '2024-03-31' });
    t.set('2024-03-31T22:00:00Z'); // 2024-04-01 00:00 CEST
    expect((await t.engine.recordEvent('lessons', { user: u('b', 'Europe/Berlin'), value: 1 })).currentStreak).toMatchObject({ length: 2, periodStart: '2024-04-01' });
  });

  it('Europe/Berlin 2024-10-27 (25 hours) is one period', async () => {
    const t = setup(daily, '2024-10-26T22:00:00Z'); // 2024-10-27 00:00 CEST
    await t.engine.recordEvent('lessons', { user: u('b', 'Europe/Berlin'), value: 1 });
    t.set('2024-10-27T22:59:00Z'); // 23:59 CET, 24h59m later, same local day
    expect((await t.engine.recordEvent('lessons', { user: u('b', 'Europe/Berlin'), value: 1 })).currentStreak).toMatchObject({ length: 1, extended: false, periodStart: '2024-10-27', periodEnd: '2024-10-27' });
    t.set('2024-10-27T23:00:00Z'); // 2024-10-28 00:00 CET
    expect((await t.engine.recordEvent('lessons', { user: u('b', 'Europe/Berlin'), value: 1 })).currentStreak).toMatchObject({ length: 2, periodStart: '2024-10-28' });
  });

  it('a weekly streak across the ISO week-year boundary 2024-12-30 / 2025-01-05 is keyed by the week\'s first date', async () => {
    const weekly = defineConfig({ metrics: [{ key: 'lessons', name: 'L' }], streak: { frequency: 'weekly' } });
    const t = setup(weekly, '2024-12-30T12:00:00Z');
    const a = await t.engine.recordEvent('lessons', { user: u(), value: 1 });
    expect(a.currentStreak).toMatchObject({ length: 1, periodStart: '2024-12-30', periodEnd: '2025-01-05', expires: '2025-01-12' });
    t.set('2025-01-05T12:00:00Z');
    expect((await t.engine.recordEvent('lessons', { user: u(), value: 1 })).currentStreak).toMatchObject({ length: 1, extended: false, periodStart: '2024-12-30' });
    t.set('2025-01-06T12:00:00Z');
    expect((await t.engine.recordEvent('lessons', { user: u(), value: 1 })).currentStreak).toMatchObject({ length: 2, periodStart: '2025-01-06', periodEnd: '2025-01-12' });
  });

  it('weekStartsOn moves week boundaries (Sunday weeks)', async () => {
    const weekly = defineConfig({ metrics: [{ key: 'lessons', name: 'L' }], streak: { frequency: 'weekly' }, weekStartsOn: 0 });
    const t = setup(weekly, '2025-01-05T12:00:00Z'); // a Sunday
    expect((await t.engine.recordEvent('lessons', { user: u(), value: 1 })).currentStreak).toMatchObject({ periodStart: '2025-01-05', periodEnd: '2025-01-11' });
  });

  it('a monthly streak across February in a leap year', async () => {
    const monthly = defineConfig({ metrics: [{ key: 'lessons', name: 'L' }], streak: { frequency: 'monthly' } });
    const t = setup(monthly, '2024-01-31T12:00:00Z');
    expect((await t.engine.recordEvent('lessons', { user: u(), value: 1 })).currentStreak).toMatchObject({ length: 1, periodStart: '2024-01-01', periodEnd: '2024-01-31', expires: '2024-02-29' });
    t.set('2024-02-29T12:00:00Z');
    expect((await t.engine.recordEvent('lessons', { user: u(), value: 1 })).currentStreak).toMatchObject({ length: 2, periodStart: '2024-02-01', periodEnd: '2024-02-29', expires: '2024-03-31' });
    t.set('2024-03-01T12:00:00Z');
    expect((await t.engine.recordEvent('lessons', { user: u(), value: 1 })).currentStreak).toMatchObject({ length: 3, periodStart: '2024-03-01' });
  });

  it('a user who changes tz mid-streak keeps a coherent streak (no double count, no false break)', async () => {
    const t = setup(daily, '2026-01-05T14:30:00Z'); // Tokyo 2026-01-05 23:30
    expect((await t.engine.recordEvent('lessons', { user: u('nomad', 'Asia/Tokyo'), value: 1 })).currentStreak).toMatchObject({ length: 1, periodStart: '2026-01-05' });
    t.set('2026-01-05T20:00:00Z'); // flies to Los Angeles: 2026-01-05 12:00 there, the same local date
    const same = await t.engine.recordEvent('lessons', { user: u('nomad', 'America/Los_Angeles'), value: 1 });
    expect(same.currentStreak).toMatchObject({ length: 1, extended: false, periodStart: '2026-01-05' });
    t.set('2026-01-06T20:00:00Z'); // LA 2026-01-06
    expect((await t.engine.recordEvent('lessons', { user: u('nomad'), value: 1 })).currentStreak).toMatchObject({ length: 2, periodStart: '2026-01-06' });
    t.set('2026-01-07T16:00:00Z'); // back to Tokyo: 2026-01-08 01:00; LA's 2026-01-07 was never acted on...
    const back = await t.engine.recordEvent('lessons', { user: u('nomad', 'Asia/Tokyo'), value: 1 });
    // ...so in Tokyo's calendar 2026-01-07 was missed: the streak restarts at 1 rather than counting twice.
    expect(back.currentStreak).toMatchObject({ length: 1, periodStart: '2026-01-08' });
  });
});
