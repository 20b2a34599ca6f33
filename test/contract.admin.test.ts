/**
 * Issue 16, admin API: the subset of the hosted service's `admin.json` (OpenAPI 1.21.1, vendored in
 * test/fixtures/openapi) that maps to engine operations, driven through `createHttpHandler` (admin base path
 * `/admin/v1`) over a memory-store engine, with the spec's own example requests (request-body examples and
 * parameters' examples) where it has them. Every answer's status must be one the operation documents and its
 * body must validate (Ajv 2020 + formats) against that response's schema. The configuration's ids are set
 * to the examples' UUIDs where the examples name configured entities.
 *
 * Configuration writes answer 405 (not a status admin.json lists: configuration is code in Laurel) with an
 * `AdminErrorBody`; one check per such operation. Not served (404): application API keys and tenants.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { createHttpHandler } from '../src/http.js';
import { createMemoryStore } from '../src/memory.js';
import { openapi, type Json } from './openapi.js';


const { ajv, operations: OPERATIONS, operation, pointer, bodyExamples } = openapi('admin.json');

/** The operations served. */
const SERVED = [
  'POST /streaks/freezes',
  'POST /streaks/restore',
  'POST /streaks/pauses',
  'DELETE /streaks/pauses',
  'POST /metrics/events',
  'GET /points/{systemId}/boosts',
  'POST /points/{systemId}/boosts',
  'PATCH /points/{systemId}/boosts',
  'DELETE /points/{systemId}/boosts',
  'GET /points/{systemId}/boosts/{id}',
  'GET /metrics',
  'GET /metrics/{id}',
  'GET /attributes',
  'GET /attributes/{id}',
  'GET /points',
  'GET /points/{id}',
  'GET /points/{systemId}/levels',
  'GET /points/{systemId}/levels/{id}',
  'GET /points/{systemId}/triggers',
  'GET /points/{systemId}/triggers/{id}',
  'GET /leaderboards',
  'GET /leaderboards/{id}',
];
/** Configuration writes: 405. */
const CONFIG_WRITES = ['/metrics', '/attributes', '/points', '/points/{systemId}/levels', '/points/{systemId}/triggers', '/leaderboards'].flatMap((p) => ['POST', 'PATCH', 'DELETE'].map((m) => `${m} ${p}`));
/** Not served (404): they have no engine operation here. */
const NOT_SERVED = ['POST /application-api-keys', 'DELETE /application-api-keys', 'GET /tenants', 'POST /tenants', 'PATCH /tenants', 'DELETE /tenants', 'GET /tenants/{id}'];

/** A parameter's example in the spec (`example`, or the first of `examples`), as a query value. */
const example = (op: string, name: string): string | string[] => {
  const p = (operation(op).parameters ?? []).find((x) => x.name === name);
  const value = p?.example ?? Object.values((p?.examples ?? {}) as Record<string, { value: unknown }>)[0]?.value;
  if (value === undefined) throw new Error(`${op}: no example for ${name}`);
  return Array.isArray(value) ? value.map(String) : String(value);
};
const one = (v: string | string[]) => (Array.isArray(v) ? (v[0] as string) : v);

