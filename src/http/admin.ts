/**
 * The admin API subset (the hosted service's `admin.json`, OpenAPI 1.21.1) that maps to engine operations,
 * served by `createHttpHandler` under `adminBasePath` (default `/admin/v1`) with the same API keys:
 *
 * - Streaks: `POST /streaks/freezes` (`grantFreezes`, one freeze per item), `POST /streaks/restore`
 *   (`restoreStreak`), `POST /streaks/pauses` (`pauseStreak`), `DELETE /streaks/pauses` (`deletePause`).
 * - Points boosts: `GET|POST|PATCH|DELETE /points/{systemId}/boosts`, `GET /points/{systemId}/boosts/{id}`
 *   (`createBoost`, `listBoosts`, `deleteBoost`, the store's `getBoost`; the engine has no update: `PATCH` is
 *   the user's `deleteBoost` and `createBoost` in one atomic `runOperations` call, so the boost comes back
 *   under a new id).
 * - `POST /metrics/events`: up to 1 000 events through `recordEvents` (the engine's batch path), 202.
 * - Read-only configuration: `GET /metrics[/{id}]`, `/attributes[/{id}]`, `/points[/{id}]`,
 *   `/points/{systemId}/levels[/{id}]`, `/points/{systemId}/triggers[/{id}]`, `/leaderboards[/{id}]`.
 * - Configuration writes (`POST`, `PATCH`, `DELETE` on those collections): 405, configuration is code.
 *
 * Ids in paths are the configuration's ids (explicit `id`s, or the stable UUIDs derived from keys); keys are
 * accepted too. Per-item failures of the batch operations are `issues`, as the service reports them.
 */
import { isLaurelError, NotFoundError, storageError, ValidationError, type NotFoundKind } from '../errors.js';
import type { Engine } from '../engine/engine.js';
import type { LaurelConfig, CompiledPointsSystem } from '../config/define.js';
import type { PointsBoost } from '../core/boosts.js';
import type { UserInput } from '../core/types.js';
import { validateText, validateUserId } from '../core/users.js';
import type { CreateBoostResult } from '../core/operations.js';

/** What an admin route reads of a request. */
export interface AdminContext {
  url: URL;
  params: Record<string, string>;
  /** The JSON body, any JSON value (arrays included). */
  raw: () => Promise<unknown>;
}

/** An admin route; `errors`: the error statuses admin.json documents for the operation. */
export interface AdminRoute {
  method: string;
  pattern: string[];
  errors?: readonly number[];
  /** A method served only to answer 405 (a configuration write): left out of the `Allow` of other 405s. */
  refused?: true;
  run: (ctx: AdminContext) => Promise<Response>;
}

/** An `AdminIssue`: one item's problem in a batch. */
interface Issue {
  id?: string;
  userId?: string;
  index?: number;
  severity: 'error' | 'warning';
  message: string;
}

/** Most items per request of the streak and boost batches (admin.json: 100), and of `POST /metrics/events`. */
const MAX_ITEMS = 100;
const MAX_EVENTS = 1000;

/** The error of a configuration write. */
export const CONFIGURATION_IS_CODE = 'Configuration is code in Laurel: change it in defineConfig(...) and deploy; the admin API cannot create, update or delete';

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json; charset=utf-8', ...headers } });

const notFound = (kind: NotFoundKind, id: string) => new NotFoundError(kind, id);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The message of one item's failure: engine errors as their message (an unknown user as the service says it); anything else is rethrown. */
function failure(error: unknown): string {
  if (error instanceof NotFoundError && error.kind === 'user') return 'User does not exist';
  if (isLaurelError(error)) return error.message;
  throw error;
}

/**
 * Runs `each` for every item whose `field` is a non-empty string user id, in order: an item without one gets
 * an error issue (`<field> is required`, by index), a call that fails gets one (by user id).
 */
