/**
 * Helpers for stores implementing {@link OutboxStore}: completing a commit's `leaderboard.rank_changed`
 * events from its rank changes, and the memory store's outbox, consumer leases, marks and due index.
 */
import type { ChangeEvent, StoredChange } from '../core/types.js';
import { rankMarkerBoard } from '../core/changes.js';
import { instantMs, instantParam } from '../core/instants.js';
import { ValidationError } from '../errors.js';
import type { ChangesPage, DeliveryRecord, OutboxStore, RankChange } from './types.js';

/**
 * A commit's change events as the outbox keeps them: each `leaderboard.rank_changed` event with a `rank`
 * marker gets `previousRank` (the first rank change of the user in that index in this commit) and `rank`
 * (the last), each null above the marker's `cap`, and is dropped when the two are equal. Other events pass
 * as they are (without the marker). Never mutates its inputs.
 */
export function settleChanges(changes: readonly ChangeEvent[] | undefined, ranks: readonly RankChange[], userId: string): Omit<ChangeEvent, 'rank'>[] {
  const out: Omit<ChangeEvent, 'rank'>[] = [];
  settleEach(changes, ranks, userId, (c, settled) => out.push(settled ? settledEvent(c, settled.previousRank, settled.rank) : c));
  return out;
}

/**
 * {@link settleChanges} without building the completed events: `keep` receives each event that stays, with
 * its settled ranks when it had a marker (null otherwise).
 */
function settleEach(changes: readonly ChangeEvent[] | undefined, ranks: readonly RankChange[], userId: string, keep: (c: ChangeEvent, settled: { previousRank: number | null; rank: number | null } | null) => void): void {
  if (!changes) return;
  for (const c of changes) {
    if (!isMarked(c)) {
      keep(c, null);
      continue;
    }
    const marker = c.rank;
    let first: RankChange | undefined;
    let last: RankChange | undefined;
    for (const r of ranks) {
      if (r.index !== marker.index || r.userId !== userId) continue;
      first ??= r;
      last = r;
    }
    const previousRank = capped(first?.previousRank, marker.cap);
    const rank = capped(last?.rank, marker.cap);
    if (previousRank !== rank) keep(c, { previousRank, rank });
  }
}

/**
 * A marked event completed with its settled ranks (the event's fields less the marker, in their order). A
 * payload that is not an object reads as `{}`, and so does a `leaderboard` that is not one (as the
 * PostgreSQL store reads them).
 */
function settledEvent(c: ChangeEvent, previousRank: number | null, rank: number | null): Omit<ChangeEvent, 'rank'> {
  // Spelled out rather than a rest and three spreads.
  const given: Record<string, unknown> = isObject(c.payload) ? c.payload : {};
  const leaderboard: Record<string, unknown> = isObject(given.leaderboard) ? { ...given.leaderboard } : {};
  leaderboard.previousRank = previousRank;
  leaderboard.rank = rank;
  const payload = { ...given };
  payload.leaderboard = leaderboard;
  return { id: c.id, type: c.type, userId: c.userId, at: c.at, payload };
}

/**
 * Whether an event carries a rank marker to settle: only an object is one (as PostgreSQL's `commit_batch`
 * tests it); an event with any other `rank` passes as it is.
 */
export const isMarked = (c: ChangeEvent): c is ChangeEvent & { rank: NonNullable<ChangeEvent['rank']> } => isObject(c.rank);

/** A JSON object: not null, not an array. */
export const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * An event the memory outbox keeps in a compact form and completes when first read: the event's own fields and
 * its payload's `type` and `user` (shared with the user's other events), here; the rest in the subclass.
 */
abstract class KeptEvent {
  readonly id: string;
  readonly type: ChangeEvent['type'];
  readonly userId: string | null;
  readonly at: string;
  readonly payloadType: unknown;
  readonly user: unknown;
  constructor(c: Omit<ChangeEvent, 'rank'>) {
    this.id = c.id;
    this.type = c.type;
    this.userId = c.userId;
    this.at = c.at;
    this.payloadType = c.payload.type;
    this.user = c.payload.user;
  }