const EX = '550e8400-e29b-41d4-a716-446655440000';
const EX2 = '660f9500-f30c-42e5-b827-557766550001';
const config = defineConfig({
  metrics: [
    { key: 'words-written', name: 'Words written', id: EX },
    { key: 'lessons', name: 'Lessons' },
  ],
  attributes: [
    { key: 'department', name: 'Department', type: 'user', id: EX },
    { key: 'role', name: 'Role', type: 'user' },
    { key: 'plan-type', name: 'Plan', type: 'user' },
    { key: 'city', name: 'City', type: 'user' },
    { key: 'category', name: 'Category', type: 'event' },
    { key: 'source', name: 'Source', type: 'event' },
  ],
  achievements: [{ key: 'finish-onboarding', name: 'Finish onboarding', trigger: 'api' }],
  streak: { frequency: 'daily', freezes: { initial: 1, max: 3 } },
  pointsSystems: [
    {
      key: 'xp',
      id: EX,
      name: 'XP',
      description: 'Experience',
      badgeUrl: 'https://example.com/xp.png',
      levels: [
        { key: 'bronze', name: 'Bronze', points: 0, id: EX2 },
        { key: 'silver', name: 'Silver', points: 100, description: 'Second' },
      ],
      triggers: [
        { key: 'per-word', id: EX2, type: 'metric', metricKey: 'words-written', metricThreshold: 100, points: 10, eventAttributes: { category: 'writing' }, userAttributes: { 'plan-type': 'premium' } },
        { key: 'onboarded', type: 'achievement', achievementKey: 'finish-onboarding', points: 50 },
        { key: 'streak', type: 'streak', streakLengthThreshold: 2, points: 20 },
        { key: 'signup', type: 'user_creation', points: 5 },
        { key: 'refill', type: 'time', timeUnit: 'hour', timeInterval: 6, points: 1 },
      ],
      boosts: [{ key: 'launch', id: EX2, name: 'Launch week', multiplier: 2, start: '2026-01-05', end: '2026-01-11', rounding: 'up', userAttributes: { 'plan-type': 'premium' } }],
    },
    { key: 'coins', name: 'Coins', maxPoints: 500, triggers: [{ key: 'start', type: 'user_creation', points: 5 }] },
  ],
  leaderboards: [
    { key: 'weekly-words', id: '550e8400-e29b-41d4-a716-446655440100', name: 'Weekly words', rankBy: 'metric', metricKey: 'words-written', start: '2025-01-01', runUnit: 'day', runInterval: 7, breakdownAttributes: ['city'], maxParticipants: 100, description: 'Words' },
    { key: 'xp-board', name: 'XP', rankBy: 'points', pointsSystemKey: 'xp', start: '2025-01-01', startTime: '09:00', endTime: '17:00' },
    { key: 'streaks', name: 'Streaks', rankBy: 'streak', start: '2025-01-01', end: '2025-12-31' },
  ],
});

const KEY = 'admin-key';
let now = new Date('2026-01-06T12:00:00Z');
const at = (iso: string) => {
  now = new Date(iso);
};
/**
 * Set (only) by contract.admin.tenant.test.ts: the whole contract again with the spec's `Tenant-ID` example on
 * every request, over that tenant's engine; the default tenant then holds nothing.
 */
const TENANT = process.env.LAUREL_CONTRACT_TENANT;
const root = createEngine({ config, store: createMemoryStore(), clock: () => now });
const engine = TENANT ? root.tenant(TENANT) : root;
const unexpected: unknown[] = [];
const handler = createHttpHandler(root, { apiKeys: [KEY], onError: (e) => unexpected.push(e) });

const succeeded = new Set<string>();

interface Call {
  params?: Record<string, string>;
  query?: Record<string, string | string[]>;
  body?: unknown;
  rawBody?: string;
  key?: string | null;
}

async function send(op: string, c: Call = {}, base = '/admin/v1'): Promise<Response> {
  const [method, template] = op.split(' ') as [string, string];
  const path = template.replace(/\{(\w+)\}/g, (_, name: string) => {
    const v = c.params?.[name];
    if (v === undefined) throw new Error(`${op}: no value for ${name}`);
    return encodeURIComponent(v);
  });
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(c.query ?? {})) for (const x of Array.isArray(v) ? v : [v]) qs.append(k, x);
  const headers: Record<string, string> = { ...(c.key === null ? {} : { 'x-api-key': c.key ?? KEY }), ...(c.body !== undefined || c.rawBody !== undefined ? { 'content-type': 'application/json' } : {}), ...(TENANT ? { 'tenant-id': TENANT } : {}) };
  return handler(new Request(`http://laurel.test${base}${path}${qs.size > 0 ? `?${qs}` : ''}`, { method, headers, ...(c.rawBody !== undefined ? { body: c.rawBody } : c.body !== undefined ? { body: JSON.stringify(c.body) } : {}) }));
}