async function eachUser(items: readonly unknown[], field: string, issues: Issue[], each: (userId: string, item: Record<string, unknown>) => Promise<void>): Promise<void> {
  for (const [index, item] of items.entries()) {
    const userId = isObject(item) ? item[field] : undefined;
    if (!isObject(item) || typeof userId !== 'string' || userId === '') {
      issues.push({ index, severity: 'error', message: `${field} is required` });
      continue;
    }
    try {
      await each(userId, item);
    } catch (error) {
      issues.push({ userId, severity: 'error', message: failure(error) });
    }
  }
}

/** A body that must be an object holding an array `field` of 1 to `max` items. */
function itemsOf(body: unknown, field: string | null, max: number): unknown[] {
  const items = field === null ? body : isObject(body) ? body[field] : undefined;
  const name = field ?? 'body';
  if (!Array.isArray(items)) throw new ValidationError(`${name} must be an array`, [{ path: [name], message: 'must be an array' }]);
  if (items.length < 1 || items.length > max) throw new ValidationError(`${name} must have 1 to ${max} items (got ${items.length})`, [{ path: [name], message: `1 to ${max} items` }]);
  return items;
}

/** Repeated or comma-separated values of a query parameter. */
const listParam = (url: URL, name: string) =>
  url.searchParams
    .getAll(name)
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter((v) => v !== '');

function intParam(url: URL, name: string, fallback: number, min: number, max: number): number {
  const raw = url.searchParams.get(name);
  if (raw === null || raw === '') return fallback;
  const n = /^-?\d{1,12}$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= min && n <= max)) throw new ValidationError(`${name} must be an integer from ${min} to ${max} (got ${JSON.stringify(raw)})`, [{ path: [name], message: `an integer from ${min} to ${max}` }]);
  return n;
}

/** One page (`skip`, `limit` 1-100, default 10) of a list. */
const page = <T>(url: URL, items: readonly T[]): T[] => {
  const limit = intParam(url, 'limit', 10, 1, 100);
  const skip = intParam(url, 'skip', 0, 0, Number.MAX_SAFE_INTEGER);
  return items.slice(skip, skip + limit);
};

/** A user as `UserInput` (the fields the engine takes; others, such as `subscribeToEmails`, are ignored). */
function userOf(raw: unknown): UserInput {
  if (!isObject(raw)) throw new ValidationError('user must be an object', [{ path: ['user'], message: 'must be an object' }]);
  const out: Record<string, unknown> = { id: raw.id };
  for (const k of ['email', 'name', 'tz', 'attributes']) if (raw[k] !== undefined) out[k] = raw[k];
  return out as unknown as UserInput;
}