  /** The event as committed: the same fields, in the same order. */
  abstract complete(): Omit<ChangeEvent, 'rank'>;
}

/**
 * A marked event kept by the memory outbox with its settled ranks, the parts of the event it needs and no
 * more: its board's description is the one shared object the core made its `leaderboard` from (see
 * `rankMarkerBoard`), and the event's own object, payload object, leaderboard copy and marker are left to
 * the young generation's collection. The outbox keeps events until they are pruned, and each object it
 * keeps is copied and promoted by the collector: with 9 boards a call keeps some 6 of these. The completed
 * event is built when first read (most events are never read twice, many never).
 */
class SettledRank extends KeptEvent {
  constructor(
    c: ChangeEvent,
    /** The leaderboard's fields in their order, shared: its value, previousValue and ranks are this event's below. */
    readonly board: Readonly<Record<string, unknown>>,
    readonly value: unknown,
    readonly previousValue: unknown,
    readonly previousRank: number | null,
    readonly rank: number | null,
  ) {
    super(c);
  }

  /** The completed event, as {@link settledEvent} builds it from the whole event. */
  complete(): Omit<ChangeEvent, 'rank'> {
    const leaderboard: Record<string, unknown> = { ...this.board };
    leaderboard.value = this.value;
    leaderboard.previousValue = this.previousValue;
    leaderboard.previousRank = this.previousRank;
    leaderboard.rank = this.rank;
    return { id: this.id, type: this.type, userId: this.userId, at: this.at, payload: { type: this.payloadType, user: this.user, leaderboard } };
  }
}

/**
 * The shared board description to keep a marked event by (see {@link SettledRank}): for an event as
 * `deriveChanges` made it (its marker carries the description and the event's very `leaderboard` object,
 * see `rankMarkerBoard`) whose payload has exactly `type`, `user` and `leaderboard`, in that order; else
 * undefined, and the event is completed at once and kept whole.
 */
export function compactBoard(c: ChangeEvent): Readonly<Record<string, unknown>> | undefined {
  const p = c.payload;
  if (typeof p !== 'object' || p === null) return undefined;
  const board = rankMarkerBoard(c.rank, p.leaderboard);
  if (board === undefined) return undefined;
  // Exactly `type`, `user` and `leaderboard`, in that order (for...in also lists inherited keys: any is one too many).
  let n = 0;
  for (const k in p) {
    if (++n > 3 || k !== (n === 1 ? 'type' : n === 2 ? 'user' : 'leaderboard')) return undefined;
  }
  return n === 3 ? board : undefined;
}

/** The fields a `points.changed` payload's `points` starts with (a points system's view), in their order. */
const SYSTEM_FIELDS = ['id', 'key', 'name', 'description', 'badgeUrl', 'maxPoints'] as const;
/** The fields of one award in a `points.changed` payload, in their order (one with boosts or grants has more). */
const AWARD_FIELDS = ['id', 'awarded', 'date', 'total', 'trigger'] as const;
/** The fields of a `points.changed` payload's `points` before its optional `level`, in their order. */
const POINTS_FIELDS: readonly string[] = [...SYSTEM_FIELDS, 'total', 'added', 'awards'];
/** `level` of a kept points event whose payload has none (a `level` of null is a level that went to none). */
const NO_LEVEL: unique symbol = Symbol('no level');

/**
 * A kept `points.changed` event (the events the rich configuration's calls keep most of: about two a call),
 * in one object and one array instead of the event, its payload, its `points`, the awards list and an object
 * per award. `system` is the points system's view fields, shared by the outbox's events of that system (see
 * `MemoryOutbox.systemFields`); `awards` holds each award's five fields in turn. The event is completed when
 * first read, with the same fields in the same order (see {@link compactPoints}).
 */
