/**
 * `createRedisRankIndex`: leaderboard ranks on Redis sorted sets, O(log n) per update, rank and page.
 *
 * Layout per index (one hash tag, so a cluster keeps an index on one slot):
 * - `{prefix}{index}:z`  sorted set; score = -value, member = zero-padded reachedAt millis + ":" + the user
 *   id as UTF-16 hex. Ascending (score, member) is exactly Laurel's order: higher value, earlier reachedAt,
 *   smaller user id (code-unit order, as in the memory store).
 * - `{prefix}{index}:h`  hash user id -> "version|member|value" (a removed entry keeps "version||", so an
 *   older write that arrives late is still refused; `scanUsers` lists the hash's live entries).
 * - `{prefix}{index}:r:<user>` list of daily rank-history rows, newest first, all of them (as the other stores
 *   keep them: `getWrapped` reads a whole year of them).
 * A tenant's index (`tenant(id)`) uses the prefix `{prefix}t:<id, URI-encoded>:` instead.
 * `erase` (a user's erasure) removes the user's member, hash field and history list from each index it is
 * given, so nothing of the user stays (a reset leaves "version||" instead of nothing).
 * A whole `apply` (all the writes of a commit, or of a batch of commits) runs as one Lua script, one round
 * trip: each write in it atomic, version-guarded, absolute, applied in the order given. A write that asks for
 * it (`thresholdRank`) also gets the value at that rank after it, in the same script. `preview` answers what
 * such an `apply` would give, without changing anything, also in one script.
 *
 * Every method call is bounded by one deadline (`timeoutMs`), whatever the client's own retry and
 * offline-queue settings, and every failure leaves it as a `StorageUnavailableError`. A command that timed
 * out may still run later (ioredis resends or flushes its queue when Redis comes back): writes are absolute
 * and version-guarded, so such a late write is refused as stale if anything newer reached the index first.
 */
import { createHash } from 'node:crypto';
import { storageError, StorageUnavailableError, ValidationError } from '../errors.js';
import type { LeaderboardWrite } from '../core/types.js';
import type { RankChange, RankedEntry, RankHistoryRow } from '../store/types.js';
import type { RankIndex, VersionedWrite } from '../store/rank-index.js';

/** The part of an ioredis client (or any client with `call`) that the index uses. */
export interface RedisLike {
  /** Sends one Redis command (`call('ZADD', key, score, member)`) and resolves with its reply. */
  call(command: string, ...args: (string | number)[]): Promise<unknown>;
  /**
   * ioredis' connection status. When it is `reconnecting`, `close` or `end`, calls fail at once with
   * `StorageUnavailableError` instead of queueing commands until the deadline. Clients without it are fine.
   */
  readonly status?: string;
  /**
   * True for an ioredis `Cluster`: a script may only touch keys of one hash slot there (each index's keys
   * share one), so `apply` sends one script per index, all at once, instead of one for every write.
   */
  readonly isCluster?: boolean;
}

/** Options of {@link createRedisRankIndex}: the client, the key prefix, the time limit per call and key expiry. */
export interface RedisRankIndexOptions {
  /** An ioredis client (`new Redis(url)`; its default options are fine) or anything with `call`. */
  redis: RedisLike;
  /** Key prefix (default `laurel:`). */
  prefix?: string;
  /**
   * The most any one method call may take, in milliseconds, all its commands included (a multi-write
   * `apply`, an EVALSHA retried as EVAL after NOSCRIPT): default 1000. When it passes, the call rejects with
   * `StorageUnavailableError` and sends no further command. A positive integer up to 2^31 - 1; keep it
   * small (at most about 2000): the engine waits for it after a commit before answering with null ranks.
   */
  timeoutMs?: number;
  /**
   * Seconds an index's keys live after its last write (e.g. finished runs), or null (or 0, a negative number,
   * NaN) to keep them. A fraction counts as the next whole second. A value that is no number, or above 10^12
   * (Infinity included), makes the `apply` reject with `ValidationError` before it writes anything.
   */
  expireSeconds?: (index: string) => number | null;
}

/**
 * Applies writes in order, in one script (one round trip for a whole `apply`). Per write i (0-based):
 * KEYS[3i+1..3i+3] = z, h, history list; ARGV[i+1] = the write's fields in one string, `|`-separated:
 * version, remove ('1'/'0'), member, score, value, date, ttl, ranked ('1'/'0'), threshold rank ('' for none),
 * and last the user id (which may itself hold `|`: it is the rest of the string). One argument per write and
 * one string in reply: each argument and each reply element costs the client and the server a few
 * microseconds, more than the script's own parsing of the packed fields.
 * Replies one string: 6 `|`-separated fields per write, in order: previous rank, rank, previous value, value
 * ('' for none), 'ok' or 'stale', and the score at the threshold rank after the write ('' when not asked or
 * when the index holds fewer).
 * An unranked write (an index read only by value ranges) costs no rank lookup: its ranks read '' and it
 * keeps no history.
 */
