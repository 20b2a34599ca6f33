/**
 * Issue 16, application API: every operation of the hosted service's `application.json` (OpenAPI 1.21.1,
 * vendored in test/fixtures/openapi) is driven through `createHttpHandler` over a memory-store engine whose
 * configuration has every feature, with the spec's own example requests (request-body examples and
 * parameters' `example`s) where it has them. Every answer's status must be one the operation documents and
 * its body must validate (Ajv 2020 + formats) against that response's schema. The error paths reachable are
 * driven too: 401 without a key, 404 unknown user / metric / points system / leaderboard / achievement, 403
 * streak customization off, 400 / 422 bad input.
 *
 * Where the spec's examples contradict its schemas, the schemas win (noted at each such case):
 * - `GET /streaks`: the `userIds` parameter's schema is an array while its example is one comma-separated
 *   string (`user-123,user-456,user-789`); Laurel takes both (repeated `userIds` and comma-separated).
 * - `POST /achievements/{key}/complete`: the body example's user has `subscribedToEmails`, a field
 *   `UpsertedUser` does not define (it is `subscribeToEmails`); it is ignored.
 * - `GET /leaderboards` (and `LeaderboardResponse`): the 200 example's boards lack `startTime` and `endTime`,
 *   which the schema requires; Laurel always sends them (null when unset).
 * - `GET /users/{id}/preferences`: the 200 example has no `streak`; Laurel sends it whenever a streak is configured.
 *
 * Two statuses the spec does not list, kept on purpose (the README documents them): `202` for an idempotent
 * replay of `POST /metrics/{key}/event` (the service's idempotency page documents it) and `404` for an
 * unknown metric there.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { createHttpHandler } from '../src/http.js';
import { createMemoryStore } from '../src/memory.js';
import { openapi, type Json } from './openapi.js';


const { ajv, operations: OPERATIONS, operation, pointer, bodyExamples } = openapi('application.json');
/** A parameter's own `example` in the spec. */
const example = (op: string, name: string): string => {
  const p = (operation(op).parameters ?? []).find((x) => x.name === name);
  if (!p || p.example === undefined) throw new Error(`${op}: no example for ${name}`);
  return String(p.example);
};

