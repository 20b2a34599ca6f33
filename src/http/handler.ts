/**
 * The wire API: a fetch-standard handler (`Request -> Response`) serving the hosted service's public API
 * (`/v1/...`, see the reference API) and the seed's `POST /api/metrics/{key}/event` over a Laurel engine.
 * Mount it in Hono, Next.js route handlers, Bun, Deno, or `node:http` through `toNodeListener`.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { isLaurelError, UnauthorizedError, ValidationError } from '../errors.js';
import type { Engine } from '../engine/engine.js';
import type { LaurelConfig } from '../config/define.js';
import type { Award, EventPoints, EventResponse, PreferencesPatch, UserAchievement, UserBoost, UserInput } from '../core/types.js';
import type { PointsBoost } from '../core/boosts.js';
import type { PreferencesView } from '../core/operations.js';
import { wireAward, wireBoard, wireTrigger, wireUser } from '../core/changes.js';
import { adminRoutes } from './admin.js';
import { applicationKeyVerifier, type ApplicationKeysOptions } from './keys.js';

/**
 * Options of {@link createHttpHandler}: who may call (API keys, application keys), body size limits, where the
 * admin API is served, and error reporting.
 */
export interface HttpHandlerOptions {
  /** Accepted API keys (compared in constant time). */
  apiKeys?: readonly string[];
  /** Custom key check, used instead of (or as well as) `apiKeys`. */
  verifyApiKey?: (key: string) => boolean | Promise<boolean>;
  /**
   * Per-user application keys (`app_<prefix>.<body>`, made by `createApplicationKey`): `secret` and a
   * `lookup(prefix)` into the app's own store (or `records` in memory). Such a key reads and writes only its
   * own user's resources and reads public configuration and rankings; anything else is 403.
   */
  applicationKeys?: ApplicationKeysOptions;
  /** Largest accepted request body in bytes (default 65 536); larger bodies get 413. */
  maxBodyBytes?: number;
  /** Called with unexpected (non-Laurel) errors before a 500 is returned. */
  onError?: (error: unknown, request: Request) => void;
  /**
   * Where the admin API subset is served (see `./admin.ts`; same API keys): default `/admin/v1`; null turns
   * it off.
   */
  adminBasePath?: string | null;
  /** Largest accepted admin request body in bytes (default 1 048 576: a batch of 1 000 events). */
  adminMaxBodyBytes?: number;
}

/** A fetch-standard request handler. */
export type FetchHandler = (request: Request) => Promise<Response>;

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** A per-user key outside its scope: 403 as is, whether or not the operation documents 403. */
class ForbiddenError extends HttpError {
  constructor(message = 'This application key may only act on behalf of its own user') {
    super(403, message);
  }
}

/** Who a request acts for: a server key (everything) or a per-user application key (its user only). */
type Principal = { kind: 'server' } | { kind: 'user'; userId: string; tenant: string | null };

/** One tenant's routes. */
interface Api {
  routes: Route[];
  admin: Route[];
}

/** How many tenants' route tables a handler keeps (least recently used ones are dropped, and made again). */
const MAX_CACHED_TENANTS = 1000;

type Params = Record<string, string>;
interface Context {
  request: Request;
  url: URL;
  params: Params;
  body: () => Promise<Record<string, unknown>>;
  /** The JSON body as any JSON value (the admin API's array bodies). */
  raw: () => Promise<unknown>;
}
/**
 * What a per-user application key may do on a route: `public` (configuration and rankings, any key), `path`
 * (the path's `:id` is the key's user), `body` (the body's `id`), `body.user` (the body's `user.id`),
 * `userIds` (every `userIds` value). Without `user`, a route is for server keys only.
 */
type Access = 'public' | 'path' | 'body' | 'body.user' | 'userIds';
/**
 * A route of one operation. `errors`: the error statuses the operation documents in the hosted service's
 * OpenAPI description (application.json 1.21.1); any other 4xx is answered as the nearest documented one
 * (see {@link documentedStatus}). Default: 401, 404 and 422. `user`: see {@link Access}.
 */