const SCRIPT = `
local out, n = {}, 0
local FIELDS = '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$'
local function one(z, h, hist, vs, remove, member, score, value, date, ttl, ranked, user)
  local prevRank, prevValue = '', ''
  local cur = redis.call('HGET', h, user)
  if cur then
    local s1 = string.find(cur, '|', 1, true)
    local s2 = string.find(cur, '|', s1 + 1, true)
    local curMember = string.sub(cur, s1 + 1, s2 - 1)
    local curValue = string.sub(cur, s2 + 1)
    if tonumber(string.sub(cur, 1, s1 - 1)) > tonumber(vs) then
      local r = ''
      if ranked and curMember ~= '' then
        local zr = redis.call('ZRANK', z, curMember)
        if zr then r = tostring(zr + 1) end
      end
      return r, r, curValue, curValue, 'stale'
    end
    if curMember ~= '' then
      if ranked then
        local zr = redis.call('ZRANK', z, curMember)
        if zr then prevRank = tostring(zr + 1) end
      end
      prevValue = curValue
      -- the same member only changes its score: ZADD below moves it, no removal needed
      if curMember ~= member or remove == '1' then redis.call('ZREM', z, curMember) end
    end
  end
  local rank, newValue = '', ''
  if remove == '1' then
    redis.call('HSET', h, user, vs .. '||')
  else
    redis.call('ZADD', z, score, member)
    redis.call('HSET', h, user, vs .. '|' .. member .. '|' .. value)
    if ranked then rank = tostring(redis.call('ZRANK', z, member) + 1) end
    newValue = value
  end
  if ranked then
    -- rows "date|previousRank|rank|previousValue|value", newest first, one per date; the date's first write
    -- sets previous*
    local row = date .. '|' .. prevRank .. '|' .. rank .. '|' .. prevValue .. '|' .. newValue
    local at, found = 0, redis.call('LINDEX', hist, 0)
    if found and string.sub(found, 1, #date) > date then
      -- A write dated before the newest row (a user who moved west, whose activity counts by their local date,
      -- or a clock that went back) updates or slots in at its own date, as the other stores do. Its date is
      -- usually a row or two down: the rows below the newest are read in pieces of 8, 32, 128, ... until one
      -- is not later than the date (not the whole list, which keeps every day the user was active).
      at, found = nil, nil
      local from, size = 1, 8
      while not found do
        local rows = redis.call('LRANGE', hist, from, from + size - 1)
        for j = 1, #rows do
          if string.sub(rows[j], 1, #date) <= date then
            at, found = from + j - 1, rows[j]
            break
          end
        end
        if #rows < size then break end
        from, size = from + size, size * 4
      end
    end
    if found and string.sub(found, 1, #date + 1) == date .. '|' then
      local p2 = string.find(found, '|', #date + 2, true)
      local p3 = string.find(found, '|', p2 + 1, true)
      local p4 = string.find(found, '|', p3 + 1, true)
      redis.call('LSET', hist, at, string.sub(found, 1, p2) .. rank .. string.sub(found, p3, p4) .. newValue)
    elseif at == 0 then
      redis.call('LPUSH', hist, row)
    elseif found then
      redis.call('LINSERT', hist, 'BEFORE', found, row)
    else
      redis.call('RPUSH', hist, row)
    end
  end
  ttl = tonumber(ttl)
  if ttl and ttl > 0 then
    redis.call('EXPIRE', z, ttl)
    redis.call('EXPIRE', h, ttl)
    redis.call('EXPIRE', hist, ttl)
  end
  return prevRank, rank, prevValue, newValue, 'ok'
end
for i = 0, #KEYS / 3 - 1 do
  local k = 3 * i
  local z = KEYS[k + 1]
  local vs, remove, member, score, value, date, ttl, ranked, threshold, user = string.match(ARGV[i + 1], FIELDS)
  local r1, r2, r3, r4, r5 = one(z, KEYS[k + 2], KEYS[k + 3], vs, remove, member, score, value, date, ttl, ranked == '1', user)
  local t = ''
  local tr = tonumber(threshold)
  if tr then
    local e = redis.call('ZRANGE', z, tr - 1, tr - 1, 'WITHSCORES')
    if e[2] then t = e[2] end
  end
  out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5], out[n + 6] = r1, r2, r3, r4, r5, t
  n = n + 6
end
return table.concat(out, '|')
`;
/**
 * `preview`: the rank changes the writes would give, applied in order, without changing anything (it sends
 * read commands only). Per write i (0-based): KEYS[2i+1..2i+2] = z, h; ARGV[6i+1..6i+6] = user, remove
 * ('1'/'0'), member, score, value, ranked ('1'/'0'). Replies 4 strings per write as the apply script does
 * (previous rank, rank, previous value, value; '' for none). No version guard: every write counts.
 *
 * The writes seen so far live in an overlay per index: `removed`, the real points (score, member) of the
 * users written, and `added`, their current hypothetical points, both sorted. The rank of a point p is then
 * (real members strictly before p) - (removed points before p) + (added points before p) + 1, with the
 * written user's own hypothetical point out of `added` meanwhile. Real members before p: ZCOUNT of the lower
 * scores, then a binary search (ZRANGE by position) among the members of p's score, whose order is the byte
 * order of the members (compared byte by byte: Lua's `<` on strings follows the server's locale).
 * Cost per write: O(log n) commands (O(log n + log t) with t members of p's score), O(log w) comparisons
 * plus an O(w) array shift in C over the call's w writes to the same index.
 */