class KeptPoints extends KeptEvent {
  constructor(
    c: Omit<ChangeEvent, 'rank'>,
    readonly system: readonly unknown[],
    readonly total: unknown,
    readonly added: unknown,
    readonly awards: readonly unknown[],
    readonly level: unknown,
  ) {
    super(c);
  }

  /** The completed event: `{ type, user, points }` with `points` as the core built it. */
  complete(): Omit<ChangeEvent, 'rank'> {
    // Built from the same field lists the event was kept by, so the two cannot drift apart.
    const a = this.awards;
    const awards: Record<string, unknown>[] = [];
    for (let i = 0; i < a.length; i += AWARD_FIELDS.length) {
      const award: Record<string, unknown> = {};
      AWARD_FIELDS.forEach((k, j) => (award[k] = a[i + j]));
      awards.push(award);
    }
    const points: Record<string, unknown> = {};
    SYSTEM_FIELDS.forEach((k, j) => (points[k] = this.system[j]));
    points.total = this.total;
    points.added = this.added;
    points.awards = awards;
    if (this.level !== NO_LEVEL) points.level = this.level;
    return { id: this.id, type: this.type, userId: this.userId, at: this.at, payload: { type: this.payloadType, user: this.user, points } };
  }
}

/**
 * How many enumerable keys (inherited ones too) `o` has when they are exactly `keys`, in that order, maybe
 * followed by `last`; -1 when they are not.
 */
function keysMatching(o: object, keys: readonly string[], last?: string): number {
  let n = 0;
  for (const k in o) {
    if (n < keys.length ? k !== keys[n] : n > keys.length || k !== last) return -1;
    n++;
  }
  return n === keys.length || (last !== undefined && n === keys.length + 1) ? n : -1;
}

/** A plain object: its prototype is `Object.prototype` (an object literal's, a JSON copy's). */
const isPlain = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && Object.getPrototypeOf(v) === Object.prototype;

/**
 * The parts of a `points.changed` event to keep it by (see {@link KeptPoints}): for a payload of exactly
 * `type`, `user` and `points`, in that order, whose `points` has a system's view fields, `total`, `added`,
 * `awards` and maybe `level`, in that order, and whose awards have exactly the five {@link AWARD_FIELDS} in
 * order (awards with boosts or grants are kept whole); payload, `points` and awards plain objects, `awards` a
 * plain array. Anything else is undefined (the event is kept whole).
 */
export function compactPoints(c: Omit<ChangeEvent, 'rank'>): { points: Readonly<Record<string, unknown>>; total: unknown; added: unknown; awards: unknown[]; level: unknown } | undefined {
  if (c.type !== 'points.changed') return undefined;
  const p = c.payload;
  if (!isPlain(p) || keysMatching(p, ['type', 'user', 'points']) < 0) return undefined;
  const points = p.points;
  // `level` is kept when for...in lists it: an own non-enumerable `level` is none, as in the event's JSON.
  const n = isPlain(points) ? keysMatching(points, POINTS_FIELDS, 'level') : -1;
  if (n < 0) return undefined;
  const list = (points as Record<string, unknown>).awards;
  if (!Array.isArray(list) || Object.getPrototypeOf(list) !== Array.prototype) return undefined;
  const awards: unknown[] = new Array(list.length * 5);
  for (let i = 0; i < list.length; i++) {
    const a: unknown = list[i];
    if (!isPlain(a) || keysMatching(a, AWARD_FIELDS) < 0) return undefined;
    // AWARD_FIELDS in their order (just checked), read by name: this runs in every commit that keeps one.
    awards[i * 5] = a.id;
    awards[i * 5 + 1] = a.awarded;
    awards[i * 5 + 2] = a.date;
    awards[i * 5 + 3] = a.total;
    awards[i * 5 + 4] = a.trigger;
  }
  const pts = points as Record<string, unknown>;
  return { points: pts, total: pts.total, added: pts.added, awards, level: n > POINTS_FIELDS.length ? pts.level : NO_LEVEL };
}

