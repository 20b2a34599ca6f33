/**
 * Runtime boosts (issue 13): `createBoost`, `deleteBoost`, `listBoosts` and `getUserBoosts`. The writes are
 * operator operations (core/operations.ts, core/boosts.ts) run under the owning user's lock; the store lists
 * every runtime boost of a system (`Store.listBoosts`). See docs/rules.md, section 12.
 */
import type { CompiledPointsSystem, LaurelConfig } from '../config/define.js';
import { NotFoundError, ValidationError } from '../errors.js';
import { boostStatus, configuredBoostView, recordView, userBoostViews, type PointsBoost } from '../core/boosts.js';
import { localDateOf } from '../core/calendar.js';
import type { CreateBoostResult, DeleteBoostResult } from '../core/operations.js';
import { userZone } from '../core/step.js';
import type { BoostRounding, OperationInput } from '../core/types.js';
import { validateText, validateUserId } from '../core/users.js';
import type { Store, VersionedState } from '../store/types.js';

/** What `createBoost` takes: a boost of one user's awards in one points system. */
export interface CreateBoostInput<P extends string = string> {
  pointsSystemKey: P;
  userId: string;
  /** At most 255 characters. */
  name: string;
  /** First day (YYYY-MM-DD, in the user's zone), included. */
  start: string;
  /** Last day (YYYY-MM-DD, in the user's zone), included; null or absent: no end. */
  end?: string | null;
  /** Greater than 0, not 1, less than 100. */
  multiplier: number;
  /** Default `down`. */
  rounding?: BoostRounding;
}

export interface BoostsContext {
  config: LaurelConfig;
  store: Store;
  now: () => Date;
  operate: <R>(userId: string, op: OperationInput, opts: { idempotencyKey?: string }) => Promise<R & { idempotentReplayed?: boolean }>;
  loadUser: (userId: string) => Promise<VersionedState>;
}

/** Boosts read per page of the store's listing. */
const PAGE = 500;

function systemOf(config: LaurelConfig, key: unknown): CompiledPointsSystem {
  const system = typeof key === 'string' ? config.index.pointsSystems.get(key) : undefined;
  if (!system) throw new NotFoundError('pointsSystem', String(key));
  return system;
}

export async function createBoost(ctx: BoostsContext, input: CreateBoostInput, opts: { idempotencyKey?: string } = {}): Promise<CreateBoostResult & { idempotentReplayed?: boolean }> {
  if (typeof input !== 'object' || input === null) throw new ValidationError('boost must be an object { pointsSystemKey, userId, name, start, end, multiplier, rounding }', [{ path: ['boost'], message: 'must be an object' }]);
  validateUserId(input.userId, ['userId']);
  const op: OperationInput = { op: 'createBoost', system: input.pointsSystemKey, name: input.name, start: input.start, end: input.end ?? null, multiplier: input.multiplier };
  if (input.rounding !== undefined) op.rounding = input.rounding;
  return ctx.operate<CreateBoostResult>(input.userId, op, opts);
}

/**
 * Deletes a runtime boost: found in the store (its user), then removed under that user's lock.
 * @throws {NotFoundError} an unknown (or already deleted) boost.
 */
export async function deleteBoost(ctx: BoostsContext, id: string, opts: { idempotencyKey?: string } = {}): Promise<DeleteBoostResult & { idempotentReplayed?: boolean }> {
  validateText(id, ['id'], 255, { nonEmpty: true });
  const found = await ctx.store.getBoost(id);
  if (!found) throw new NotFoundError('boost', id);
  return ctx.operate<DeleteBoostResult>(found.userId, { op: 'deleteBoost', id }, opts);
}

/**
 * A system's boosts with their status now: the configured (global) ones in configuration order, then every
 * user's runtime boosts in id order; finished ones only with `includeFinished`.
 */
export async function listBoosts(ctx: BoostsContext, systemKey: string, opts: { includeFinished?: boolean } = {}): Promise<PointsBoost[]> {
  const system = systemOf(ctx.config, systemKey);
  const includeFinished = (opts ?? {}).includeFinished === true;
  const at = ctx.now();
  const out: PointsBoost[] = [];
  const keep = (b: PointsBoost) => {
    if (includeFinished || b.status !== 'finished') out.push(b);
  };
  for (const b of system.boosts) keep(configuredBoostView(b, boostStatus(b, at)));
  let after: string | undefined;
  for (;;) {
    const page = await ctx.store.listBoosts(system.key, after === undefined ? { limit: PAGE } : { after, limit: PAGE });
    for (const b of page) keep(recordView(b, boostStatus(b, at)));
    const last = page[page.length - 1];
    if (page.length < PAGE || !last) break;
    after = last.id;
  }
  return out;
}

/** The boosts that apply to the user's awards in the system today (in their zone): eligible configured ones, then their own. */
export async function getUserBoosts(ctx: BoostsContext, userId: string, systemKey: string): Promise<PointsBoost[]> {
  validateUserId(userId, ['userId']);
  const system = systemOf(ctx.config, systemKey);
  const { state } = await ctx.loadUser(userId);
  return userBoostViews(system, state, localDateOf(ctx.now(), userZone(ctx.config, state)));
}