const PREVIEW_SCRIPT = `
local function less(s1, m1, s2, m2)
  if s1 ~= s2 then return s1 < s2 end
  if m1 == m2 then return false end
  local n1, n2 = #m1, #m2
  local n = n1 < n2 and n1 or n2
  for i = 1, n do
    local b1, b2 = string.byte(m1, i), string.byte(m2, i)
    if b1 ~= b2 then return b1 < b2 end
  end
  return n1 < n2
end
-- the first position (1-based) of the sorted array of {score, member} that is not before (s, m)
local function lower(arr, s, m)
  local lo, hi = 1, #arr + 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local e = arr[mid]
    if less(e[1], e[2], s, m) then lo = mid + 1 else hi = mid end
  end
  return lo
end
-- members of z strictly before (s, m); sstr is s as Redis parses it exactly
local function realBefore(z, s, sstr, m)
  local r = redis.call('ZRANK', z, m)
  if r and tonumber(redis.call('ZSCORE', z, m)) == s then return r end
  local lo = redis.call('ZCOUNT', z, '-inf', '(' .. sstr)
  local hi = lo + redis.call('ZCOUNT', z, sstr, sstr)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local e = redis.call('ZRANGE', z, mid, mid)[1]
    if less(s, e, s, m) then lo = mid + 1 else hi = mid end
  end
  return lo
end
local function rankOf(z, ix, s, sstr, m)
  return realBefore(z, s, sstr, m) - (lower(ix.removed, s, m) - 1) + (lower(ix.added, s, m) - 1) + 1
end
local overlays, out = {}, {}
for i = 0, #KEYS / 2 - 1 do
  local z, h, a = KEYS[2 * i + 1], KEYS[2 * i + 2], 6 * i
  local user, remove, member, sstr, value, ranked = ARGV[a + 1], ARGV[a + 2] == '1', ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6] == '1'
  local ix = overlays[z]
  if not ix then
    ix = { removed = {}, added = {}, users = {} }
    overlays[z] = ix
  end
  -- the user's current entry: {m, v, s, sstr, inset} or false (none)
  local cur = ix.users[user]
  if cur == nil then
    cur = false
    local hv = redis.call('HGET', h, user)
    if hv then
      local s1 = string.find(hv, '|', 1, true)
      local s2 = string.find(hv, '|', s1 + 1, true)
      local m = string.sub(hv, s1 + 1, s2 - 1)
      if m ~= '' then
        cur = { m = m, v = string.sub(hv, s2 + 1) }
        local cs = redis.call('ZSCORE', z, m)
        if cs then
          cur.s, cur.sstr, cur.inset = tonumber(cs), cs, true
          table.insert(ix.removed, lower(ix.removed, cur.s, m), { cur.s, m })
        end
      end
    end
  elseif cur and cur.inset then
    table.remove(ix.added, lower(ix.added, cur.s, cur.m))
  end
  local prevRank, prevValue, rank, newValue = '', '', '', ''
  if cur then
    prevValue = cur.v
    if ranked and cur.inset then prevRank = tostring(rankOf(z, ix, cur.s, cur.sstr, cur.m)) end
  end
  if remove then
    ix.users[user] = false
  else
    local s = tonumber(sstr)
    ix.users[user] = { m = member, v = value, s = s, sstr = sstr, inset = true }
    if ranked then rank = tostring(rankOf(z, ix, s, sstr, member)) end
    table.insert(ix.added, lower(ix.added, s, member), { s, member })
    newValue = value
  end
  out[4 * i + 1], out[4 * i + 2], out[4 * i + 3], out[4 * i + 4] = prevRank, rank, prevValue, newValue
end
return out
`;
const PREVIEW_SHA = createHash('sha1').update(PREVIEW_SCRIPT).digest('hex');
/** Default bound on one method call. */
const DEFAULT_TIMEOUT_MS = 1000;
/** setTimeout's largest delay. */
const MAX_TIMER_MS = 2 ** 31 - 1;
const SHA = createHash('sha1').update(SCRIPT).digest('hex');