/** The admin routes over an engine. */
export function adminRoutes(e: Engine<LaurelConfig>): AdminRoute[] {
  const config = e.config;
  const attributeId = (key: string) => config.attributes.find((a) => a.key === key)?.id ?? key;
  const pairs = (filter: Readonly<Record<string, string>> | undefined) => Object.entries(filter ?? {}).map(([key, value]) => ({ attributeId: attributeId(key), attributeValue: value }));
  const find = <T extends { id: string; key: string }>(items: readonly T[], id: string): T | undefined => items.find((x) => x.id === id) ?? items.find((x) => x.key === id);
  const systemOf = (id: string): CompiledPointsSystem => {
    const s = find(config.pointsSystems, id);
    if (!s) throw notFound('pointsSystem', id);
    return s;
  };

  // Wire shapes of configured entities (admin.json's CreatedMetric, AdminAttribute, AdminPointsSystem, ...).
  const metric = (m: LaurelConfig['metrics'][number]) => ({ id: m.id, name: m.name, key: m.key, unitType: 'number', units: '' });
  const attribute = (a: LaurelConfig['attributes'][number]) => ({ id: a.id, name: a.name, key: a.key, type: a.type });
  const system = (s: CompiledPointsSystem) => ({ id: s.id, name: s.name, key: s.key, description: s.description ?? '', status: 'active', badge: s.badgeUrl ? { url: s.badgeUrl } : null, maxPoints: s.maxPoints });
  const level = (l: CompiledPointsSystem['levels'][number]) => ({ id: l.id, name: l.name, key: l.key, points: l.points, description: l.description ?? '', badge: l.badgeUrl ? { url: l.badgeUrl } : null });
  const trigger = (t: CompiledPointsSystem['triggers'][number]) => {
    const c = t as unknown as Record<string, unknown> & { userAttributes?: Record<string, string>; eventAttributes?: Record<string, string> };
    const out: Record<string, unknown> = { id: t.id, type: t.type, points: t.points, status: 'active', userAttributes: pairs(c.userAttributes), blockIfOutOfPoints: c.blockIfOutOfPoints === true };
    if (t.type === 'metric') Object.assign(out, { metricId: c.metricId, metricThreshold: c.metricThreshold, eventAttributes: pairs(c.eventAttributes) });
    if (t.type === 'achievement') out.achievementId = c.achievementId;
    if (t.type === 'streak') out.streakLength = c.streakLengthThreshold;
    if (t.type === 'time') Object.assign(out, { timeUnit: c.timeUnit === 'hour' ? 'hours' : 'days', timeInterval: c.timeInterval });
    return out;
  };
  const board = (b: LaurelConfig['leaderboards'][number], status: string) => {
    const out: Record<string, unknown> = { id: b.id, name: b.name, key: b.key, status, rankBy: b.rankBy, maxParticipants: b.maxParticipants ?? null, start: b.start, breakdownAttributes: b.breakdownAttributes.map(attributeId) };
    if (b.description !== null) out.description = b.description;
    if (b.metricKey) out.metricId = config.index.metrics.get(b.metricKey)?.id;
    if (b.pointsSystemKey) out.pointsSystemId = config.index.pointsSystems.get(b.pointsSystemKey)?.id;
    if (b.end !== null) out.end = b.end;
    if (b.startTime !== null) out.startTime = b.startTime;
    if (b.endTime !== null) out.endTime = b.endTime;
    if (b.runUnit !== null) Object.assign(out, { runUnit: b.runUnit, runInterval: b.runInterval });
    return out;
  };
  const boardStatuses = async () => new Map((await e.listLeaderboards({ includeFinished: true, includeInactive: true })).map((b) => [b.key, b.status as string]));

  /** A boost as `AdminPointsBoost` (`userAttributes` only on a configured, global one). */
  const boost = (s: CompiledPointsSystem, b: PointsBoost) => {
    const out: Record<string, unknown> = { id: b.id, name: b.name, status: b.status, start: b.start, end: b.end, multiplier: b.multiplier, rounding: b.rounding, userId: b.userId };
    if (b.userId === null) out.userAttributes = pairs(s.boosts.find((c) => c.id === b.id)?.userAttributes);
    return out;
  };
  /** Every boost of a system, finished ones included, with its status now. */
  /**
   * A read of the store itself (the engine has no call for it), failing typed as the engine's own reads do: a
   * driver error is a StorageUnavailableError (503), never a raw error (500).
   */
  const stored = async <T>(method: string, read: () => Promise<T>): Promise<T> => {
    try {
      return await read();
    } catch (error) {
      throw storageError(`store.${method}`, error);
    }
  };
  /**
   * Item `id` of a per-item boost route: the system's runtime boost, or null with the item's issue recorded (not
   * found, or the look-up failed: an issue of this item, since the items before it may be done already).
   */
  const runtimeBoost = async (s: CompiledPointsSystem, id: string, issues: Issue[]) => {
    try {
      // Checked as the engine checks a boost id (a NUL is a validation error before any read, on every store).
      validateText(id, ['id'], 255, { nonEmpty: true });
      const found = await stored('getBoost', () => e.store.getBoost(id));
      if (found && found.pointsSystemKey === s.key) return found;
      issues.push({ id, severity: 'error', message: 'Points boost not found by ID' });
    } catch (error) {
      issues.push({ id, severity: 'error', message: failure(error) });
    }
    return null;
  };
  const allBoosts = (s: CompiledPointsSystem) => e.listBoosts(s.key, { includeFinished: true });
  /** The runtime boosts `ids` of a system as the engine lists them (their status is the engine's clock's). */
  const boostsById = async (s: CompiledPointsSystem, ids: readonly string[]) => {
    if (ids.length === 0) return new Map<string, PointsBoost>();
    const wanted = new Set(ids);
    return new Map((await allBoosts(s)).filter((b) => wanted.has(b.id)).map((b) => [b.id, b]));
  };

  const list = <T>(pattern: string[], items: (params: Record<string, string>) => readonly T[] | Promise<readonly T[]>, errors: readonly number[] = [401, 422]): AdminRoute => ({ method: 'GET', pattern, errors, run: async ({ url, params }) => json(200, page(url, await items(params))) });
  const get = (pattern: string[], item: (params: Record<string, string>) => unknown | Promise<unknown>): AdminRoute => ({ method: 'GET', pattern, errors: [401, 404, 422], run: async ({ params }) => json(200, await item(params)) });
  /** 405 for a configuration write (`Allow: GET`). */
  const configurationWrites = (pattern: string[], what: string): AdminRoute[] =>
    ['POST', 'PATCH', 'DELETE'].map((method) => ({ method, pattern, refused: true, run: async () => json(405, { error: `${CONFIGURATION_IS_CODE} ${what}` }, { allow: 'GET' }) }));

  const levelsOf = (params: Record<string, string>) => systemOf(params.systemId as string).levels;
  const triggersOf = (params: Record<string, string>) => systemOf(params.systemId as string).triggers;

  return [
    // Streaks.
    {
      method: 'POST',
      pattern: ['streaks', 'freezes'],
      errors: [400, 401, 422],
      run: async ({ raw }) => {
        const items = itemsOf(await raw(), 'freezes', MAX_ITEMS);
        const issues: Issue[] = [];
        // One freeze per item: a user listed twice gets two, in one grant.
        const counts = new Map<string, number>();
        items.forEach((item, index) => {
          const userId = isObject(item) ? item.userId : undefined;
          if (typeof userId !== 'string' || userId === '') issues.push({ index, severity: 'error', message: 'userId is required' });
          else counts.set(userId, (counts.get(userId) ?? 0) + 1);
        });
        let created = 0;
        for (const [userId, count] of counts) {
          try {
            const r = await e.grantFreezes(userId, count);
            created += r.granted;
            if (r.excess > 0 || r.warning) issues.push({ userId, severity: 'warning', message: r.excess > 0 ? 'Would exceed maximum freeze limit' : (r.warning as string) });
          } catch (error) {
            issues.push({ userId, severity: 'error', message: failure(error) });
          }
        }
        return json(created > 0 ? 201 : 200, { issues });
      },
    },
    {
      method: 'POST',
      pattern: ['streaks', 'restore'],
      errors: [400, 401, 422],
      run: async ({ raw }) => {
        const items = itemsOf(await raw(), 'users', MAX_ITEMS);
        const restoredUsers: string[] = [];
        const issues: Issue[] = [];
        await eachUser(items, 'id', issues, async (userId) => {
          const r = await e.restoreStreak(userId);
          if (r.restored) restoredUsers.push(userId);
          else issues.push({ userId, severity: 'warning', message: r.warning ?? 'No streak to restore' });
        });
        return json(restoredUsers.length > 0 ? 201 : 200, { restoredUsers, issues });
      },
    },
    {
      method: 'POST',
      pattern: ['streaks', 'pauses'],
      errors: [401, 422],
      run: async ({ raw }) => {
        const items = itemsOf(await raw(), 'pauses', MAX_ITEMS);
        const created: Record<string, unknown>[] = [];
        const issues: Issue[] = [];
        await eachUser(items, 'userId', issues, async (userId, item) => {
          const { pause } = await e.pauseStreak(userId, { start: item.start as string, end: item.end as string });
          created.push({ id: pause.id, userId, start: pause.start, end: pause.end, status: 'active' });
        });
        return json(created.length > 0 ? 201 : 200, { created, issues });
      },
    },
    {
      method: 'DELETE',
      pattern: ['streaks', 'pauses'],
      errors: [401, 422],
      run: async ({ url }) => {
        const ids = [...new Set(listParam(url, 'ids'))];
        if (ids.length < 1 || ids.length > MAX_ITEMS) throw new ValidationError(`ids: 1 to ${MAX_ITEMS} pause ids`, [{ path: ['ids'], message: `1 to ${MAX_ITEMS} ids` }]);
        // Pauses live in their users' states: Laurel's own `userId` parameter names the users to look in;
        // without it every user is read, a page at a time, until each id is found.
        const owners = new Map<string, string>();
        const look = async (userIds: readonly string[]) => {
          const states = await stored('loadUsers', () => e.store.loadUsers(userIds));
          for (const loaded of states) for (const p of loaded?.state.streak?.pauses ?? []) if (ids.includes(p.id)) owners.set(p.id, loaded!.state.user.id);
        };
        const hinted = listParam(url, 'userId');
        hinted.forEach((id) => validateUserId(id, ['userId']));
        if (hinted.length > 0) await look(hinted);
        else {
          let after: string | undefined;
          while (owners.size < ids.length) {
            const users = await stored('listUsers', () => e.store.listUsers(after === undefined ? { limit: 500 } : { after, limit: 500 }));
            if (users.length > 0) await look(users);
            if (users.length < 500) break;
            after = users[users.length - 1];
          }
        }
        const deleted: { id: string }[] = [];
        const issues: Issue[] = [];
        for (const id of ids) {
          const userId = owners.get(id);
          if (userId === undefined) {
            issues.push({ id, severity: 'error', message: 'Streak pause not found by ID' });
            continue;
          }
          try {
            const r = await e.deletePause(userId, id);
            if (r.deleted) deleted.push({ id });
            else issues.push({ id, severity: 'error', message: r.warning ?? 'Streak pause not found by ID' });
          } catch (error) {
            issues.push({ id, userId, severity: 'error', message: failure(error) });
          }
        }
        return json(200, { deleted, issues });
      },
    },

    // Metric events, through the engine's batch path.
    {
      method: 'POST',
      pattern: ['metrics', 'events'],
      errors: [400, 401, 404, 422],
      run: async ({ raw }) => {
        const items = itemsOf(await raw(), null, MAX_EVENTS);
        items.forEach((item, index) => {
          if (!isObject(item)) throw new ValidationError(`events[${index}] must be an object`, [{ path: [index], message: 'must be an object' }]);
          if (typeof item.key !== 'string' || item.key === '') throw new ValidationError(`events[${index}].key is required`, [{ path: [index, 'key'], message: 'is required' }]);
          // An unknown metric fails the whole batch (404, nothing recorded), as the service documents.
          if (!config.index.metrics.has(item.key)) throw new NotFoundError('metric', item.key);
        });
        const issues: Issue[] = [];
        const events = items.map((raw, index) => {
          const item = raw as Record<string, unknown>;
          let user: UserInput;
          try {
            user = userOf(item.user);
          } catch (error) {
            issues.push({ index, severity: 'error', message: failure(error) });
            user = { id: '' };
          }
          return {
            metricKey: item.key as string,
            user,
            value: item.value as number,
            ...(item.attributes !== undefined ? { attributes: item.attributes as Record<string, string> } : {}),
            ...(item.idempotencyKey !== undefined ? { idempotencyKey: item.idempotencyKey as string } : {}),
          };
        });
        const results = await e.recordEvents(events);
        let accepted = 0;
        results.forEach((r, index) => {
          if (r.ok) accepted += 1;
          else if (!issues.some((i) => i.index === index)) issues.push({ index, severity: 'error', message: r.error.message });
        });
        issues.sort((a, b) => (a.index ?? 0) - (b.index ?? 0));
        return json(202, { accepted, issues });
      },
    },

    // Points boosts.
    {
      method: 'GET',
      pattern: ['points', ':systemId', 'boosts'],
      errors: [401, 404, 422],
      run: async ({ params, url }) => {
        const s = systemOf(params.systemId as string);
        return json(200, page(url, (await allBoosts(s)).map((b) => boost(s, b))));
      },
    },
    {
      method: 'GET',
      pattern: ['points', ':systemId', 'boosts', ':id'],
      errors: [401, 404, 422],
      run: async ({ params }) => {
        const s = systemOf(params.systemId as string);
        const id = params.id as string;
        const configured = s.boosts.some((b) => b.id === id);
        if (!configured) validateText(id, ['id'], 255, { nonEmpty: true });
        const record = configured ? null : await stored('getBoost', () => e.store.getBoost(id));
        const found = configured || record?.pointsSystemKey === s.key ? (await boostsById(s, [id])).get(id) : undefined;
        if (!found) throw notFound('boost', id);
        return json(200, boost(s, found));
      },
    },
    {
      method: 'POST',
      pattern: ['points', ':systemId', 'boosts'],
      errors: [401, 404, 422],
      run: async ({ params, raw }) => {
        const s = systemOf(params.systemId as string);
        const items = itemsOf(await raw(), null, MAX_ITEMS);
        const ids: string[] = [];
        const issues: Issue[] = [];
        for (const [index, item] of items.entries()) {
          if (!isObject(item)) {
            issues.push({ index, severity: 'error', message: 'A boost must be an object' });
            continue;
          }
          // Laurel's runtime boosts are one user's; global and attribute-filtered boosts are configuration.
          if (typeof item.userId !== 'string' || item.userId === '') {
            issues.push({ index, severity: 'error', message: `A boost without userId (global or by userAttributes) is configuration in Laurel: add it to pointsSystems[].boosts` });
            continue;
          }
          if (item.userAttributes !== undefined && item.userAttributes !== null) {
            issues.push({ index, severity: 'error', message: 'userAttributes cannot be set on a user-specific boost' });
            continue;
          }
          try {
            const { boost: b } = await e.createBoost({ pointsSystemKey: s.key, userId: item.userId, name: item.name as string, start: item.start as string, end: (item.end ?? null) as string | null, multiplier: item.multiplier as number, ...(item.rounding !== undefined ? { rounding: item.rounding as 'down' } : {}) });
            ids.push(b.id);
          } catch (error) {
            issues.push({ index, userId: item.userId, severity: 'error', message: failure(error) });
          }
        }
        const found = await boostsById(s, ids);
        const created = ids.flatMap((id) => (found.has(id) ? [boost(s, found.get(id) as PointsBoost)] : []));
        return json(created.length > 0 ? 201 : 200, { created, issues });
      },
    },
    {
      method: 'PATCH',
      pattern: ['points', ':systemId', 'boosts'],
      errors: [401, 404, 422],
      run: async ({ params, raw }) => {
        const s = systemOf(params.systemId as string);
        const items = itemsOf(await raw(), null, MAX_ITEMS);
        const ids: string[] = [];
        const issues: Issue[] = [];
        for (const [index, item] of items.entries()) {
          const id = isObject(item) ? item.id : undefined;
          if (!isObject(item) || typeof id !== 'string' || id === '') {
            issues.push({ index, severity: 'error', message: 'id is required' });
            continue;
          }
          if (s.boosts.some((b) => b.id === id)) {
            issues.push({ id, severity: 'error', message: 'A configured boost is configuration in Laurel: change pointsSystems[].boosts' });
            continue;
          }
          const current = await runtimeBoost(s, id, issues);
          if (!current) continue;
          if (item.userAttributes !== undefined && item.userAttributes !== null) {
            issues.push({ id, severity: 'error', message: 'userAttributes cannot be set on a user-specific boost' });
            continue;
          }
          // No update in the engine: the boost is deleted and created again in one atomic call, under a new id
          // (the engine chooses boost ids); the answer carries the new one.
          const next = {
            op: 'createBoost' as const,
            system: s.key,
            name: (item.name ?? current.name) as string,
            start: (item.start ?? current.start) as string,
            end: (item.end === undefined ? current.end : item.end) as string | null,
            multiplier: (item.multiplier ?? current.multiplier) as number,
            rounding: (item.rounding ?? current.rounding) as 'down',
          };
          try {
            const [, created] = await e.runOperations(current.userId, [{ op: 'deleteBoost', id }, next]);
            ids.push((created as CreateBoostResult).boost.id);
          } catch (error) {
            issues.push({ id, severity: 'error', message: failure(error) });
          }
        }
        // Read back after the updates committed: should that read fail, the answer still says what was done.
        let found: Map<string, PointsBoost>;
        try {
          found = await boostsById(s, ids);
        } catch (error) {
          const message = failure(error);
          return json(200, { updated: [], issues: [...issues, ...ids.map((id) => ({ id, severity: 'warning' as const, message: `Updated (now boost ${id}), but it could not be read back: ${message}` }))] });
        }
        return json(200, { updated: ids.flatMap((id) => (found.has(id) ? [boost(s, found.get(id) as PointsBoost)] : [])), issues });
      },
    },
    {
      method: 'DELETE',
      pattern: ['points', ':systemId', 'boosts'],
      errors: [401, 404, 422],
      run: async ({ params, url }) => {
        const s = systemOf(params.systemId as string);
        const ids = [...new Set(listParam(url, 'ids'))];
        if (ids.length < 1 || ids.length > MAX_ITEMS) throw new ValidationError(`ids: 1 to ${MAX_ITEMS} boost ids`, [{ path: ['ids'], message: `1 to ${MAX_ITEMS} ids` }]);
        const deleted: { id: string }[] = [];
        const issues: Issue[] = [];
        for (const id of ids) {
          if (s.boosts.some((b) => b.id === id)) {
            issues.push({ id, severity: 'error', message: 'A configured boost is configuration in Laurel: remove it from pointsSystems[].boosts' });
            continue;
          }
          const current = await runtimeBoost(s, id, issues);
          if (!current) continue;
          try {
            await e.deleteBoost(id);
            deleted.push({ id });
          } catch (error) {
            issues.push({ id, severity: 'error', message: error instanceof NotFoundError ? 'Points boost not found by ID' : failure(error) });
          }
        }
        return json(200, { deleted, issues });
      },
    },

    // Read-only configuration.
    list(['metrics'], () => config.metrics.map(metric)),
    get(['metrics', ':id'], ({ id }) => metric(find(config.metrics, id as string) ?? thrown(notFound('metric', id as string)))),
    list(['attributes'], () => config.attributes.map(attribute)),
    get(['attributes', ':id'], ({ id }) => attribute(find(config.attributes, id as string) ?? thrown(notFound('attribute', id as string)))),
    list(['points'], () => config.pointsSystems.map(system)),
    get(['points', ':id'], ({ id }) => system(systemOf(id as string))),
    list(['points', ':systemId', 'levels'], (p) => levelsOf(p).map(level), [401, 404, 422]),
    get(['points', ':systemId', 'levels', ':id'], (p) => level(find(levelsOf(p), p.id as string) ?? thrown(notFound('level', p.id as string)))),
    list(['points', ':systemId', 'triggers'], (p) => triggersOf(p).map(trigger), [401, 404, 422]),
    get(['points', ':systemId', 'triggers', ':id'], (p) => trigger(find(triggersOf(p), p.id as string) ?? thrown(notFound('trigger', p.id as string)))),
    list(['leaderboards'], async () => {
      const statuses = await boardStatuses();
      return config.leaderboards.map((b) => board(b, statuses.get(b.key) ?? 'active'));
    }),
    get(['leaderboards', ':id'], async ({ id }) => {
      const b = find(config.leaderboards, id as string) ?? thrown(notFound('leaderboard', id as string));
      return board(b, (await boardStatuses()).get(b.key) ?? 'active');
    }),

    // Configuration writes: 405.
    ...configurationWrites(['metrics'], 'metrics.'),
    ...configurationWrites(['attributes'], 'attributes.'),
    ...configurationWrites(['points'], 'points systems.'),
    ...configurationWrites(['points', ':systemId', 'levels'], 'points levels.'),
    ...configurationWrites(['points', ':systemId', 'triggers'], 'points triggers.'),
    ...configurationWrites(['leaderboards'], 'leaderboards.'),
  ];
}

function thrown(error: Error): never {
  throw error;
}