/** A kept marked event: the compact {@link SettledRank} when {@link compactBoard} allows, else completed now. */
function keptRank(c: ChangeEvent, previousRank: number | null, rank: number | null): Omit<ChangeEvent, 'rank'> | SettledRank {
  const board = compactBoard(c);
  if (board === undefined) return settledEvent(c, previousRank, rank);
  const p = c.payload;
  const lb = p.leaderboard as Record<string, unknown>;
  return new SettledRank(c, board, lb.value, lb.previousValue, previousRank, rank);
}

/** The types of board-run events, whose payload's `leaderboard.rankings` lists users (see `MemoryOutbox.eraseUser`). */
const BOARD_RUN_TYPES: ReadonlySet<string> = new Set(['leaderboard.started', 'leaderboard.finished', 'leaderboard.changed']);
/** The marks of `leaderboard.changed` (engine/changes.ts): their values list the rankings last sent. */
const CHANGED_MARK = 'leaderboard.changed|';

const isBoardRun = (e: Omit<ChangeEvent, 'rank'> | KeptEvent): boolean => e.userId === null && BOARD_RUN_TYPES.has(e.type);

/**
 * A board-run event without `userId`'s entries in its `leaderboard.rankings` (the others as they were); the
 * event itself when it has none.
 */
function withoutRanking(e: Omit<ChangeEvent, 'rank'>, userId: string): Omit<ChangeEvent, 'rank'> {
  const lb = isObject(e.payload) ? e.payload.leaderboard : undefined;
  const rankings = isObject(lb) ? lb.rankings : undefined;
  if (!Array.isArray(rankings) || !rankings.some((r) => isObject(r) && r.userId === userId)) return e;
  return { ...e, payload: { ...e.payload, leaderboard: { ...(lb as Record<string, unknown>), rankings: rankings.filter((r) => !(isObject(r) && r.userId === userId)) } } };
}

/** A rank, or null when there is none or it is above the board's `cap`. */
const capped = (rank: number | null | undefined, cap: number): number | null => (rank != null && rank <= cap ? rank : null);

const POSITION = /^[0-9]{1,15}$/;

/** Code-point order (the order of UTF-8 bytes, PostgreSQL's "C" collation), not JavaScript's code units. */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    // Surrogates (code points above U+FFFF) sort after every other unit in code-point order.
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    if (xs !== ys) return xs ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}

/** (due ms, user id) order: earlier first, ties by user id in code-point order. */
const before = (a: { ms: number; userId: string }, b: { ms: number; userId: string }) => a.ms < b.ms || (a.ms === b.ms && compareCodePoints(a.userId, b.userId) < 0);

/** A binary min-heap of (due ms, user id). */
class DueHeap {
  private readonly items: { ms: number; userId: string }[] = [];
  get size() {
    return this.items.length;
  }
  peek() {
    return this.items[0];
  }
  push(item: { ms: number; userId: string }) {
    const a = this.items;
    a.push(item);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(item, a[p] as { ms: number; userId: string })) break;
      a[i] = a[p] as { ms: number; userId: string };
      i = p;
    }
    a[i] = item;
  }
  pop() {
    const a = this.items;
    const top = a[0];
    const last = a.pop();
    if (a.length > 0 && last) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= a.length) break;
        const r = l + 1;
        const c = r < a.length && before(a[r] as { ms: number; userId: string }, a[l] as { ms: number; userId: string }) ? r : l;
        if (!before(a[c] as { ms: number; userId: string }, last)) break;
        a[i] = a[c] as { ms: number; userId: string };
        i = c;
      }
      a[i] = last;
    }
    return top;
  }
}

/**
 * The memory store's outbox: events in commit order (position = sequence number), consumer cursors with
 * leases, marks, delivery outcomes and the due index (a heap with lazy deletion: O(log n) per change, a
 * claim costs the users it returns plus the stale heap entries it passes).
 */