type Route = { method: string; pattern: string[]; errors?: readonly number[]; user?: Access; refused?: true; run: (ctx: Context) => Promise<Response> };

const DEFAULT_ERRORS: readonly number[] = [401, 404, 422];

/**
 * The status to answer for a failure of an operation that documents `errors`: a documented status as is;
 * otherwise a bad request (400) or a missing resource (404) becomes 422 where the operation lists 422 (else
 * 400; a bad request is 404 where the operation lists neither but 404), and a 422 becomes 400 where only 400
 * is listed. Left as they are, and documented in the README as
 * Laurel's own: 413 (body over `maxBodyBytes`), 409 (write retries spent) and 5xx (store unavailable,
 * internal errors). `POST /metrics/{key}/event` also keeps 404 for an unknown metric (its route lists it),
 * and answers 202 for an idempotent replay (the service's idempotency page documents that).
 */
function documentedStatus(status: number, errors: readonly number[]): number {
  if (errors.includes(status) || status === 409 || status === 413 || status >= 500) return status;
  // Where neither is listed but 404 is, a bad request (a malformed id or tenant names nothing) is 404.
  if (status === 400 || status === 404 || status === 403) return errors.includes(422) ? 422 : errors.includes(400) ? 400 : status === 400 && errors.includes(404) ? 404 : status;
  if (status === 422 && errors.includes(400)) return 400;
  return status;
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json; charset=utf-8', ...headers } });

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();

/** Integer query parameter, or the fallback when absent. */
function intParam(url: URL, name: string, fallback?: number): number | undefined {
  const raw = url.searchParams.get(name);
  if (raw === null || raw === '') return fallback;
  if (!/^-?\d{1,12}$/.test(raw)) throw new ValidationError(`${name} must be an integer (got ${JSON.stringify(raw)})`, [{ path: [name], message: 'must be an integer' }]);
  return Number(raw);
}

function requiredParam(url: URL, name: string): string {
  const raw = url.searchParams.get(name);
  if (raw === null || raw === '') throw new ValidationError(`${name} is required`, [{ path: [name], message: 'is required' }]);
  return raw;
}

/** `key:value` pairs, comma-separated (`city:London,plan:pro`). */
function attributePairs(raw: string | null): Record<string, string> | undefined {
  if (raw === null || raw === '') return undefined;
  const out: Record<string, string> = Object.create(null);
  for (const part of raw.split(',')) {
    const i = part.indexOf(':');
    if (i <= 0) throw new ValidationError(`userAttributes must be key:value pairs (got ${JSON.stringify(part)})`, [{ path: ['userAttributes'], message: 'must be key:value pairs' }]);
    out[part.slice(0, i)] = part.slice(i + 1);
  }
  return { ...out };
}

/** A boost as the hosted service's `PointsBoost` (without the engine's `userId`). */
const wireBoost = ({ userId: _userId, ...boost }: PointsBoost) => boost;

/** The user's boosts (as `wireAward` looks them up for each award boost's `start`, `end` and `rounding`). */
const asUserBoosts = (boosts: readonly PointsBoost[], system: string): UserBoost[] => boosts.map((b) => ({ id: b.id, system, name: b.name, start: b.start, end: b.end, multiplier: b.multiplier, rounding: b.rounding }));

/** Preferences as the hosted service's `UserPreferencesResponse` (streak `mode` any/all is `evaluationMode` OR/AND). */
function wirePreferences(p: PreferencesView) {
  if (!p.streak) return { notifications: p.notifications };
  const { enabled, mode, metrics } = p.streak;
  return { notifications: p.notifications, streak: { enabled, evaluationMode: mode === 'all' ? 'AND' : 'OR', metrics } };
}

/** An `UpdateUserPreferencesRequest` as the engine's patch (unknown fields are passed on, for the engine to refuse). */
function preferencesPatch(body: Record<string, unknown>): PreferencesPatch {
  const { streak, ...rest } = body;
  if (typeof streak !== 'object' || streak === null || Array.isArray(streak)) return body as PreferencesPatch;
  const { evaluationMode, ...s } = streak as Record<string, unknown>;
  const mode = evaluationMode === 'OR' ? 'any' : evaluationMode === 'AND' ? 'all' : evaluationMode;
  return { ...rest, streak: { ...s, ...(evaluationMode === undefined ? {} : { mode }) } } as PreferencesPatch;
}

function userInput(body: Record<string, unknown>, id?: string): UserInput {
  const user = id === undefined ? body : { ...body, id };
  if (typeof user !== 'object' || user === null || Array.isArray(user)) throw new ValidationError('user must be an object', [{ path: ['user'], message: 'must be an object' }]);
  const { id: uid, email, name, tz, attributes } = user as Record<string, unknown>;
  const out: Record<string, unknown> = { id: uid };
  if (email !== undefined) out.email = email;
  if (name !== undefined) out.name = name;
  if (tz !== undefined) out.tz = tz;
  if (attributes !== undefined) out.attributes = attributes;
  return out as unknown as UserInput;
}

/**
 * Creates the HTTP handler. Every request needs a valid `X-API-KEY` (401 otherwise); engine errors map to
 * their suggested statuses with body `{ "error": message }`, narrowed to the statuses each operation of the
 * hosted service's application API documents (see `documentedStatus`): malformed JSON, wrong content types
 * and bad parameters are 400 where the operation lists 400, else 422; oversized bodies 413, unknown routes
 * 404, wrong methods 405. The admin API subset (`./admin.ts`) is served under `adminBasePath` (default
 * `/admin/v1`) with the same keys.
 *
 * @example
 * ```ts
 * const handler = createHttpHandler(engine, { apiKeys: [process.env.LAUREL_API_KEY!] });
 * http.createServer(toNodeListener(handler)).listen(3000);
 * ```
 */
export function createHttpHandler<C extends LaurelConfig>(engine: Engine<C>, options: HttpHandlerOptions = {}): FetchHandler {
  // The engine's key types are literal unions; over the wire every key is a string checked at run time.
  const root = engine as unknown as Engine<LaurelConfig>;
  options = options ?? {};
  const maxBody = options.maxBodyBytes ?? 65_536;
  const keyDigests = (Array.isArray(options.apiKeys) ? options.apiKeys : []).filter((k): k is string => typeof k === 'string' && k.length > 0).map(digest);
  const verifyApplicationKey = options.applicationKeys === undefined ? null : applicationKeyVerifier(options.applicationKeys);
  if (keyDigests.length === 0 && !options.verifyApiKey && !verifyApplicationKey) throw new ValidationError('createHttpHandler needs apiKeys or verifyApiKey', [{ path: ['apiKeys'], message: 'at least one key, or verifyApiKey' }]);
  const systems = new Map(root.config.pointsSystems.map((s) => [s.key, s]));
  const boards = new Map(root.config.leaderboards.map((b) => [b.key, b]));
  const adminBase = options.adminBasePath === null ? null : (options.adminBasePath ?? '/admin/v1').split('/').filter((s) => s !== '');
  const adminMaxBody = options.adminMaxBodyBytes ?? 1_048_576;

  // The routes of each tenant's engine (`Tenant-ID`), the default tenant's under null; the most recently
  // used tenants' are kept (engines themselves are kept by `engine.tenant`).
  const apis = new Map<string | null, Api>();
  const apiOf = (tenant: string | null): Api => {
    let api = apis.get(tenant);
    if (api) {
      apis.delete(tenant);
    } else {
      api = routesFor(tenant === null ? root : root.tenant(tenant));
      if (apis.size >= MAX_CACHED_TENANTS) apis.delete(apis.keys().next().value as string | null);
    }
    apis.set(tenant, api);
    return api;
  };

  async function authorised(request: Request): Promise<Principal | null> {
    const key = request.headers.get('x-api-key');
    if (!key) return null;
    const d = digest(key);
    let ok = false;
    // Compare against every key, always, so timing says nothing about which one (or whether one) matched.
    for (const k of keyDigests) ok = timingSafeEqual(d, k) || ok;
    if (ok) return { kind: 'server' };
    // A per-user key (its record looked up by prefix, its HMAC compared in constant time; see ./keys.ts).
    const app = verifyApplicationKey ? await verifyApplicationKey(key) : null;
    if (app) return { kind: 'user', userId: app.userId, tenant: app.tenant };
    if (options.verifyApiKey && (await options.verifyApiKey(key)) === true) return { kind: 'server' };
    return null;
  }

  /** Refuses (403) a per-user key outside its user on `route`; server keys pass. */
  async function checkScope(principal: Principal, route: Route, ctx: Context): Promise<void> {
    if (principal.kind === 'server' || route.user === 'public') return;
    const own = principal.userId;
    const idOf = (v: unknown) => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>).id : undefined);
    switch (route.user) {
      case 'path':
        if (ctx.params.id === own) return;
        break;
      case 'body':
        if (idOf(await ctx.body()) === own) return;
        break;
      case 'body.user':
        if (idOf((await ctx.body()).user) === own) return;
        break;
      case 'userIds': {
        const ids = ctx.url.searchParams.getAll('userIds').flatMap((v) => v.split(',')).filter((v) => v !== '');
        if (ids.every((id) => id === own)) return; // none at all: the route's own 422
        break;
      }
      default:
        throw new ForbiddenError('Application keys may not use this operation');
    }
    throw new ForbiddenError();
  }

  async function readBody(request: Request): Promise<Record<string, unknown>> {
    const parsed = await readJson(request, maxBody);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new HttpError(400, 'The JSON body must be an object');
    return parsed as Record<string, unknown>;
  }

  async function readJson(request: Request, maxBody: number): Promise<unknown> {
    const type = request.headers.get('content-type') ?? '';
    if (!/^application\/(.+\+)?json\b/i.test(type.trim())) throw new HttpError(400, 'Content-Type must be application/json');
    const declared = Number(request.headers.get('content-length') ?? NaN);
    if (Number.isFinite(declared) && declared > maxBody) throw new HttpError(413, `Request body exceeds ${maxBody} bytes`);
    const chunks: Uint8Array[] = [];
    let size = 0;
    if (request.body) {
      const reader = request.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        size += value.byteLength;
        if (size > maxBody) {
          await reader.cancel().catch(() => undefined);
          throw new HttpError(413, `Request body exceeds ${maxBody} bytes`);
        }
        chunks.push(value);
      }
    }
    const text = new TextDecoder('utf-8', { fatal: false }).decode(Buffer.concat(chunks));
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new HttpError(400, 'Malformed JSON body');
    }
    return parsed;
  }

  /** The application API's and the admin API's routes over one tenant's engine. */
  function routesFor(e: Engine<LaurelConfig>): Api {

    /** Awards as the hosted service's `PointsAward`s: triggers and boosts in full (see `wireAward`). */
    async function wireAwards(userId: string, key: string, awards: readonly Award[]) {
      const system = systems.get(key);
      if (!system) return awards;
      const mine = awards.some((a) => (a.boosts?.length ?? 0) > 0) ? asUserBoosts(await e.getUserBoosts(userId, key), key).filter((b) => !system.boosts.some((c) => c.id === b.id)) : [];
      return awards.map((a) => wireAward(system, a, mine));
    }

    /** A board's answer with the `LeaderboardResponse` fields it lacks (`status`, `breakdownAttribute`, ...); its own win. */
    const withBoard = <T extends { key: string }>(b: T, status: string) => {
      const c = boards.get(b.key);
      return c ? { ...wireBoard(c, status), ...b } : b;
    };

    /** The points of an event or a completion, each award in full. */
    async function wirePoints(userId: string, points: Record<string, EventPoints>) {
      const out: Record<string, unknown> = {};
      for (const [key, p] of Object.entries(points)) out[key] = { ...p, awards: await wireAwards(userId, key, p.awards) };
      return out;
    }

    async function wireEvent(res: EventResponse, userId: string) {
      const leaderboards: Record<string, unknown> = {};
      for (const [key, b] of Object.entries(res.leaderboards)) {
        const attr = b.breakdownAttributes[0];
        const value = attr === undefined ? undefined : b.userAttributes[attr];
        // `breakdownAttributeValue` is a string when present (the schema has no null).
        leaderboards[key] = { ...withBoard(b, 'active'), ...(value === undefined ? {} : { breakdownAttributeValue: value }) };
      }
      return { ...res, points: await wirePoints(userId, res.points), leaderboards };
    }

    const recordEvent = async ({ request, params, body }: Context) => {
      const b = await body();
      const idempotencyKey = request.headers.get('idempotency-key') ?? undefined;
      const user = userInput((b.user ?? null) as Record<string, unknown>);
      const res = await e.recordEvent(params.key as string, { user, value: b.value as number, ...(b.attributes !== undefined ? { attributes: b.attributes as Record<string, string> } : {}) }, idempotencyKey ? { idempotencyKey } : {});
      return json(res.idempotentReplayed ? 202 : 201, await wireEvent(res, user.id));
    };

    const summaryOptions = (url: URL) => ({
      aggregation: requiredParam(url, 'aggregation') as 'daily',
      startDate: requiredParam(url, 'startDate'),
      endDate: requiredParam(url, 'endDate'),
    });

    const routes: Route[] = [
      // 404 (unknown metric) is Laurel's addition to the documented statuses; so is 202 (idempotent replay).
      { method: 'POST', pattern: ['metrics', ':key', 'event'], user: 'body.user', errors: [400, 401, 404, 422], run: recordEvent },
      { method: 'POST', pattern: ['users'], user: 'body', errors: [400, 401, 422], run: async ({ body }) => json(201, wireUser(await e.identifyUser(userInput(await body())))) },
      // The operation documents no 404: an unknown user is 422.
      { method: 'GET', pattern: ['users', ':id'], user: 'path', errors: [400, 401, 422], run: async ({ params }) => json(200, wireUser(await e.getUser(params.id as string))) },
      { method: 'PUT', pattern: ['users', ':id'], user: 'path', errors: [400, 401, 422], run: async ({ params, body }) => json(200, wireUser(await e.identifyUser(userInput(await body(), params.id)))) },
      {
        method: 'PATCH',
        pattern: ['users', ':id'],
        user: 'path',
        errors: [400, 401, 404, 422],
        run: async ({ params, body }) => {
          const { id: _ignored, ...patch } = userInput(await body(), params.id);
          return json(200, wireUser(await e.updateUser(params.id as string, patch)));
        },
      },
      { method: 'GET', pattern: ['users', ':id', 'preferences'], user: 'path', run: async ({ params }) => json(200, wirePreferences(await e.getPreferences(params.id as string))) },
      {
        method: 'PATCH',
        pattern: ['users', ':id', 'preferences'],
        user: 'path',
        errors: [401, 403, 404, 422],
        run: async ({ params, body }) => {
          const patch = preferencesPatch(await body());
          const s = patch.streak;
          // Streak mode and metrics need streak customization: 403, as the operation documents.
          if (typeof s === 'object' && s !== null && ((s.mode !== undefined && s.mode !== null) || (s.metrics !== undefined && s.metrics !== null)) && !e.config.streak?.customization) {
            await e.getPreferences(params.id as string); // an unknown user is still 404
            throw new HttpError(403, 'Streak customization is not enabled: configure `streak.customization`');
          }
          return json(200, wirePreferences((await e.updatePreferences(params.id as string, patch)).preferences));
        },
      },
      { method: 'GET', pattern: ['users', ':id', 'metrics'], user: 'path', run: async ({ params }) => json(200, (await e.getUserMetrics(params.id as string)).map((m) => ({ ...m, status: 'active' }))) },
      { method: 'GET', pattern: ['users', ':id', 'metrics', ':key'], user: 'path', run: async ({ params }) => json(200, { ...(await e.getUserMetric(params.id as string, params.key as string)), status: 'active' }) },
      { method: 'GET', pattern: ['users', ':id', 'metrics', ':key', 'event-summary'], user: 'path', run: async ({ params, url }) => json(200, await e.getMetricEventSummary(params.id as string, params.key as string, summaryOptions(url))) },
      {
        method: 'GET',
        pattern: ['users', ':id', 'achievements'],
        user: 'path',
        run: async ({ params, url }) => {
          const mine = await e.getUserAchievements(params.id as string, { includeIncomplete: url.searchParams.get('includeIncomplete') === 'true' });
          // The hosted API's user achievements carry each achievement's completions and rarity too.
          const stats = new Map((await e.listAchievements({ includeUnavailable: true })).map((a) => [a.key, a]));
          return json(200, mine.map((a) => ({ ...a, completions: stats.get(a.key)?.completions ?? 0, rarity: stats.get(a.key)?.rarity ?? 0 })));
        },
      },
      {
        method: 'GET',
        pattern: ['users', ':id', 'streak'],
        user: 'path',
        run: async ({ params, url }) => {
          const historyPeriods = intParam(url, 'historyPeriods');
          return json(200, await e.getStreak(params.id as string, historyPeriods === undefined ? {} : { historyPeriods }));
        },
      },
      {
        method: 'GET',
        pattern: ['users', ':id', 'points', ':key'],
        user: 'path',
        run: async ({ params, url }) => {
          const awards = intParam(url, 'awards');
          const summary = await e.getPointsSummary(params.id as string, params.key as string, awards === undefined ? {} : { awards });
          return json(200, { ...summary, awards: await wireAwards(params.id as string, params.key as string, summary.awards) });
        },
      },
      { method: 'GET', pattern: ['users', ':id', 'points', ':key', 'event-summary'], user: 'path', run: async ({ params, url }) => json(200, await e.getPointsEventSummary(params.id as string, params.key as string, summaryOptions(url))) },
      { method: 'GET', pattern: ['users', ':id', 'points', ':key', 'boosts'], user: 'path', run: async ({ params }) => json(200, (await e.getUserBoosts(params.id as string, params.key as string)).map(wireBoost)) },
      {
        method: 'GET',
        pattern: ['users', ':id', 'leaderboards', ':key'],
        user: 'path',
        run: async ({ params, url }) => {
          const numEvents = intParam(url, 'numEvents');
          const run = url.searchParams.get('run') ?? undefined;
          const board = await e.getUserLeaderboard(params.id as string, params.key as string, { ...(run ? { run } : {}), ...(numEvents === undefined ? {} : { numEvents }) });
          // The status of the run read, as `GET /leaderboards/{key}` gives it for the same run.
          return json(200, { ...withBoard(board, board.status), history: board.history.map((h) => ({ ...h, timestamp: `${h.date}T00:00:00.000Z` })) });
        },
      },
      {
        method: 'GET',
        pattern: ['users', ':id', 'wrapped'],
        user: 'path',
        run: async ({ params, url }) => {
          const year = intParam(url, 'year');
          const { user, activity: a } = await e.getWrapped(params.id as string, year === undefined ? {} : { year });
          // As on /users/{id}/achievements: each achievement with its completions and rarity.
          const stats = new Map((await e.listAchievements({ includeUnavailable: true })).map((s) => [s.key, s]));
          const withStats = <P extends { achievements: UserAchievement[] }>(p: P) => ({ ...p, achievements: p.achievements.map((x) => ({ ...x, completions: stats.get(x.key)?.completions ?? 0, rarity: stats.get(x.key)?.rarity ?? 0 })) });
          const activity = { ...a, mostActiveDay: withStats(a.mostActiveDay), mostActiveWeek: withStats(a.mostActiveWeek), mostActiveMonth: withStats(a.mostActiveMonth), entireYear: withStats(a.entireYear) };
          return json(200, { user: wireUser(user), activity });
        },
      },
      {
        method: 'GET',
        pattern: ['achievements'],
        user: 'public',
        errors: [401, 422],
        run: async ({ url }) => {
          const userAttributes = attributePairs(url.searchParams.get('userAttributes'));
          return json(200, await e.listAchievements(userAttributes ? { userAttributes } : {}));
        },
      },
      {
        method: 'POST',
        pattern: ['achievements', ':key', 'complete'],
        user: 'body.user',
        run: async ({ params, body }) => {
          const user = userInput(((await body()).user ?? null) as Record<string, unknown>);
          const done = await e.completeAchievement(params.key as string, { user });
          return json(201, { ...done, points: await wirePoints(user.id, done.points) });
        },
      },
      {
        method: 'GET',
        pattern: ['streaks'],
        user: 'userIds',
        errors: [401, 422],
        run: async ({ url }) => {
          // Repeated `userIds` (the schema's array) or one comma-separated value (the spec's example).
          const ids = url.searchParams.getAll('userIds').flatMap((v) => v.split(',')).filter((v) => v !== '');
          if (ids.length === 0) throw new ValidationError('userIds is required', [{ path: ['userIds'], message: 'is required' }]);
          if (ids.length > 100) throw new ValidationError('userIds: at most 100 user ids', [{ path: ['userIds'], message: 'at most 100' }]);
          return json(200, await e.getStreaks(ids));
        },
      },
      {
        method: 'GET',
        pattern: ['points', ':key'],
        user: 'public',
        errors: [401, 404],
        run: async ({ params }) => {
          const system = await e.getPointsSystem(params.key as string);
          const compiled = systems.get(system.key);
          return json(200, { ...system, triggers: compiled ? system.triggers.map((t) => wireTrigger(compiled, t)) : system.triggers });
        },
      },
      { method: 'GET', pattern: ['points', ':key', 'boosts'], user: 'public', errors: [401, 404], run: async ({ params, url }) => json(200, (await e.listBoosts(params.key as string, { includeFinished: url.searchParams.get('includeFinished') === 'true' })).map(wireBoost)) },
      { method: 'GET', pattern: ['points', ':key', 'levels'], user: 'public', errors: [401, 404], run: async ({ params }) => json(200, await e.getLevels(params.key as string)) },
      { method: 'GET', pattern: ['points', ':key', 'level-summary'], user: 'public', run: async ({ params }) => json(200, await e.getLevelSummary(params.key as string)) },
      {
        method: 'GET',
        pattern: ['points', ':key', 'summary'],
        user: 'public',
        run: async ({ params, url }) => {
          const userAttributes = attributePairs(url.searchParams.get('userAttributes'));
          return json(200, await e.getPointsHistogram(params.key as string, userAttributes ? { userAttributes } : {}));
        },
      },
      {
        method: 'GET',
        pattern: ['leaderboards'],
        user: 'public',
        errors: [401, 422],
        run: async ({ url }) => json(200, (await e.listLeaderboards({ includeFinished: url.searchParams.get('includeFinished') === 'true', includeInactive: url.searchParams.get('includeInactive') === 'true' })).map((b) => withBoard(b, b.status))),
      },
      {
        method: 'GET',
        pattern: ['leaderboards', ':key'],
        user: 'public',
        run: async ({ params, url }) => {
          const offset = intParam(url, 'offset');
          const limit = intParam(url, 'limit');
          const run = url.searchParams.get('run') ?? undefined;
          const userId = url.searchParams.get('userId') ?? undefined;
          const userAttributes = attributePairs(url.searchParams.get('userAttributes'));
          return json(200, withBoard(await e.getLeaderboard(params.key as string, { ...(offset === undefined ? {} : { offset }), ...(limit === undefined ? {} : { limit }), ...(run ? { run } : {}), ...(userId ? { userId } : {}), ...(userAttributes ? { userAttributes } : {}) }), 'active'));
        },
      },
    ];
    return { routes, admin: adminRoutes(e) };
  }

  function match(segments: string[], routes: readonly Route[]): { allowed: Route[]; params: Params[] } {
    const allowed: Route[] = [];
    const params: Params[] = [];
    for (const route of routes) {
      if (route.pattern.length !== segments.length) continue;
      const p: Params = Object.create(null);
      let ok = true;
      for (let i = 0; i < segments.length && ok; i++) {
        const part = route.pattern[i] as string;
        if (part.startsWith(':')) ok = (p[part.slice(1)] = segments[i] as string) !== '';
        else ok = part === segments[i];
      }
      if (ok) {
        allowed.push(route);
        params.push(p);
      }
    }
    return { allowed, params };
  }

  return async function handle(request: Request): Promise<Response> {
    // The documented error statuses of the matched operation (none before one matched: 401, 404, 405, 400 as they are).
    let errors: readonly number[] | null = null;
    try {
      const principal = await authorised(request);
      if (!principal) throw new UnauthorizedError();
      const url = new URL(request.url);
      // Every segment counts, empty ones too: `/v1/users//points` names no route (it used to be read as
      // `/v1/users/points`, user "points"), nor does `/v1/leaderboards/` (an empty key; it listed all boards).
      let raw = url.pathname.slice(1).split('/');
      const isAdmin = adminBase !== null && adminBase.length > 0 && adminBase.length < raw.length && adminBase.every((s, i) => raw[i] === s);
      // The admin API under its base path; the seed's event path under /api; the current API under /v1.
      // The admin API is for server keys only.
      if (isAdmin && principal.kind === 'user') throw new ForbiddenError('Application keys may not use the admin API');
      if (isAdmin) raw = raw.slice((adminBase as string[]).length);
      else if (raw[0] === 'v1') raw = raw.slice(1);
      else if (raw[0] === 'api' && raw[1] === 'metrics') raw = raw.slice(1);
      else throw new HttpError(404, `No route for ${url.pathname}`);
      let segments: string[] | null;
      try {
        segments = raw.map((s) => decodeURIComponent(s));
      } catch {
        segments = null;
      }
      // `Tenant-ID` scopes the call to that tenant's engine; without it (or empty), the default tenant.
      const tenant = request.headers.get('tenant-id') || null;
      if (principal.kind === 'user' && principal.tenant !== tenant) throw new ForbiddenError('This application key belongs to another tenant');
      /** The request's route in a tenant's table: 404 when no route has its path, 405 when none has its method. */
      const routeIn = (a: Api): { route: Route; params: Params } => {
        const { allowed, params } = match(segments ?? raw, isAdmin ? a.admin : a.routes);
        if (allowed.length === 0) throw new HttpError(404, `No route for ${request.method} ${url.pathname}`);
        const i = allowed.findIndex((r) => r.method === request.method);
        // `Allow` lists the methods served (not those that only answer 405, as configuration writes do).
        if (i < 0) throw new HttpError(405, `Method ${request.method} not allowed`, { allow: [...new Set(allowed.filter((r) => r.refused !== true).map((r) => r.method))].join(', ') });
        return { route: allowed[i] as Route, params: params[i] as Params };
      };
      if (segments === null) {
        // A segment whose percent-encoding is malformed: a bad request of the operation its path names (the
        // route found by the raw segments: literal ones are plain ASCII), answered with a status it documents;
        // a method that only answers 405 (a configuration write) answers that, whatever the path's ids.
        const found = routeIn(apiOf(null)).route;
        if (found.refused !== true) {
          errors = found.errors ?? DEFAULT_ERRORS;
          throw new HttpError(400, 'Malformed percent-encoding in the path');
        }
        segments = raw;
      }
      let api: Api;
      try {
        api = apiOf(tenant);
      } catch (error) {
        // A `Tenant-ID` that names no possible tenant: answered with a status the operation documents, like any
        // bad input (its route found in the default tenant's table: every tenant's routes are the same).
        errors = routeIn(apiOf(null)).route.errors ?? DEFAULT_ERRORS;
        throw error;
      }
      const { route, params } = routeIn(api);
      let cached: Promise<Record<string, unknown>> | undefined;
      let cachedRaw: Promise<unknown> | undefined;
      errors = route.errors ?? DEFAULT_ERRORS;
      const ctx: Context = { request, url, params, body: () => (cached ??= readBody(request)), raw: () => (cachedRaw ??= readJson(request, isAdmin ? adminMaxBody : maxBody)) };
      await checkScope(principal, route, ctx);
      return await route.run(ctx);
    } catch (error) {
      if (error instanceof HttpError) return json(errors && !(error instanceof ForbiddenError) ? documentedStatus(error.status, errors) : error.status, { error: error.message }, error.headers);
      if (isLaurelError(error)) return json(errors ? documentedStatus(error.status, errors) : error.status, { error: error.message });
      options.onError?.(error, request);
      return json(500, { error: 'Internal server error' });
    }
  };
}