const input = {
  metrics: [
    { key: 'words-written', name: 'Words written' },
    { key: 'lessons', name: 'Lessons' },
    // `GET /users/{id}/metrics/{key}`'s example metric key is literally "key".
    { key: 'key', name: 'Key' },
  ],
  attributes: [
    { key: 'department', name: 'Department', type: 'user' },
    { key: 'role', name: 'Role', type: 'user' },
    { key: 'plan-type', name: 'Plan', type: 'user' },
    { key: 'region', name: 'Region', type: 'user' },
    { key: 'city', name: 'City', type: 'user' },
    { key: 'category', name: 'Category', type: 'event' },
    { key: 'source', name: 'Source', type: 'event' },
  ],
  achievements: [
    { key: 'finish-onboarding', name: 'Finish onboarding', trigger: 'api', description: 'Done with onboarding' },
    { key: 'first-words', name: 'First words', trigger: 'metric', metricKey: 'words-written', metricValue: 1 },
    { key: 'mobile-writer', name: 'Mobile writer', trigger: 'metric', metricKey: 'words-written', metricValue: 100, eventAttributes: { source: 'mobile-app' } },
    { key: 'premium-writer', name: 'Premium writer', trigger: 'metric', metricKey: 'words-written', metricValue: 500, userAttributes: { 'plan-type': 'premium' } },
    { key: 'streak-3', name: 'Three days', trigger: 'streak', streakLength: 3 },
    { key: 'all-done', name: 'All done', trigger: 'achievement', achievementKeys: ['finish-onboarding', 'first-words'] },
  ],
  streak: {
    frequency: 'daily',
    metrics: [{ key: 'words-written', threshold: 1 }],
    freezes: { initial: 1, max: 3, autoEarn: { everyDays: 7, amount: 1 } },
    customization: { metrics: ['words-written', 'lessons'], minThreshold: 1, maxThreshold: 10_000 },
  },
  pointsSystems: [
    {
      key: 'points-system-key',
      name: 'XP',
      description: 'Experience',
      levels: [
        { key: 'bronze', name: 'Bronze', points: 0 },
        { key: 'silver', name: 'Silver', points: 100 },
      ],
      triggers: [
        { key: 'per-word', type: 'metric', metricKey: 'words-written', metricThreshold: 100, points: 10, eventAttributes: { category: 'writing' } },
        { key: 'premium-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 5, userAttributes: { 'plan-type': 'premium' } },
        { key: 'onboarded', type: 'achievement', achievementKey: 'finish-onboarding', points: 50 },
        { key: 'streak', type: 'streak', streakLengthThreshold: 2, points: 20 },
        { key: 'signup', type: 'user_creation', points: 5 },
      ],
      boosts: [{ key: 'launch', name: 'Launch week', multiplier: 2, start: '2026-01-05', end: '2026-01-11', rounding: 'up' }],
    },
    {
      key: 'energy',
      name: 'Energy',
      maxPoints: 5,
      triggers: [
        { key: 'refill', type: 'time', timeUnit: 'hour', timeInterval: 6, points: 1 },
        { key: 'start', type: 'user_creation', points: 5 },
      ],
    },
  ],
  leaderboards: [
    { key: 'weekly-words', name: 'Weekly words', rankBy: 'metric', metricKey: 'words-written', start: '2025-01-01', runUnit: 'day', runInterval: 7, breakdownAttributes: ['city'], maxParticipants: 100 },
    { key: 'xp-board', name: 'XP', rankBy: 'points', pointsSystemKey: 'points-system-key', start: '2025-01-01', description: 'Overall XP' },
    { key: 'office-hours', name: 'Office hours', rankBy: 'metric', metricKey: 'lessons', start: '2025-01-01', runUnit: 'month', runInterval: 1, startTime: '09:00', endTime: '17:00' },
    { key: 'streaks', name: 'Streaks', rankBy: 'streak', start: '2025-01-01', end: '2025-12-31' },
    { key: 'next-year', name: 'Next year', rankBy: 'metric', metricKey: 'lessons', start: '2027-01-01' },
  ],
  notifications: { streakReminder: { hoursBefore: 6 }, reactivation: { days: [3] }, recap: { frequency: 'weekly' }, achievement: {} },
} satisfies Parameters<typeof defineConfig>[0];
const config = defineConfig(input);
/** The same features without streak customization (for 403 on streak preferences). */
const plainConfig = defineConfig({ ...input, streak: { frequency: 'daily' } });

const KEY = 'contract-key';
let now = new Date('2026-01-05T10:00:00Z');
const clock = () => now;
/**
 * Set (only) by contract.application.tenant.test.ts: the whole contract again with the spec's `Tenant-ID`
 * example on every request, over that tenant's engine; the default tenant then holds nothing, so a header
 * the handler ignored would fail the run.
 */
const TENANT = process.env.LAUREL_CONTRACT_TENANT;
const root = createEngine({ config, store: createMemoryStore(), clock });
const engine = TENANT ? root.tenant(TENANT) : root;
const unexpected: unknown[] = [];
const handler = createHttpHandler(root, { apiKeys: [KEY], onError: (e) => unexpected.push(e) });
const plainHandler = createHttpHandler(createEngine({ config: plainConfig, store: createMemoryStore(), clock }), { apiKeys: [KEY] });

/** Which operations got a documented success answer. */
const succeeded = new Set<string>();

interface Call {
  params?: Record<string, string>;
  query?: Record<string, string | string[]>;
  body?: unknown;
  rawBody?: string;
  headers?: Record<string, string>;
  key?: string | null;
  via?: typeof handler;
}

/** Calls one operation; checks its status is documented and its body validates; answers both. */
async function call(op: string, c: Call = {}): Promise<{ status: number; body: any }> {
  const [method, template] = op.split(' ') as [string, string];
  const path = template.replace(/\{(\w+)\}/g, (_, name: string) => {
    const v = c.params?.[name];
    if (v === undefined) throw new Error(`${op}: no value for ${name}`);
    return encodeURIComponent(v);
  });
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(c.query ?? {})) for (const x of Array.isArray(v) ? v : [v]) qs.append(k, x);
  const headers: Record<string, string> = { ...(c.key === null ? {} : { 'x-api-key': c.key ?? KEY }), ...(c.body !== undefined || c.rawBody !== undefined ? { 'content-type': 'application/json' } : {}), ...(TENANT ? { 'tenant-id': TENANT } : {}), ...c.headers };
  const res = await (c.via ?? handler)(
    new Request(`http://laurel.test/v1${path}${qs.size > 0 ? `?${qs}` : ''}`, { method, headers, ...(c.rawBody !== undefined ? { body: c.rawBody } : c.body !== undefined ? { body: JSON.stringify(c.body) } : {}) }),
  );
  const body = await res.json();
  const documented = Object.keys(operation(op).responses).map(Number);
  expect(documented, `${op} answered ${res.status} ${JSON.stringify(body)}, not documented`).toContain(res.status);
  const validate = ajv.getSchema(pointer(op, res.status));
  if (!validate) throw new Error(`no schema for ${op} ${res.status}`);
  const ok = validate(body);
  expect(ok ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message} ${JSON.stringify(e.params)}`), `${op} ${res.status} body: ${JSON.stringify(body).slice(0, 2000)}`).toEqual([]);
  if (res.status < 300) succeeded.add(op);
  return { status: res.status, body };
}

const at = (iso: string) => {
  now = new Date(iso);
};

beforeAll(async () => {
  // A 2024 for wrapped's example year, then a few days of activity in 2025 and January 2026.
  at('2024-03-04T12:00:00Z');
  await engine.recordEvent('words-written', { user: { id: 'user-123', tz: 'Europe/London', attributes: { city: 'London', 'plan-type': 'premium', region: 'us-east' } }, value: 300, attributes: { category: 'writing', source: 'mobile-app' } });
  at('2025-01-15T10:00:00Z');
  await engine.recordEvent('words-written', { user: { id: 'user-123' }, value: 200, attributes: { category: 'writing' } });
  await engine.recordEvent('words-written', { user: { id: 'user-456', attributes: { city: 'Paris' } }, value: 120 });
  for (const [i, day] of ['2026-01-03', '2026-01-04', '2026-01-05'].entries()) {
    at(`${day}T10:00:00Z`);
    await engine.recordEvent('words-written', { user: { id: 'userId', name: 'Ana', email: 'ana@example.com', attributes: { city: 'London', 'plan-type': 'premium' } }, value: 150 + i, attributes: { category: 'writing', source: 'mobile-app' } });
    await engine.recordEvent('lessons', { user: { id: 'userId' }, value: 1 });
    await engine.recordEvent('words-written', { user: { id: 'user-123' }, value: 10 });
  }
  await engine.completeAchievement('finish-onboarding', { user: { id: 'userId' } });
  await engine.createBoost({ pointsSystemKey: 'points-system-key', userId: 'userId', name: 'Welcome back', start: '2026-01-05', end: '2026-01-20', multiplier: 1.5, rounding: 'nearest' });
  await engine.createBoost({ pointsSystemKey: 'points-system-key', userId: 'user-456', name: 'Old', start: '2025-01-15', end: '2025-01-16', multiplier: 2 });
  await engine.pauseStreak('userId', { start: '2026-01-10', end: '2026-01-12' });
  at('2026-01-06T12:00:00Z');
});

describe('every application operation, with the spec\'s examples, answers documented statuses and valid bodies', () => {
  it('POST /metrics/{key}/event: the example body (201), an idempotent replay (202), bad input (400), over-spending (422), unknown metric (404)', async () => {
    const op = 'POST /metrics/{key}/event';
    const [body] = bodyExamples(op) as [Json];
    const key = example(op, 'key');
    const idem = example(op, 'Idempotency-Key');
    const first = await call(op, { params: { key }, body, headers: { 'idempotency-key': idem } });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ metricId: expect.any(String), total: 750, idempotencyKey: idem, idempotentReplayed: false });
    // 202 for a replay is not in the spec (it is on the service's idempotency page): validated as the 201 body.
    const res = await handler(new Request(`http://laurel.test/v1/metrics/${key}/event`, { method: 'POST', headers: { 'x-api-key': KEY, 'content-type': 'application/json', 'idempotency-key': idem, ...(TENANT ? { 'tenant-id': TENANT } : {}) }, body: JSON.stringify(body) }));
    expect(res.status).toBe(202);
    const replay = await res.json();
    const validate = ajv.getSchema(pointer(op, 201))!;
    expect(validate(replay), JSON.stringify(validate.errors)).toBe(true);
    expect(replay).toMatchObject({ idempotentReplayed: true, total: 750 });
    // More events: every feature in an event response (achievements, streak, points with boosts, boards).
    const more = await call(op, { params: { key }, body: { user: { id: 'userId' }, value: 500, attributes: { category: 'writing', source: 'mobile-app' } } });
    expect(more.status).toBe(201);
    expect(Object.keys(more.body.points)).toContain('points-system-key');
    expect((await call(op, { params: { key: 'lessons' }, body: { user: { id: 'userId' }, value: 1 } })).status).toBe(201);
    // Bad requests: malformed JSON, a non-number value, unknown attribute keys, a missing user.
    expect((await call(op, { params: { key }, rawBody: '{"user":' })).status).toBe(400);
    expect((await call(op, { params: { key }, body: { user: { id: 'x' }, value: 'many' } })).status).toBe(400);
    expect((await call(op, { params: { key }, body: { user: { id: 'x' }, value: 1, attributes: { colour: 'red' } } })).status).toBe(400);
    expect((await call(op, { params: { key }, body: { value: 1 } })).status).toBe(400);
    // Unknown metric: 404, not in the spec (kept on purpose); ErrorBody.
    const unknown = await handler(new Request('http://laurel.test/v1/metrics/nope/event', { method: 'POST', headers: { 'x-api-key': KEY, 'content-type': 'application/json' }, body: JSON.stringify({ user: { id: 'x' }, value: 1 }) }));
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ error: expect.any(String) });
  });

  it('POST /users (201, 400), GET/PUT/PATCH /users/{id} with the examples (200, 404, 400/422)', async () => {
    const created = await call('POST /users', { body: { id: 'new-user', email: 'new@example.com', name: 'New', tz: 'Europe/London', attributes: { department: 'engineering' } } });
    expect(created.status).toBe(201);
    expect((await call('POST /users', { body: { email: 'no-id@example.com' } })).status).toBe(400);
    expect((await call('POST /users', { rawBody: '[]' })).status).toBe(400);

    const got = await call('GET /users/{id}', { params: { id: 'userId' } });
    expect(got).toMatchObject({ status: 200, body: { id: 'userId', name: 'Ana' } });
    expect((await call('PUT /users/{id}', { params: { id: example('PUT /users/{id}', 'id') }, body: bodyExamples('PUT /users/{id}')[0] })).status).toBe(200);
    const patched = await call('PATCH /users/{id}', { params: { id: example('PATCH /users/{id}', 'id') }, body: bodyExamples('PATCH /users/{id}')[0] });
    expect(patched).toMatchObject({ status: 200, body: { id: 'id', email: 'user@example.com', attributes: { department: 'engineering', role: 'developer' } } });
    expect((await call('PATCH /users/{id}', { params: { id: 'ghost' }, body: { name: 'G' } })).status).toBe(404);
    expect((await call('PUT /users/{id}', { params: { id: 'id' }, body: { attributes: { colour: 'red' } } })).status).toBe(400);
    expect((await call('PATCH /users/{id}', { params: { id: 'id' }, body: { tz: 'Not/AZone' } })).status).toBe(400);
    // GET /users/{id} documents no 404: an unknown user is 422 (see handler).
    expect((await call('GET /users/{id}', { params: { id: 'ghost' } })).status).toBe(422);
  });

  it('GET/PATCH /users/{id}/preferences with every example (200), 403 without customization, 404, 422', async () => {
    const id = example('GET /users/{id}/preferences', 'id');
    await engine.identifyUser({ id });
    const got = await call('GET /users/{id}/preferences', { params: { id } });
    expect(got.status).toBe(200);
    expect(got.body.notifications).toEqual({ achievement_completed: ['email', 'push'], recap: ['email', 'push'], reactivation: ['email', 'push'], streak_reminder: ['email', 'push'] });
    const examples = bodyExamples('PATCH /users/{id}/preferences');
    expect(examples).toHaveLength(4);
    for (const body of examples) expect((await call('PATCH /users/{id}/preferences', { params: { id }, body })).status).toBe(200);
    const after = await call('GET /users/{id}/preferences', { params: { id } });
    expect(after.body).toEqual({
      notifications: { achievement_completed: ['email', 'push'], recap: ['email'], reactivation: ['email', 'push'], streak_reminder: [] },
      streak: { enabled: true, evaluationMode: 'OR', metrics: [{ key: 'words-written', threshold: 500 }] },
    });
    expect((await call('PATCH /users/{id}/preferences', { params: { id }, body: { streak: { enabled: false } } })).body.streak.enabled).toBe(false);
    expect((await call('GET /users/{id}/preferences', { params: { id: 'ghost' } })).status).toBe(404);
    expect((await call('PATCH /users/{id}/preferences', { params: { id: 'ghost' }, body: { notifications: { recap: [] } } })).status).toBe(404);
    expect((await call('PATCH /users/{id}/preferences', { params: { id }, body: { notifications: { recap: ['sms'] } } })).status).toBe(422);
    expect((await call('PATCH /users/{id}/preferences', { params: { id }, rawBody: 'nope' })).status).toBe(422);
    // Streak customization off: 403, as documented.
    await call('POST /users', { via: plainHandler, body: { id } });
    expect((await call('PATCH /users/{id}/preferences', { via: plainHandler, params: { id }, body: examples[3] })).status).toBe(403);
    expect((await call('PATCH /users/{id}/preferences', { via: plainHandler, params: { id }, body: { streak: { enabled: false } } })).status).toBe(200);
  });

  it('user metrics, summaries, achievements and streak (200, 404, 422)', async () => {
    const id = 'userId';
    const metrics = await call('GET /users/{id}/metrics', { params: { id } });
    expect(metrics.body.map((m: Json) => m.key)).toEqual(['words-written', 'lessons', 'key']);
    expect((await call('GET /users/{id}/metrics', { params: { id: 'ghost' } })).status).toBe(404);
    expect((await call('GET /users/{id}/metrics/{key}', { params: { id, key: example('GET /users/{id}/metrics/{key}', 'key') } })).status).toBe(200);
    expect((await call('GET /users/{id}/metrics/{key}', { params: { id, key: 'nope' } })).status).toBe(404);

    const summary = 'GET /users/{id}/metrics/{key}/event-summary';
    const q = { aggregation: example(summary, 'aggregation'), startDate: example(summary, 'startDate'), endDate: example(summary, 'endDate') };
    expect((await call(summary, { params: { id, key: example(summary, 'key') }, query: q })).status).toBe(200);
    expect((await call(summary, { params: { id, key: 'words-written' }, query: { aggregation: 'weekly', startDate: '2026-01-01', endDate: '2026-01-31' } })).body.length).toBeGreaterThan(0);
    expect((await call(summary, { params: { id, key: 'words-written' }, query: { aggregation: 'daily' } })).status).toBe(422);
    expect((await call(summary, { params: { id, key: 'words-written' }, query: { ...q, aggregation: 'hourly' } })).status).toBe(422);
    expect((await call(summary, { params: { id: 'ghost', key: 'words-written' }, query: q })).status).toBe(404);

    const achievements = 'GET /users/{id}/achievements';
    expect((await call(achievements, { params: { id } })).body.length).toBeGreaterThan(0);
    expect((await call(achievements, { params: { id }, query: { includeIncomplete: example(achievements, 'includeIncomplete') } })).body.length).toBe(6);
    expect((await call(achievements, { params: { id: 'ghost' } })).status).toBe(404);

    const streak = await call('GET /users/{id}/streak', { params: { id } });
    expect(streak.body).toMatchObject({ length: 4, pauses: [{ start: '2026-01-10', end: '2026-01-12' }] });
    expect(streak.body.streakHistory).toHaveLength(7);
    expect((await call('GET /users/{id}/streak', { params: { id }, query: { historyPeriods: '3' } })).body.streakHistory).toHaveLength(3);
    expect((await call('GET /users/{id}/streak', { params: { id }, query: { historyPeriods: '-1' } })).status).toBe(422);
    expect((await call('GET /users/{id}/streak', { params: { id: 'ghost' } })).status).toBe(404);
  });

  it('GET /streaks with the example (200); without userIds or with more than 100, 422', async () => {
    // The example is one comma-separated string although the schema is an array: both forms are taken.
    const list = await call('GET /streaks', { query: { userIds: example('GET /streaks', 'userIds') } });
    expect(list.body.map((s: Json) => s.userId)).toEqual(['user-123', 'user-456']);
    expect((await call('GET /streaks', { query: { userIds: ['userId', 'user-123'] } })).body).toHaveLength(2);
    expect((await call('GET /streaks')).status).toBe(422);
    expect((await call('GET /streaks', { query: { userIds: Array.from({ length: 101 }, (_, i) => `u${i}`).join(',') } })).status).toBe(422);
  });

  it('user points, boosts, points summaries (200, 404, 422)', async () => {
    const id = 'userId';
    const key = 'points-system-key';
    const points = await call('GET /users/{id}/points/{key}', { params: { id, key }, query: { awards: '100' } });
    expect(points.body.awards.length).toBeGreaterThan(3);
    const boosted = points.body.awards.find((a: Json) => Array.isArray(a.boosts) && (a.boosts as unknown[]).length > 0);
    expect(boosted.boosts[0]).toMatchObject({ status: 'active', rounding: expect.any(String), start: expect.any(String) });
    expect(points.body.awards[0].trigger).toMatchObject({ status: 'active', userAttributes: expect.any(Array), created: expect.any(String), updated: expect.any(String) });
    expect((await call('GET /users/{id}/points/{key}', { params: { id, key: 'energy' } })).status).toBe(200);
    for (const awards of ['0', '101', 'x']) expect((await call('GET /users/{id}/points/{key}', { params: { id, key }, query: { awards } })).status).toBe(422);
    expect((await call('GET /users/{id}/points/{key}', { params: { id: 'ghost', key } })).status).toBe(404);
    expect((await call('GET /users/{id}/points/{key}', { params: { id, key: 'nope' } })).status).toBe(404);

    const boosts = await call('GET /users/{id}/points/{key}/boosts', { params: { id, key } });
    expect(boosts.body.map((b: Json) => b.name)).toEqual(['Launch week', 'Welcome back']);
    expect((await call('GET /users/{id}/points/{key}/boosts', { params: { id: 'ghost', key } })).status).toBe(404);
    expect((await call('GET /users/{id}/points/{key}/boosts', { params: { id, key: 'nope' } })).status).toBe(404);

    const summary = 'GET /users/{id}/points/{key}/event-summary';
    const q = { aggregation: example(summary, 'aggregation'), startDate: example(summary, 'startDate'), endDate: example(summary, 'endDate') };
    expect((await call(summary, { params: { id, key }, query: q })).status).toBe(200);
    expect((await call(summary, { params: { id, key }, query: { aggregation: 'monthly', startDate: '2025-06-01', endDate: '2026-01-31' } })).status).toBe(200);
    expect((await call(summary, { params: { id, key }, query: { ...q, startDate: 'yesterday' } })).status).toBe(422);
    expect((await call(summary, { params: { id, key: 'nope' }, query: q })).status).toBe(404);
  });

  it('user leaderboards and wrapped with the examples (200, 404, 422)', async () => {
    const op = 'GET /users/{id}/leaderboards/{key}';
    const id = example(op, 'id');
    const key = example(op, 'key');
    expect((await call(op, { params: { id, key } })).status).toBe(200);
    expect((await call(op, { params: { id, key }, query: { run: example(op, 'run'), numEvents: example(op, 'numEvents') } })).status).toBe(200);
    for (const board of ['xp-board', 'office-hours', 'streaks']) expect((await call(op, { params: { id: 'userId', key: board } })).status).toBe(200);
    expect((await call(op, { params: { id, key }, query: { numEvents: '101' } })).status).toBe(422);
    expect((await call(op, { params: { id, key }, query: { run: '2025-13-45' } })).status).toBe(422);
    expect((await call(op, { params: { id: 'ghost', key } })).status).toBe(404);
    expect((await call(op, { params: { id, key: 'nope' } })).status).toBe(404);

    const wrapped = 'GET /users/{id}/wrapped';
    expect((await call(wrapped, { params: { id: example(wrapped, 'id') }, query: { year: example(wrapped, 'year') } })).body.activity.daysActive).toBe(1);
    expect((await call(wrapped, { params: { id: 'userId' } })).status).toBe(200);
    expect((await call(wrapped, { params: { id: 'userId' }, query: { year: '2099' } })).status).toBe(422);
    expect((await call(wrapped, { params: { id: 'ghost' } })).status).toBe(404);
  });

  it('achievements: list with userAttributes (honoured), complete with the example (201, 404, 422)', async () => {
    const all = await call('GET /achievements');
    expect(all.body.map((a: Json) => a.key)).toEqual(['finish-onboarding', 'first-words', 'mobile-writer', 'premium-writer', 'streak-3', 'all-done']);
    const premium = await call('GET /achievements', { query: { userAttributes: example('GET /achievements', 'userAttributes') } });
    expect(premium.body.map((a: Json) => a.key)).toContain('premium-writer');
    const basic = await call('GET /achievements', { query: { userAttributes: 'plan-type:basic' } });
    expect(basic.body.map((a: Json) => a.key)).not.toContain('premium-writer');
    expect((await call('GET /achievements', { query: { userAttributes: 'colour:red' } })).status).toBe(422);
    expect((await call('GET /achievements', { query: { userAttributes: 'no-colon' } })).status).toBe(422);

    const op = 'POST /achievements/{key}/complete';
    const done = await call(op, { params: { key: example(op, 'key') }, body: bodyExamples(op)[0] });
    expect(done).toMatchObject({ status: 201, body: { achievement: { key: 'finish-onboarding' } } });
    expect((await call(op, { params: { key: 'nope' }, body: { user: { id: 'user-id' } } })).status).toBe(404);
    expect((await call(op, { params: { key: 'first-words' }, body: { user: { id: 'user-id' } } })).status).toBe(422);
    expect((await call(op, { params: { key: 'finish-onboarding' }, body: {} })).status).toBe(422);
    expect((await call(op, { params: { key: 'finish-onboarding' }, rawBody: '{' })).status).toBe(422);
  });

  it('points systems: system, boosts, levels, level summary, summary with userAttributes (200, 404, 422)', async () => {
    const key = 'points-system-key';
    const system = await call('GET /points/{key}', { params: { key } });
    expect(system.body.triggers.map((t: Json) => t.status)).toEqual(['active', 'active', 'active', 'active', 'active']);
    expect(system.body.triggers[1].userAttributes).toEqual([{ key: 'plan-type', value: 'premium' }]);
    expect((await call('GET /points/{key}', { params: { key: 'nope' } })).status).toBe(404);

    const boosts = await call('GET /points/{key}/boosts', { params: { key } });
    expect(boosts.body.map((b: Json) => [b.name, b.status])).toEqual([['Launch week', 'active'], ['Welcome back', 'active']]);
    expect((await call('GET /points/{key}/boosts', { params: { key }, query: { includeFinished: 'true' } })).body).toHaveLength(3);
    expect((await call('GET /points/{key}/boosts', { params: { key: 'nope' } })).status).toBe(404);

    expect((await call('GET /points/{key}/levels', { params: { key } })).body).toHaveLength(2);
    expect((await call('GET /points/{key}/levels', { params: { key: 'energy' } })).body).toEqual([]);
    expect((await call('GET /points/{key}/levels', { params: { key: 'nope' } })).status).toBe(404);
    expect((await call('GET /points/{key}/level-summary', { params: { key } })).body).toHaveLength(2);
    expect((await call('GET /points/{key}/level-summary', { params: { key: 'energy' } })).status).toBe(422);
    expect((await call('GET /points/{key}/level-summary', { params: { key: 'nope' } })).status).toBe(404);

    const op = 'GET /points/{key}/summary';
    const everyone = await call(op, { params: { key } });
    expect(everyone.body).toHaveLength(11);
    const filtered = await call(op, { params: { key }, query: { userAttributes: example(op, 'userAttributes') } });
    const count = (rows: { users: number }[]) => rows.reduce((n, r) => n + r.users, 0);
    expect(count(filtered.body)).toBe(1); // only user-123 is premium in us-east
    expect(count(filtered.body)).toBeLessThan(count(everyone.body));
    expect((await call(op, { params: { key }, query: { userAttributes: 'colour:red' } })).status).toBe(422);
    expect((await call(op, { params: { key: 'nope' } })).status).toBe(404);
  });

  it('leaderboards: list (200, with status, startTime, endTime, breakdownAttribute), one board with every example parameter (200, 404, 422)', async () => {
    const list = await call('GET /leaderboards');
    expect(list.body.map((b: Json) => [b.key, b.status])).toEqual([['weekly-words', 'active'], ['xp-board', 'active'], ['office-hours', 'active'], ['next-year', 'scheduled']]);
    expect(list.body[0]).toMatchObject({ breakdownAttribute: 'city', startTime: null, endTime: null });
    expect(list.body[2]).toMatchObject({ breakdownAttribute: null, startTime: '09:00', endTime: '17:00' });
    expect((await call('GET /leaderboards', { query: { includeFinished: 'true' } })).body).toHaveLength(5);

    const op = 'GET /leaderboards/{key}';
    const key = example(op, 'key');
    // The example board is broken down by city: `userAttributes` "is required" for it (the parameter's
    // description), so each other example parameter goes with the userAttributes example; without it, 422.
    const userAttributes = example(op, 'userAttributes');
    const board = await call(op, { params: { key }, query: { userAttributes } });
    expect(board.body).toMatchObject({ key, status: 'active', breakdownAttribute: 'city', rankings: expect.any(Array) });
    for (const name of ['offset', 'limit', 'run', 'userId']) expect((await call(op, { params: { key }, query: { userAttributes, [name]: example(op, name) } })).status).toBe(200);
    expect((await call(op, { params: { key }, query: { userId: example(op, 'userId') } })).status).toBe(200);
    expect((await call(op, { params: { key } })).status).toBe(422);
    expect((await call(op, { params: { key }, query: { userAttributes: 'city:London' } })).body.rankings.map((r: Json) => r.userId)).toEqual(['userId', 'user-123']);
    for (const board of ['xp-board', 'office-hours', 'streaks', 'next-year']) expect((await call(op, { params: { key: board } })).status).toBe(200);
    expect((await call(op, { params: { key }, query: { userAttributes, offset: 'x' } })).status).toBe(422);
    expect((await call(op, { params: { key }, query: { userAttributes, limit: '-1' } })).status).toBe(422);
    expect((await call(op, { params: { key }, query: { userAttributes, run: 'soon' } })).status).toBe(422);
    expect((await call(op, { params: { key }, query: { userAttributes: 'colour:red' } })).status).toBe(422);
    expect((await call(op, { params: { key: 'nope' } })).status).toBe(404);
  });

  it('401 without or with a wrong key, on every operation', async () => {
    for (const op of OPERATIONS) {
      const [method, template] = op.split(' ') as [string, string];
      const params = Object.fromEntries([...template.matchAll(/\{(\w+)\}/g)].map((m) => [m[1] as string, 'x']));
      const withBody = method === 'GET' ? {} : { body: {} };
      expect((await call(op, { params, key: null, ...withBody })).status).toBe(401);
      expect((await call(op, { params, key: 'wrong', ...withBody })).status).toBe(401);
    }
  });

  it('every operation of the spec was driven to a documented success, and no unexpected error escaped', () => {
    expect(OPERATIONS).toHaveLength(27);
    expect(OPERATIONS.filter((op) => !succeeded.has(op))).toEqual([]);
    expect(unexpected).toEqual([]);
  });
});