/** One entry with its 0-based rank, read atomically: {member, value, rank} or nil. */
const GET_SCRIPT = `
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if not cur then return false end
local s1 = string.find(cur, '|', 1, true)
local s2 = string.find(cur, '|', s1 + 1, true)
local member = string.sub(cur, s1 + 1, s2 - 1)
if member == '' then return false end
local r = redis.call('ZRANK', KEYS[1], member)
if not r then return false end
return {member, string.sub(cur, s2 + 1), r}
`;
const GET_SHA = createHash('sha1').update(GET_SCRIPT).digest('hex');

/**
 * Forgets a user in indexes, whatever the versions. Per index i (0-based): KEYS[3i+1..3i+3] = z, h, history
 * list; ARGV[1] = user, ARGV[2] = the version a reset leaves as a removal ('' for an erasure: the hash field
 * goes too). Replies the number of entries removed.
 */
const ERASE_SCRIPT = `
local user, tomb, removed = ARGV[1], ARGV[2], 0
for i = 0, #KEYS / 3 - 1 do
  local z, h, hist = KEYS[3 * i + 1], KEYS[3 * i + 2], KEYS[3 * i + 3]
  local cur = redis.call('HGET', h, user)
  if cur then
    local s1 = string.find(cur, '|', 1, true)
    local s2 = string.find(cur, '|', s1 + 1, true)
    local member = string.sub(cur, s1 + 1, s2 - 1)
    if member ~= '' then removed = removed + redis.call('ZREM', z, member) end
    if tomb == '' then redis.call('HDEL', h, user) else redis.call('HSET', h, user, tomb .. '||') end
  end
  redis.call('DEL', hist)
end
return removed
`;
const ERASE_SHA = createHash('sha1').update(ERASE_SCRIPT).digest('hex');

/** 4-digit hex of the code units below 256 (most user ids are ASCII). */
const HEX4 = Array.from({ length: 256 }, (_, c) => c.toString(16).padStart(4, '0'));
const hex16 = (s: string) => {
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    out += c < 256 ? (HEX4[c] as string) : c.toString(16).padStart(4, '0');
  }
  return out;
};
const unhex16 = (h: string) => {
  let out = '';
  for (let i = 0; i < h.length; i += 4) out += String.fromCharCode(parseInt(h.slice(i, i + 4), 16));
  return out;
};
// The instant part sorts as text in time order: 16 zero-padded digits from 1970 on (the layout existing
// indexes hold), and for instants before 1970 "-" (which sorts before every digit) followed by 16 digits of
// 10^15 + millis, so earlier instants sort first there too.
const NEGATIVE_OFFSET = 1e15; // + millis stays an exact integer for every supported instant (>= 1900)
const instantKey = (ms: number) => (ms >= 0 ? String(ms).padStart(16, '0') : `-${String(NEGATIVE_OFFSET + ms).padStart(16, '0')}`);
const memberOf = (userId: string, reachedAt: string) => `${instantKey(Date.parse(reachedAt))}:${hex16(userId)}`;
const parseMember = (m: string) => {
  const i = m.indexOf(':');
  const key = m.slice(0, i);
  const ms = key.startsWith('-') ? Number(key.slice(1)) - NEGATIVE_OFFSET : Number(key);
  return { reachedAt: new Date(ms).toISOString(), userId: unhex16(m.slice(i + 1)) };
};
const orNull = (v: unknown) => (v === '' || v === null || v === undefined ? null : Number(v));
const EPOCH = new Date(0).toISOString();
/** The rank whose value a write asks for (a positive integer), or null. */
const thresholdRankOf = (w: VersionedWrite): number | null => {
  const t = w.thresholdRank;
  return typeof t === 'number' && Number.isSafeInteger(t) && t >= 1 ? t : null;
};

/**
 * Refuses text that Redis would not get as given: ioredis sends UTF-8, in which a lone surrogate becomes
 * U+FFFD, so two user ids (or index names) that differ only there would name one hash field and one history
 * list. (The engine refuses such ids before they get here; this guards direct callers.)
 */
function checkText(method: string, path: (string | number)[], value: unknown): void {
  if (typeof value !== 'string' || !(value as string & { isWellFormed(): boolean }).isWellFormed()) {
    throw new ValidationError(`Redis rank index: ${method}: ${path.join('.')} must be well-formed text (no lone surrogates, which Redis would keep as U+FFFD)`, [{ path, message: 'must be a string of well-formed UTF-16' }]);
  }
}

/**
 * The longest key lifetime `expireSeconds` may give, in seconds (some 31,700 years): well inside what EXPIRE
 * takes, and written exactly by the script's number formatting (14 significant digits).
 */
const MAX_TTL_SECONDS = 1e12;

/** Most writes one script applies: a larger `apply` (a rebuild's page, a big batch) runs as several scripts. */
const MAX_SCRIPT_WRITES = 1000;