export class MemoryOutbox implements OutboxStore {
  /**
   * The events by sequence number (null once erased), kept as committed: their `StoredChange` (with its
   * position) is built when read, so a stored event costs no copy and no position string.
   */
  private log: (Omit<ChangeEvent, 'rank'> | KeptEvent | null)[] = [];
  /** Points systems' view fields, shared by the kept points events (see {@link systemFields}). */
  private readonly systems = new Map<string, readonly unknown[]>();
  /** Sequence number of `log[0]`. */
  private base = 1;
  private readonly byUser = new Map<string, number[]>();
  /** Sequence numbers of the board-run events (no user; `leaderboard.*`), whose rankings name users: see {@link eraseUser}. */
  private boardRuns: number[] = [];
  private readonly consumers = new Map<string, { cursor: string | null; owner: string | null; until: number }>();
  private readonly marks = new Map<string, string>();
  private readonly deliveries = new Map<string, DeliveryRecord[]>();
  /** The order in which delivery outcomes were recorded, across consumers (pruning breaks ties of instants by it). */
  private readonly recorded = new WeakMap<object, number>();
  private recordedCount = 0;
  private readonly due = new Map<string, number>();
  private readonly heap = new DueHeap();
  private lastDue: { iso: string; ms: number } = { iso: '', ms: NaN };

  /**
   * Appends a commit's (settled) events. Synchronous: part of the commit's atomic step. The outbox keeps the
   * event objects themselves (as it always kept their payloads): the commit hands them over.
   */
  append(events: readonly Omit<ChangeEvent, 'rank'>[]): void {
    for (const e of events) this.keep(e, e.userId);
  }

  /**
   * Appends a commit's events as {@link settleChanges} would settle them, completing marked events only when
   * read. Synchronous: part of the commit's atomic step.
   */
  appendCommit(changes: readonly ChangeEvent[] | undefined, ranks: readonly RankChange[], userId: string): void {
    settleEach(changes, ranks, userId, (c, settled) => this.keep(settled ? keptRank(c, settled.previousRank, settled.rank) : this.kept(c), c.userId));
  }

  /** An unmarked event as kept: a {@link KeptPoints} when {@link compactPoints} allows, else the event itself. */
  private kept(c: Omit<ChangeEvent, 'rank'>): Omit<ChangeEvent, 'rank'> | KeptPoints {
    // Part of a commit already under way (see `appendCommit`): whatever the event holds (a getter that throws,
    // a proxy), this never throws, so the commit applies whole. An event compaction cannot read is kept whole.
    try {
      const parts = compactPoints(c);
      if (parts !== undefined) return new KeptPoints(c, this.systemFields(parts.points), parts.total, parts.added, parts.awards, parts.level);
    } catch {
      // kept whole, below
    }
    return c;
  }

  /**
   * The one shared list of the view fields (SYSTEM_FIELDS) of `points`' system (its events' lists are all the
   * same): kept per system id, replaced when the system's fields change (a configuration change); the list is
   * made only then. Bounded: past 1,000 systems (only a caller inventing them without end gets there), each
   * event keeps its own.
   */
  private systemFields(points: Readonly<Record<string, unknown>>): readonly unknown[] {
    const id = points.id;
    const known = typeof id === 'string' ? this.systems.get(id) : undefined;
    if (known !== undefined) {
      let same = true;
      for (let i = 0; i < SYSTEM_FIELDS.length && same; i++) same = Object.is(known[i], points[SYSTEM_FIELDS[i] as string]);
      if (same) return known;
    }
    const fields = SYSTEM_FIELDS.map((k) => points[k]);
    if (typeof id === 'string' && (known !== undefined || this.systems.size < 1000)) this.systems.set(id, fields);
    return fields;
  }