/** Calls one operation; checks its status is documented and its body validates; answers both. */
async function call(op: string, c: Call = {}): Promise<{ status: number; body: any }> {
  const res = await send(op, c);
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

const systemId = one(example('GET /points/{systemId}/boosts', 'systemId'));

beforeAll(async () => {
  // user-123 and user-456 (the examples' users) have streaks; `lapsed` loses a two-day streak.
  for (const day of ['2026-01-01', '2026-01-02']) {
    at(`${day}T10:00:00Z`);
    await engine.recordEvent('words-written', { user: { id: 'lapsed' }, value: 1 });
  }
  for (const day of ['2026-01-04', '2026-01-05', '2026-01-06']) {
    at(`${day}T10:00:00Z`);
    await engine.recordEvent('words-written', { user: { id: 'user-123', attributes: { 'plan-type': 'premium', city: 'London' } }, value: 120 });
    await engine.recordEvent('words-written', { user: { id: 'user-456' }, value: 10 });
  }
  at('2026-01-06T12:00:00Z');
  await engine.recordEvent('lessons', { user: { id: 'lapsed' }, value: 1 });
});

describe('the admin API subset, with the spec\'s examples, answers documented statuses and valid bodies', () => {
  it('POST /streaks/freezes: the example (201), over the maximum (warning), unknown users (200, error), bad bodies (400)', async () => {
    const op = 'POST /streaks/freezes';
    const [body] = bodyExamples(op);
    const first = await call(op, { body });
    expect(first).toEqual({ status: 201, body: { issues: [] } });
    expect((await engine.getStreak('user-123')).freezes).toBe(3);
    const again = await call(op, { body });
    expect(again).toEqual({ status: 201, body: { issues: [{ userId: 'user-123', severity: 'warning', message: 'Would exceed maximum freeze limit' }] } });
    const ghost = await call(op, { body: { freezes: [{ userId: 'ghost' }, { userId: 'user-123' }] } });
    expect(ghost.status).toBe(200);
    expect(ghost.body.issues).toEqual([
      { userId: 'ghost', severity: 'error', message: 'User does not exist' },
      { userId: 'user-123', severity: 'warning', message: 'Would exceed maximum freeze limit' },
    ]);
    expect((await call(op, { body: { freezes: [] } })).status).toBe(400);
    expect((await call(op, { body: { freezes: 'all' } })).status).toBe(400);
    expect((await call(op, { body: { freezes: Array.from({ length: 101 }, () => ({ userId: 'user-123' })) } })).status).toBe(400);
    expect((await call(op, { rawBody: '{"freezes":' })).status).toBe(400);
  });

  it('POST /streaks/restore: the example (200 with warnings), a lost streak (201), unknown users, bad bodies (400)', async () => {
    const op = 'POST /streaks/restore';
    const [body] = bodyExamples(op);
    const example = await call(op, { body });
    expect(example.status).toBe(200);
    expect(example.body.restoredUsers).toEqual([]);
    expect(example.body.issues.map((i: Json) => [i.userId, i.severity])).toEqual([['user-123', 'warning'], ['user-456', 'warning']]);
    const restored = await call(op, { body: { users: [{ id: 'lapsed' }, { id: 'ghost' }] } });
    expect(restored).toEqual({ status: 201, body: { restoredUsers: ['lapsed'], issues: [{ userId: 'ghost', severity: 'error', message: 'User does not exist' }] } });
    expect((await call(op, { body: {} })).status).toBe(400);
  });

  it('POST and DELETE /streaks/pauses: the examples (201, 200), per-item errors, bad bodies (422)', async () => {
    const op = 'POST /streaks/pauses';
    const [body] = bodyExamples(op);
    const created = await call(op, { body });
    expect(created.status).toBe(201);
    expect(created.body.issues).toEqual([]);
    expect(created.body.created.map((p: Json) => [p.userId, p.start, p.end, p.status])).toEqual([
      ['user-123', '2026-08-20', '2026-08-27', 'active'],
      ['user-456', '2026-09-01', '2026-09-07', 'active'],
    ]);
    const failed = await call(op, { body: { pauses: [{ userId: 'ghost', start: '2026-08-20', end: '2026-08-27' }, { userId: 'user-123', start: '2020-01-01', end: '2020-01-02' }] } });
    expect(failed.status).toBe(200);
    expect(failed.body.issues.map((i: Json) => [i.userId, i.severity])).toEqual([['ghost', 'error'], ['user-123', 'error']]);
    expect((await call(op, { body: { pauses: [] } })).status).toBe(422);
    expect((await call(op, { rawBody: 'nope' })).status).toBe(422);

    const del = 'DELETE /streaks/pauses';
    const missing = await call(del, { query: { ids: example(del, 'ids') } });
    expect(missing.status).toBe(200);
    expect(missing.body).toEqual({ deleted: [], issues: (example(del, 'ids') as string[]).map((id) => ({ id, severity: 'error', message: 'Streak pause not found by ID' })) });
    const [a, b] = created.body.created.map((p: Json) => p.id as string);
    // Found by reading users (no hint), and with Laurel's `userId` hint.
    expect((await call(del, { query: { ids: a } })).body).toEqual({ deleted: [{ id: a }], issues: [] });
    expect((await call(del, { query: { ids: `${b},${a}`, userId: 'user-456' } })).body).toEqual({ deleted: [{ id: b }], issues: [{ id: a, severity: 'error', message: 'Streak pause not found by ID' }] });
    expect((await engine.getStreak('user-123')).pauses).toEqual([]);
    expect((await call(del)).status).toBe(422);
  });

  it('POST /metrics/events: the example (202, accepted 1), a replay, per-event failures, unknown metric (404), bad bodies (400)', async () => {
    const op = 'POST /metrics/events';
    const [body] = bodyExamples(op);
    expect(await call(op, { body })).toEqual({ status: 202, body: { accepted: 1, issues: [] } });
    expect((await engine.getUser('18')).attributes).toEqual({ department: 'engineering', role: 'developer' });
    expect((await engine.getUserMetric('18', 'words-written')).current).toBe(750);
    // The same idempotency key again: accepted, counted once.
    expect((await call(op, { body })).body.accepted).toBe(1);
    expect((await engine.getUserMetric('18', 'words-written')).current).toBe(750);
    const mixed = await call(op, {
      body: [
        { key: 'lessons', user: { id: '18' }, value: 1, idempotencyKey: 'l-1' },
        { key: 'lessons', user: { id: '18' }, value: 'many' },
        { key: 'lessons', user: { id: '19' }, value: 2, attributes: { colour: 'red' } },
        { key: 'words-written', user: 'nobody', value: 1 },
        { key: 'lessons', user: { id: '19' }, value: 2 },
      ],
    });
    expect(mixed.status).toBe(202);
    expect(mixed.body.accepted).toBe(2);
    expect(mixed.body.issues.map((i: Json) => i.index)).toEqual([1, 2, 3]);
    expect((await call(op, { body: [{ key: 'nope', user: { id: '18' }, value: 1 }] })).status).toBe(404);
    expect((await call(op, { body: [] })).status).toBe(400);
    expect((await call(op, { body: { key: 'lessons' } })).status).toBe(400);
    expect((await call(op, { body: [{ user: { id: '18' }, value: 1 }] })).status).toBe(400);
    expect((await call(op, { body: Array.from({ length: 1001 }, (_, i) => ({ key: 'lessons', user: { id: `u${i}` }, value: 1 })) })).status).toBe(400);
    // A full batch of 1 000 is taken (over the application API's 64 KiB body limit).
    const full = await call(op, { body: Array.from({ length: 1000 }, (_, i) => ({ key: 'lessons', user: { id: `batch-${i % 50}` }, value: 1, idempotencyKey: `k-${i}` })) });
    expect(full).toEqual({ status: 202, body: { accepted: 1000, issues: [] } });
  });

  it('points boosts: list, create (each example), get, update, delete (200, 201, 404, 422)', async () => {
    const list = 'GET /points/{systemId}/boosts';
    const listed = await call(list, { params: { systemId } });
    expect(listed.body).toEqual([{ id: EX2, name: 'Launch week', status: 'active', start: '2026-01-05', end: '2026-01-11', multiplier: 2, rounding: 'up', userId: null, userAttributes: [{ attributeId: config.attributes[2]!.id, attributeValue: 'premium' }] }]);
    expect((await call(list, { params: { systemId: 'nope' } })).status).toBe(404);

    const create = 'POST /points/{systemId}/boosts';
    const [userBoost, globalBoost, attributeBoost] = bodyExamples(create);
    const created = await call(create, { params: { systemId }, body: userBoost });
    expect(created.status).toBe(201);
    expect(created.body.created).toEqual([{ id: expect.any(String), name: 'Double XP Weekend', status: 'finished', start: '2024-01-01', end: '2024-01-03', multiplier: 2, rounding: 'down', userId: 'user-123' }]);
    for (const b of [globalBoost, attributeBoost]) {
      const refused = await call(create, { params: { systemId }, body: b });
      expect(refused.status).toBe(200);
      expect(refused.body).toEqual({ created: [], issues: [{ index: 0, severity: 'error', message: expect.stringContaining('configuration in Laurel') }] });
    }
    const current = await call(create, { params: { systemId: 'xp' }, body: [{ userId: 'user-456', name: 'Welcome back', start: '2026-01-06', multiplier: 1.5 }, { userId: 'ghost', name: 'G', start: '2026-01-06', multiplier: 2 }, { userId: 'user-456', name: 'Bad', start: '2026-01-06', multiplier: 1 }] });
    expect(current.status).toBe(201);
    expect(current.body.created).toEqual([expect.objectContaining({ name: 'Welcome back', status: 'active', end: null, userId: 'user-456' })]);
    expect(current.body.issues.map((i: Json) => [i.index, i.message])).toEqual([[1, 'User does not exist'], [2, expect.stringContaining('multiplier')]]);
    expect((await call(create, { params: { systemId }, body: {} })).status).toBe(422);
    const mine = current.body.created[0].id as string;

    const get = 'GET /points/{systemId}/boosts/{id}';
    expect((await call(get, { params: { systemId, id: one(example(get, 'id')) } })).body).toMatchObject({ id: EX2, name: 'Launch week' });
    expect((await call(get, { params: { systemId, id: mine } })).body).toMatchObject({ id: mine, userId: 'user-456', status: 'active' });
    expect((await call(get, { params: { systemId, id: 'nope' } })).status).toBe(404);
    expect((await call(get, { params: { systemId: 'coins', id: mine } })).status).toBe(404);

    const patch = 'PATCH /points/{systemId}/boosts';
    const [patchExample] = bodyExamples(patch);
    expect(await call(patch, { params: { systemId }, body: patchExample })).toEqual({ status: 200, body: { updated: [], issues: [{ id: EX, severity: 'error', message: 'Points boost not found by ID' }] } });
    const updated = await call(patch, { params: { systemId }, body: [{ id: mine, name: 'Updated Boost Name', multiplier: 3 }, { id: EX2, multiplier: 3 }, { id: mine, multiplier: 500 }] });
    expect(updated.status).toBe(200);
    // The engine has no update: a boost is replaced (delete + create, atomically) and comes back under a new id.
    expect(updated.body.updated).toEqual([{ id: expect.any(String), name: 'Updated Boost Name', status: 'active', start: '2026-01-06', end: null, multiplier: 3, rounding: 'down', userId: 'user-456' }]);
    expect(updated.body.issues.map((i: Json) => i.id)).toEqual([EX2, mine]);
    const replaced = updated.body.updated[0].id as string;
    expect(replaced).not.toBe(mine);
    expect((await engine.getUserBoosts('user-456', 'xp')).map((b) => [b.id, b.multiplier])).toEqual([[replaced, 3]]);
    expect((await call(get, { params: { systemId, id: mine } })).status).toBe(404);

    const del = 'DELETE /points/{systemId}/boosts';
    const missing = await call(del, { params: { systemId }, query: { ids: one(example(del, 'ids')) } });
    expect(missing.body.deleted).toEqual([]);
    expect(missing.body.issues).toHaveLength(2);
    const deleted = await call(del, { params: { systemId }, query: { ids: [replaced, EX2] } });
    expect(deleted.body).toEqual({ deleted: [{ id: replaced }], issues: [{ id: EX2, severity: 'error', message: expect.stringContaining('configuration in Laurel') }] });
    expect((await call(get, { params: { systemId, id: replaced } })).status).toBe(404);
    expect((await call(del, { params: { systemId } })).status).toBe(422);
  });

  it('read-only configuration: metrics, attributes, points systems, levels, triggers, leaderboards (200, 404, 422)', async () => {
    const q = (op: string) => ({ limit: one(example(op, 'limit')), skip: one(example(op, 'skip')) });
    const metrics = await call('GET /metrics', { query: q('GET /metrics') });
    expect(metrics.body).toEqual([
      { id: EX, name: 'Words written', key: 'words-written', unitType: 'number', units: '' },
      { id: expect.any(String), name: 'Lessons', key: 'lessons', unitType: 'number', units: '' },
    ]);
    expect((await call('GET /metrics', { query: { limit: '1', skip: '1' } })).body.map((m: Json) => m.key)).toEqual(['lessons']);
    expect((await call('GET /metrics', { query: { limit: '0' } })).status).toBe(422);
    expect((await call('GET /metrics/{id}', { params: { id: one(example('GET /metrics/{id}', 'id')) } })).body.key).toBe('words-written');
    expect((await call('GET /metrics/{id}', { params: { id: 'lessons' } })).body.key).toBe('lessons');
    expect((await call('GET /metrics/{id}', { params: { id: 'nope' } })).status).toBe(404);

    expect((await call('GET /attributes', { query: q('GET /attributes') })).body).toHaveLength(6);
    expect((await call('GET /attributes/{id}', { params: { id: one(example('GET /attributes/{id}', 'id')) } })).body).toEqual({ id: EX, name: 'Department', key: 'department', type: 'user' });
    expect((await call('GET /attributes/{id}', { params: { id: 'nope' } })).status).toBe(404);

    const systems = await call('GET /points', { query: q('GET /points') });
    expect(systems.body).toEqual([
      { id: EX, name: 'XP', key: 'xp', description: 'Experience', status: 'active', badge: { url: 'https://example.com/xp.png' }, maxPoints: null },
      { id: expect.any(String), name: 'Coins', key: 'coins', description: '', status: 'active', badge: null, maxPoints: 500 },
    ]);
    expect((await call('GET /points/{id}', { params: { id: one(example('GET /points/{id}', 'id')) } })).body.key).toBe('xp');
    expect((await call('GET /points/{id}', { params: { id: 'nope' } })).status).toBe(404);

    const levels = 'GET /points/{systemId}/levels';
    expect((await call(levels, { params: { systemId }, query: q(levels) })).body.map((l: Json) => [l.key, l.description])).toEqual([['bronze', ''], ['silver', 'Second']]);
    expect((await call(levels, { params: { systemId: 'coins' } })).body).toEqual([]);
    expect((await call(levels, { params: { systemId: 'nope' } })).status).toBe(404);
    const level = 'GET /points/{systemId}/levels/{id}';
    expect((await call(level, { params: { systemId, id: one(example(level, 'id')) } })).body).toEqual({ id: EX2, name: 'Bronze', key: 'bronze', points: 0, description: '', badge: null });
    expect((await call(level, { params: { systemId, id: 'nope' } })).status).toBe(404);

    const triggers = 'GET /points/{systemId}/triggers';
    const listed = await call(triggers, { params: { systemId } });
    expect(listed.body.map((t: Json) => t.type)).toEqual(['metric', 'achievement', 'streak', 'user_creation', 'time']);
    expect(listed.body[4]).toMatchObject({ timeUnit: 'hours', timeInterval: 6 });
    expect((await call(triggers, { params: { systemId }, query: { limit: '2', skip: '3' } })).body.map((t: Json) => t.type)).toEqual(['user_creation', 'time']);
    const trigger = 'GET /points/{systemId}/triggers/{id}';
    expect((await call(trigger, { params: { systemId, id: one(example(trigger, 'id')) } })).body).toEqual({
      id: EX2,
      type: 'metric',
      points: 10,
      status: 'active',
      userAttributes: [{ attributeId: config.attributes[2]!.id, attributeValue: 'premium' }],
      blockIfOutOfPoints: false,
      metricId: EX,
      metricThreshold: 100,
      eventAttributes: [{ attributeId: config.attributes[4]!.id, attributeValue: 'writing' }],
    });
    expect((await call(trigger, { params: { systemId, id: 'nope' } })).status).toBe(404);

    const boards = await call('GET /leaderboards', { query: q('GET /leaderboards') });
    expect(boards.body.map((b: Json) => [b.key, b.status])).toEqual([['weekly-words', 'active'], ['xp-board', 'active'], ['streaks', 'finished']]);
    expect(boards.body[1]).toMatchObject({ pointsSystemId: EX, startTime: '09:00', endTime: '17:00' });
    const board = await call('GET /leaderboards/{id}', { params: { id: one(example('GET /leaderboards/{id}', 'id')) } });
    expect(board.body).toEqual({ id: '550e8400-e29b-41d4-a716-446655440100', name: 'Weekly words', key: 'weekly-words', description: 'Words', status: 'active', rankBy: 'metric', metricId: EX, maxParticipants: 100, start: '2025-01-01', breakdownAttributes: [config.attributes[3]!.id], runUnit: 'day', runInterval: 7 });
    expect((await call('GET /leaderboards/{id}', { params: { id: 'nope' } })).status).toBe(404);
  });

  it('configuration writes answer 405 with an error saying configuration is code', async () => {
    const validate = ajv.getSchema('admin.json#/components/schemas/AdminErrorBody')!;
    for (const op of CONFIG_WRITES) {
      const [method] = op.split(' ') as [string];
      const res = await send(op, { params: { systemId }, ...(method === 'DELETE' ? { query: { ids: EX } } : { body: bodyExamples(op)[0] ?? [] }) });
      expect(res.status, op).toBe(405);
      expect(res.headers.get('allow')).toBe('GET');
      const body = await res.json();
      expect(validate(body), op).toBe(true);
      expect((body as { error: string }).error).toContain('Configuration is code in Laurel');
    }
    // A method no route serves: 405 whose `Allow` names only what is served (the writes above answer 405 too).
    for (const path of ['/metrics', '/points/{systemId}/levels', '/leaderboards']) {
      const res = await send(`PUT ${path}`, { params: { systemId } });
      expect(res.status, path).toBe(405);
      expect(res.headers.get('allow'), path).toBe('GET');
    }
  });

  it('401 without or with a wrong key on every served operation; 404 for the operations not served and outside the base path', async () => {
    for (const op of [...SERVED, ...CONFIG_WRITES]) {
      const params = Object.fromEntries([...op.matchAll(/\{(\w+)\}/g)].map((m) => [m[1] as string, 'x']));
      for (const key of [null, 'wrong']) {
        const res = await send(op, { params, key, ...(op.startsWith('GET') ? {} : { body: {} }) });
        expect(res.status, op).toBe(401);
        expect(await res.json()).toEqual({ error: expect.any(String) });
      }
    }
    for (const op of NOT_SERVED) expect((await send(op, { params: { id: 'x' } })).status, op).toBe(404);
    // The application API's paths are not admin paths, and the reverse.
    expect((await send('GET /metrics', {}, '/v1')).status).toBe(404);
    expect((await send('GET /metrics', {}, '/admin/v2')).status).toBe(404);
  });

  it('adminBasePath moves the admin API, null turns it off', async () => {
    const moved = createHttpHandler(engine, { apiKeys: [KEY], adminBasePath: '/ops/admin' });
    const get = (h: typeof handler, path: string) => h(new Request(`http://laurel.test${path}`, { headers: { 'x-api-key': KEY } }));
    expect((await get(moved, '/ops/admin/metrics')).status).toBe(200);
    expect((await get(moved, '/admin/v1/metrics')).status).toBe(404);
    const off = createHttpHandler(engine, { apiKeys: [KEY], adminBasePath: null });
    expect((await get(off, '/admin/v1/metrics')).status).toBe(404);
    expect((await get(off, '/v1/leaderboards')).status).toBe(200);
  });

  it('every served operation was driven to a documented success; the spec has 47 operations; no unexpected error escaped', () => {
    expect(OPERATIONS).toHaveLength(47);
    expect([...SERVED, ...CONFIG_WRITES, ...NOT_SERVED].sort()).toEqual([...OPERATIONS].sort());
    expect(SERVED.filter((op) => !succeeded.has(op))).toEqual([]);
    expect(unexpected).toEqual([]);
  });
});