/** Positions of `writes` in groups: all of them in one, or on a cluster one group per index (one hash slot each). */
function groupsOf(writes: readonly { index: string }[], cluster: boolean): number[][] {
  if (!cluster) return [writes.map((_, i) => i)];
  const byIndex = new Map<string, number[]>();
  writes.forEach((w, i) => {
    const group = byIndex.get(w.index);
    if (group) group.push(i);
    else byIndex.set(w.index, [i]);
  });
  return [...byIndex.values()];
}

/**
 * The scripts of an `apply`: groups that may run at the same time, each a list of scripts to run one after
 * another, each script a list of write positions in their given order. Usually one group of one script: every
 * write in one round trip. A group is cut into scripts of at most {@link MAX_SCRIPT_WRITES} writes (so one
 * script never blocks Redis for long), run in order, so the outcome is still that of the writes one by one.
 * On a cluster a script may only touch the keys of one hash slot: one group per index (writes to different
 * indexes do not affect each other's ranks, so running them side by side changes no outcome).
 */
function plan(writes: readonly VersionedWrite[], cluster: boolean): number[][][] {
  return groupsOf(writes, cluster).map((g) => {
    const scripts: number[][] = [];
    for (let i = 0; i < g.length; i += MAX_SCRIPT_WRITES) scripts.push(g.slice(i, i + MAX_SCRIPT_WRITES));
    return scripts;
  });
}

/**
 * Creates a Redis rank index; combine it with a store through `withRankIndex` from `laurel`.
 *
 * @example
 * ```ts
 * import Redis from 'ioredis';
 * const store = withRankIndex(createPostgresStore({ client: pool, ranks: 'none' }),
 *   createRedisRankIndex({ redis: new Redis(process.env.REDIS_URL) }));
 * ```
 */
export function createRedisRankIndex(options: RedisRankIndexOptions): RankIndex {
  const root = options?.prefix ?? 'laurel:';
  // A tenant's keys are `{prefix}t:<tenant, URI-encoded>:{index}:...`. Encoded, a tenant id holds no `{`,
  // `}` or `:`, so its keys never meet another tenant's or the default tenant's (`{prefix}{index}:...`).
  const tenants = new Map<string, RankIndex>();
  const tenant = (id: string): RankIndex => {
    let index = tenants.get(id);
    if (!index) tenants.set(id, (index = redisRankIndex(options, `${root}t:${encodeURIComponent(id)}:`, tenant)));
    return index;
  };
  return redisRankIndex(options, root, tenant);
}