  private keep(e: Omit<ChangeEvent, 'rank'> | KeptEvent, userId: string | null): void {
    const seq = this.base + this.log.length;
    this.log.push(e);
    if (userId !== null) {
      let list = this.byUser.get(userId);
      if (!list) this.byUser.set(userId, (list = []));
      list.push(seq);
    } else if (isBoardRun(e)) this.boardRuns.push(seq);
  }

  /** Sets (or with null clears) a user's due instant. Synchronous: part of a commit. */
  setDue(userId: string, due: string | null | undefined): void {
    if (due === undefined) return;
    if (due === null) {
      this.due.delete(userId);
      return;
    }
    // Users' due instants often coincide (the start of a day): the last one parsed is remembered.
    const ms = this.lastDue.iso === due ? this.lastDue.ms : instantMs(due);
    if (this.lastDue.iso !== due) this.lastDue = { iso: due, ms };
    if (this.due.get(userId) === ms) return;
    this.due.set(userId, ms);
    this.heap.push({ ms, userId });
  }

  /**
   * Forgets everything about a user: their events, their due instant, their place in the rankings of board-run
   * events (each such event is kept without the user's entry; the others' entries as they were) and the marks
   * of `leaderboard.changed` that name them (the next sweep compares with nothing and sends the rankings
   * again) when `fromRuns` (an erasure; a reset keeps them: the user goes on under the id). Synchronous: part
   * of an erasure.
   */
  eraseUser(userId: string, fromRuns: boolean): void {
    for (const seq of this.byUser.get(userId) ?? []) {
      const i = seq - this.base;
      if (i >= 0 && i < this.log.length) this.log[i] = null;
    }
    this.byUser.delete(userId);
    this.due.delete(userId);
    if (!fromRuns) return;
    for (const seq of this.boardRuns) {
      const i = seq - this.base;
      const e = i >= 0 && i < this.log.length ? this.log[i] : null;
      if (e && !(e instanceof KeptEvent)) {
        const without = withoutRanking(e, userId);
        if (without !== e) this.log[i] = without;
      }
    }
    const named = JSON.stringify(userId);
    for (const [mark, value] of this.marks) if (mark.startsWith(CHANGED_MARK) && value.includes(named)) this.marks.delete(mark);
  }

  private seqOf(after: string | undefined): number {
    if (after === undefined) return this.base - 1;
    if (typeof after !== 'string' || !POSITION.test(after)) throw new ValidationError(`after is not a change cursor (got ${JSON.stringify(after)})`, [{ path: ['after'], message: 'must be a cursor from readChanges' }]);
    return Number(after);
  }

  async readChanges(page: { after?: string; limit: number }): Promise<ChangesPage> {
    const from = Math.max(this.seqOf(page.after) + 1, this.base);
    const events: StoredChange[] = [];
    let next = page.after ?? String(this.base - 1);
    for (let i = from - this.base; i < this.log.length && events.length < page.limit; i++) {
      let e = this.log[i];
      if (e instanceof KeptEvent) this.log[i] = e = e.complete();
      next = String(this.base + i);
      // A missing payload reads as {} (as PostgreSQL stores it).
      if (e) events.push(Object.freeze({ id: e.id, type: e.type, userId: e.userId, at: e.at, payload: e.payload === undefined ? {} : e.payload, position: next }));
    }
    return { events, next };
  }

  async claimConsumer(lease: { consumer: string; owner: string; now: string; leaseMs: number }): Promise<{ cursor: string | null } | null> {
    const now = instantParam('now', lease.now);
    const c = this.consumers.get(lease.consumer);
    if (c && c.owner !== null && c.owner !== lease.owner && c.until > now) return null;
    if (c) {
      c.owner = lease.owner;
      c.until = now + lease.leaseMs;
      return { cursor: c.cursor };
    }
    this.consumers.set(lease.consumer, { cursor: null, owner: lease.owner, until: now + lease.leaseMs });
    return { cursor: null };
  }

  async advanceConsumer(update: { consumer: string; owner: string; cursor: string; now: string; leaseMs: number }): Promise<boolean> {
    const until = instantParam('now', update.now) + update.leaseMs;
    const c = this.consumers.get(update.consumer);
    if (!c || c.owner !== update.owner) return false;
    c.cursor = update.cursor;
    c.until = until;
    return true;
  }

  async releaseConsumer(lease: { consumer: string; owner: string }): Promise<void> {
    const c = this.consumers.get(lease.consumer);
    if (c && c.owner === lease.owner) {
      c.owner = null;
      c.until = 0;
    }
  }

  async getMarks(marks: readonly string[]): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    for (const m of marks) {
      const v = this.marks.get(m);
      if (v !== undefined) out[m] = v;
    }
    return out;
  }

  async appendChanges(entry: { mark: string; expected: string | null; value: string; changes: readonly ChangeEvent[] }): Promise<boolean> {
    if ((this.marks.get(entry.mark) ?? null) !== entry.expected) return false;
    this.marks.set(entry.mark, entry.value);
    this.append(settleChanges(entry.changes, [], ''));
    return true;
  }

  async claimDue(claim: { now: string; limit: number; leaseMs: number }): Promise<string[]> {
    const now = instantParam('now', claim.now);
    const out: string[] = [];
    const again: { ms: number; userId: string }[] = [];
    while (out.length < claim.limit && this.heap.size > 0) {
      const top = this.heap.peek() as { ms: number; userId: string };
      if (top.ms > now) break;
      this.heap.pop();
      // A stale entry (the user's due instant moved, or the user is gone) is dropped.
      if (this.due.get(top.userId) !== top.ms) continue;
      out.push(top.userId);
      // Leased at once, so that another entry of the user in the heap is stale from here on.
      this.due.set(top.userId, now + claim.leaseMs);
      again.push({ ms: now + claim.leaseMs, userId: top.userId });
    }
    for (const a of again) this.heap.push(a);
    return out;
  }

  async pruneChanges(prune: { before: string; limit: number }): Promise<number> {
    const before = instantParam('before', prune.before);
    let removed = 0;
    let i = 0;
    while (i < this.log.length && removed < prune.limit) {
      const e = this.log[i];
      if (e && Date.parse(e.at) >= before) break;
      if (e) removed++;
      i++;
    }
    if (i > 0) {
      this.log = this.log.slice(i);
      this.base += i;
      this.boardRuns = this.boardRuns.filter((seq) => seq >= this.base);
    }
    // Delivery outcomes dated before the cutoff, oldest first, at most `limit` (as the PostgreSQL store).
    // Equal instants in the order recorded (`n`, as the PostgreSQL store's seq).
    const old: { consumer: string; at: number; seq: number; n: number }[] = [];
    for (const [consumer, list] of this.deliveries) list.forEach((r, seq) => Date.parse(r.at) < before && old.push({ consumer, at: Date.parse(r.at), seq, n: this.recorded.get(r) ?? 0 }));
    old.sort((a, b) => a.at - b.at || a.n - b.n);
    const drop = new Map<string, Set<number>>();
    for (const o of old.slice(0, prune.limit)) (drop.get(o.consumer) ?? drop.set(o.consumer, new Set()).get(o.consumer)!).add(o.seq);
    for (const [consumer, seqs] of drop) this.deliveries.set(consumer, (this.deliveries.get(consumer) ?? []).filter((_, seq) => !seqs.has(seq)));
    return removed;
  }

  async recordDeliveries(records: readonly DeliveryRecord[]): Promise<void> {
    for (const r of records) {
      let list = this.deliveries.get(r.consumer);
      if (!list) this.deliveries.set(r.consumer, (list = []));
      const kept = { ...r };
      this.recorded.set(kept, this.recordedCount++);
      list.push(kept);
    }
  }

  async readDeliveries(query: { consumer: string; limit: number }): Promise<DeliveryRecord[]> {
    const list = this.deliveries.get(query.consumer) ?? [];
    return list.slice(Math.max(0, list.length - query.limit)).reverse();
  }
}