/** The rank index of one tenant (the default tenant's too) at `prefix`; `tenant` finds the siblings. */
function redisRankIndex(options: RedisRankIndexOptions, prefix: string, tenant: (id: string) => RankIndex): RankIndex {
  if (typeof options !== 'object' || options === null) throw new ValidationError('createRedisRankIndex: options must be an object', [{ path: [], message: 'must be an object' }]);
  const { redis } = options;
  if (typeof redis !== 'object' || redis === null || typeof redis.call !== 'function') {
    throw new ValidationError('createRedisRankIndex: `redis` must be an ioredis client or have a `call` method', [{ path: ['redis'], message: 'must have a call method' }]);
  }
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (typeof timeoutMs !== 'number' || !Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > MAX_TIMER_MS) {
    throw new ValidationError(`createRedisRankIndex: timeoutMs must be an integer from 1 to ${MAX_TIMER_MS}`, [{ path: ['timeoutMs'], message: `must be an integer from 1 to ${MAX_TIMER_MS}` }]);
  }
  const cluster = redis.isCluster === true;
  const keys = (index: string) => ({ z: `${prefix}{${index}}:z`, h: `${prefix}{${index}}:h`, r: (userId: string) => `${prefix}{${index}}:r:${userId}` });

  /**
   * One method call in flight: its deadline (on the monotonic clock) and its outcome. Once settled (answered,
   * failed or timed out) it sends nothing more, and a late outcome is dropped. (Methods, not closures made
   * per call: the hot path allocates one object.)
   */
  interface Pending {
    readonly deadline: number;
    /** Neighbours in the list of calls in flight (see `first`). */
    prev: Pending | null;
    next: Pending | null;
    expire(): void;
  }
  class Call<T> implements Pending {
    settled = false;
    readonly deadline = performance.now() + timeoutMs;
    prev: Pending | null = null;
    next: Pending | null = null;
    readonly method: string;
    readonly resolve: (value: T) => void;
    readonly reject: (error: unknown) => void;
    constructor(method: string, resolve: (value: T) => void, reject: (error: unknown) => void) {
      this.method = method;
      this.resolve = resolve;
      this.reject = reject;
    }
    /** Sends one command, unless the call has settled. Never throws: a client that throws is a rejection. */
    send(command: string, ...args: (string | number)[]): Promise<unknown> {
      if (this.settled) return Promise.reject(new Error(`deadline passed before ${command} was sent`));
      try {
        return redis.call(command, ...args);
      } catch (error) {
        return Promise.reject(error);
      }
    }
    succeed(value: T): void {
      if (this.finish()) this.resolve(value);
    }
    fail(error: unknown): void {
      if (this.finish()) this.reject(storageError(`Redis rank index: ${this.method}`, error));
    }
    expire(): void {
      if (this.finish()) this.reject(new StorageUnavailableError(`Redis rank index: ${this.method} timed out after ${timeoutMs} ms`));
    }
    /** Settles the call; false when it had settled already. */
    private finish(): boolean {
      if (this.settled) return false;
      this.settled = true;
      unlink(this);
      return true;
    }
  }
  /** What a method's body gets to send commands with. */
  type Sender = Pick<Call<unknown>, 'send'>;

  /**
   * Calls in flight, in the order they started: a doubly linked list through the calls themselves, from
   * `first` to `last` (a call settles in O(1) and allocates nothing; a Set's add and delete cost more than
   * the rest of the call's bookkeeping). Every call gets the same `timeoutMs`, so this is also the order of
   * their deadlines: one timer, set for the earliest, serves them all. It is not cleared when a call settles
   * (that would cost a timer per call): when it fires it fails the calls whose deadline has passed and sets
   * itself for the next one, or stops when none is in flight. It is unref'd, so it never keeps a process
   * alive.
   */
  let first: Pending | null = null;
  let last: Pending | null = null;
  const link = (p: Pending) => {
    p.prev = last;
    if (last) last.next = p;
    else first = p;
    last = p;
  };
  const unlink = (p: Pending) => {
    if (p.prev) p.prev.next = p.next;
    else first = p.next;
    if (p.next) p.next.prev = p.prev;
    else last = p.prev;
    p.prev = p.next = null;
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  let timerAt = 0;
  const arm = (at: number) => {
    if (timer !== undefined) {
      if (timerAt <= at) return;
      clearTimeout(timer);
    }
    timerAt = at;
    timer = setTimeout(onTimer, Math.max(1, Math.ceil(at - performance.now())));
    (timer as { unref?: () => void }).unref?.();
  };
  const onTimer = () => {
    timer = undefined;
    const now = performance.now();
    const due: Pending[] = [];
    let next = first;
    for (; next !== null && next.deadline <= now; next = next.next) due.push(next);
    if (due.length > 0) {
      // Timers run before I/O in an event-loop turn: after a stall (GC, CPU-bound work) a reply that came
      // in time may still be unread. setImmediate runs after this turn's I/O, so such a reply wins.
      setImmediate(() => {
        for (const p of due) p.expire();
      });
    }
    if (next) arm(next.deadline);
  };

  /**
   * Runs one method call under one deadline. On timeout or on any client error it rejects with
   * `StorageUnavailableError` (the client's error as `cause`); once it has settled, it sends nothing more.
   */
  function bounded<T>(method: string, fn: (call: Sender) => Promise<T>): Promise<T> {
    const status = redis.status;
    if (status === 'reconnecting' || status === 'close' || status === 'end') {
      return Promise.reject(new StorageUnavailableError(`Redis rank index: ${method} failed: the Redis client is ${status === 'reconnecting' ? 'reconnecting' : 'disconnected'} (status ${status})`));
    }
    return new Promise<T>((resolve, reject) => {
      const call = new Call<T>(method, resolve, reject);
      link(call);
      arm(call.deadline);
      let started: Promise<T>;
      try {
        started = fn(call);
      } catch (error) {
        started = Promise.reject(error);
      }
      // Both outcomes are handled, so a call that fails after the deadline is never an unhandled rejection.
      started.then(
        (value) => call.succeed(value),
        (error: unknown) => call.fail(error),
      );
    });
  }

  /** EVALSHA, and EVAL when Redis does not know the script (NOSCRIPT: a restarted or flushed server). */
  function run(call: Sender, args: (string | number)[], script = SCRIPT, sha = SHA, keyCount = 3): Promise<unknown> {
    return call.send('EVALSHA', sha, keyCount, ...args).catch((error: unknown) => {
      if (!String((error as Error)?.message ?? error).includes('NOSCRIPT')) throw error;
      return call.send('EVAL', script, keyCount, ...args);
    });
  }

  /**
   * Each write's key lifetime in whole seconds (0: none), checked with the writes' ids, index names and
   * dates before anything is sent, so that a bad one changes nothing: a script's fields are `|`-separated (see SCRIPT), and an EXPIRE
   * that Redis refuses would fail the script after its writes.
   */
  function checkedWrites(writes: readonly VersionedWrite[]): number[] {
    const ttls = new Array<number>(writes.length);
    for (let i = 0; i < writes.length; i++) {
      const w = writes[i] as VersionedWrite;
      checkText('apply', [i, 'userId'], w.userId);
      checkText('apply', [i, 'index'], w.index);
      if (typeof w.date !== 'string' || w.date.includes('|')) {
        throw new ValidationError(`Redis rank index: apply: write ${i} has a date that is not a date (${JSON.stringify(w.date)})`, [{ path: [i, 'date'], message: 'must be a local date (YYYY-MM-DD)' }]);
      }
      const t = options.expireSeconds?.(w.index) ?? 0;
      if (typeof t !== 'number' || t > MAX_TTL_SECONDS) {
        throw new ValidationError(`Redis rank index: apply: expireSeconds(${JSON.stringify(w.index)}) gave ${String(t)}, not null or a number of seconds up to ${MAX_TTL_SECONDS}`, [{ path: ['expireSeconds'], message: `must give null or a number up to ${MAX_TTL_SECONDS}` }]);
      }
      // NaN, 0 and below: the keys are kept (as the script always did with them).
      ttls[i] = t > 0 ? Math.ceil(t) : 0;
    }
    return ttls;
  }

  /** Runs the writes at positions `chunk` (in that order) as one script; puts their changes into `out`, and gives `out`. */
  function applyScript(call: Sender, writes: readonly VersionedWrite[], ttls: readonly number[], chunk: readonly number[], out: RankChange[]): Promise<RankChange[]> {
    const n = chunk.length;
    // KEYS (3 per write), then ARGV (1 per write, see SCRIPT).
    const args: (string | number)[] = new Array(4 * n);
    for (let j = 0; j < n; j++) {
      const i = chunk[j] as number;
      const w = writes[i] as VersionedWrite;
      const tag = `${prefix}{${w.index}}:`;
      const remove = w.remove === true;
      const value = remove ? 0 : w.value;
      args[3 * j] = `${tag}z`;
      args[3 * j + 1] = `${tag}h`;
      args[3 * j + 2] = `${tag}r:${w.userId}`;
      args[3 * n + j] = `${w.version}|${remove ? '1' : '0'}|${memberOf(w.userId, remove ? EPOCH : w.reachedAt)}|${-value || 0}|${value}|${w.date}|${ttls[i]}|${w.unranked ? '0' : '1'}|${thresholdRankOf(w) ?? ''}|${w.userId}`;
    }
    return run(call, args, SCRIPT, SHA, 3 * n).then((reply) => {
      const fields = typeof reply === 'string' ? reply.split('|') : null;
      if (fields === null || fields.length !== n * 6) throw new Error(`unexpected reply to the apply script (${n} writes)`);
      for (let j = 0, r = 0; j < n; j++, r += 6) {
        const i = chunk[j] as number;
        const w = writes[i] as VersionedWrite;
        const change: RankChange = { index: w.index, userId: w.userId, previousRank: orNull(fields[r]), rank: orNull(fields[r + 1]), previousValue: orNull(fields[r + 2]), value: orNull(fields[r + 3]) };
        if (thresholdRankOf(w) !== null) change.threshold = fields[r + 5] === '' ? 0 : -Number(fields[r + 5]) || 0;
        out[i] = change;
      }
      return out;
    });
  }

  return {
    tenant,
    apply: (writes: readonly VersionedWrite[]) => bounded('apply', (call): Promise<RankChange[]> => {
      const out: RankChange[] = new Array(writes.length);
      if (writes.length === 0) return Promise.resolve(out);
      const ttls = checkedWrites(writes);
      const groups = plan(writes, cluster);
      // The usual case: one script, one round trip.
      if (groups.length === 1 && groups[0]?.length === 1) return applyScript(call, writes, ttls, groups[0][0] as number[], out);
      return Promise.all(
        groups.map(async (scripts) => {
          for (const script of scripts) await applyScript(call, writes, ttls, script, out);
        }),
      ).then(() => out);
    }),

    preview: (writes: readonly LeaderboardWrite[]) => bounded('preview', async (call): Promise<RankChange[]> => {
      const out: RankChange[] = new Array(writes.length);
      if (writes.length === 0) return out;
      writes.forEach((w, i) => {
        checkText('preview', [i, 'userId'], w.userId);
        checkText('preview', [i, 'index'], w.index);
      });
      // One script for all the writes (its overlay carries the earlier writes' outcome to the later ones); on a
      // cluster one per index (one hash slot each), side by side. Read-only, so never cut into several.
      const groups = groupsOf(writes, cluster);
      await Promise.all(
        groups.map(async (group) => {
          const keyArgs: string[] = [];
          const args: string[] = [];
          for (const i of group) {
            const w = writes[i] as LeaderboardWrite;
            const tag = `${prefix}{${w.index}}:`;
            const remove = w.remove === true;
            const value = remove ? 0 : w.value;
            keyArgs.push(`${tag}z`, `${tag}h`);
            args.push(w.userId, remove ? '1' : '0', memberOf(w.userId, remove ? EPOCH : w.reachedAt), String(-value || 0), String(value), w.unranked ? '0' : '1');
          }
          const reply = await run(call, [...keyArgs, ...args], PREVIEW_SCRIPT, PREVIEW_SHA, keyArgs.length);
          if (!Array.isArray(reply) || reply.length !== group.length * 4) throw new Error(`unexpected reply to the preview script (${group.length} writes)`);
          group.forEach((i, j) => {
            const w = writes[i] as LeaderboardWrite;
            out[i] = { index: w.index, userId: w.userId, previousRank: orNull(reply[4 * j]), rank: orNull(reply[4 * j + 1]), previousValue: orNull(reply[4 * j + 2]), value: orNull(reply[4 * j + 3]) };
          });
        }),
      );
      return out;
    }),

    getEntry: (index, userId) => bounded('getEntry', async (call): Promise<RankedEntry | null> => {
      checkText('getEntry', ['index'], index);
      checkText('getEntry', ['userId'], userId);
      // One script, so a write between reading the entry and ranking it cannot make a present entry read null.
      const k = keys(index);
      const reply = (await run(call, [k.z, k.h, userId], GET_SCRIPT, GET_SHA, 2)) as [string, string, number] | null;
      if (!reply) return null;
      const [member, value, rank] = reply;
      return { userId, value: Number(value), reachedAt: parseMember(String(member)).reachedAt, rank: Number(rank) + 1 };
    }),

    readRange: (index, offset, limit) => bounded('readRange', async (call) => {
      const from = Math.max(0, offset);
      if (limit <= 0) return [];
      const reply = (await call.send('ZRANGE', keys(index).z, from, from + limit - 1, 'WITHSCORES')) as unknown[];
      // RESP2 replies flat [member, score, ...]; RESP3 nests [[member, score], ...].
      const flat = reply.flatMap((x) => (Array.isArray(x) ? x : [x])).map(String);
      const out: RankedEntry[] = [];
      for (let i = 0; i < flat.length; i += 2) {
        const { userId, reachedAt } = parseMember(flat[i] as string);
        out.push({ userId, reachedAt, value: -Number(flat[i + 1]) || 0, rank: from + i / 2 + 1 });
      }
      return out;
    }),

    countEntries: (index, range) => bounded('countEntries', async (call) => {
      const z = keys(index).z;
      if (!range || (range.min === undefined && range.max === undefined)) return Number(await call.send('ZCARD', z));
      // value >= min  <=>  score <= -min;  value < max  <=>  score > -max
      const low = range.max === undefined ? '-inf' : `(${-range.max}`;
      const high = range.min === undefined ? '+inf' : String(-range.min);
      return Number(await call.send('ZCOUNT', z, low, high));
    }),

    readRankHistory: (index, userId, limit) => bounded('readRankHistory', async (call): Promise<RankHistoryRow[]> => {
      checkText('readRankHistory', ['index'], index);
      checkText('readRankHistory', ['userId'], userId);
      if (limit <= 0) return [];
      const rows = (await call.send('LRANGE', keys(index).r(userId), 0, limit - 1)) as string[];
      return rows.map((row) => {
        const [date = '', previousRank, rank, previousValue, value] = row.split('|');
        return { date, previousRank: orNull(previousRank), rank: orNull(rank), previousValue: orNull(previousValue), value: orNull(value) };
      });
    }),

    erase: (userId, indexes, version) => bounded('erase', async (call): Promise<void> => {
      checkText('erase', ['userId'], userId);
      indexes.forEach((index, i) => checkText('erase', ['indexes', i], index));
      if (indexes.length === 0) return;
      const tomb = version === undefined ? '' : String(version);
      const script = async (names: readonly string[]) => {
        const keyArgs = names.flatMap((index) => {
          const k = keys(index);
          return [k.z, k.h, k.r(userId)];
        });
        await run(call, [...keyArgs, userId, tomb], ERASE_SCRIPT, ERASE_SHA, keyArgs.length);
      };
      // On a cluster a script touches one index's keys (one hash slot); else one script per 1000 indexes.
      if (cluster) await Promise.all(indexes.map((index) => script([index])));
      else for (let i = 0; i < indexes.length; i += MAX_SCRIPT_WRITES) await script(indexes.slice(i, i + MAX_SCRIPT_WRITES));
    }),

    scanUsers: (index, cursor, count) => bounded('scanUsers', async (call) => {
      // HSCAN of the hash: a removed entry stays there as "version||" (to refuse older writes) and is skipped.
      const reply = (await call.send('HSCAN', keys(index).h, cursor, 'COUNT', Math.max(1, Math.floor(count) || 1))) as [unknown, unknown[]];
      const flat = (reply[1] ?? []).flatMap((x) => (Array.isArray(x) ? x : [x])).map(String);
      const users: { userId: string; version: number }[] = [];
      for (let i = 0; i + 1 < flat.length; i += 2) {
        const [version = '', member = ''] = (flat[i + 1] as string).split('|');
        if (member !== '') users.push({ userId: flat[i] as string, version: Number(version) });
      }
      return { cursor: String(reply[0]), users };
    }),
  };
}
