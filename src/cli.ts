/**
 * `laurel`: the operators' command line (`npx laurel <command>`).
 *
 * - `laurel replay`: recomputes users from their ledgers under a configuration module (`engine.replay`) on
 *   the PostgreSQL store, with a progress bar, a summary, and a cursor to resume from.
 * - `laurel migrate`: creates or upgrades the PostgreSQL schema.
 * - `laurel rebuild-ranks`: rebuilds a Redis rank index from PostgreSQL's entries.
 *
 * Exit codes: 0 success; 1 the command ran and something failed (users failed, the database or Redis
 * failed); 2 usage or setup errors, nothing ran (bad options, a config module that cannot be loaded, a missing
 * optional driver, an unmigrated schema);
 * 130 stopped by Ctrl-C (SIGINT) or SIGTERM after the current user.
 *
 * Built as its own ESM file (dist/cli.js) that imports the library through the package's own name
 * (`laurel`, `laurel/postgres`, `laurel/redis`), so a config module and the CLI share one copy of it.
 */
import { existsSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import cliProgress from 'cli-progress';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { addToReplaySummary, createEngine, isLaurelError, type LaurelConfig, type ReplayDiff, type ReplayPolicy, type ReplayReport } from 'laurel';
import { createPostgresStore, MIGRATIONS, type PostgresStore, type Queryable } from 'laurel/postgres';
import { createRedisRankIndex, rebuildRankIndex, type RedisLike } from 'laurel/redis';

/** A problem with how the command was invoked or set up: exit code 2, nothing ran. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** Thrown from a progress callback to stop a replay after the user it reports. */
class Interrupted extends Error {
  override name = 'Interrupted';
}

const EXIT_OK = 0;
const EXIT_FAILED = 1;
const EXIT_USAGE = 2;
const EXIT_INTERRUPTED = 130;

const SCHEMA_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

// ---------------------------------------------------------------------------------------------------------
// Small exported helpers (also used by the tests and the replay bench).

/**
 * How many users a walk over every user visits: all of them, or those after `after` in the order
 * `Store.listUsers` walks them (UTF-16 code-unit order, as the PostgreSQL store's `utf16_hex` writes it).
 * One `SELECT count(*)`.
 */
export async function countUsers(client: Queryable, schema: string, after?: string, tenant: string | null = null): Promise<number> {
  if (!SCHEMA_NAME.test(schema)) throw new UsageError(`Invalid schema name: ${JSON.stringify(schema)}`);
  const users = `"${schema}".users`;
  const hex = `"${schema}".utf16_hex`;
  // The store keeps the default tenant as ''.
  const r =
    after === undefined
      ? await client.query(`SELECT count(*)::text AS n FROM ${users} WHERE tenant = $1`, [tenant ?? ''])
      : await client.query(`SELECT count(*)::text AS n FROM ${users} WHERE tenant = $2 AND ${hex}(user_id) > ${hex}($1::text)`, [after, tenant ?? '']);
  return Number(r.rows[0]?.n ?? 0);
}

/** A configuration module's configuration: its default export or its export named `config`. */
export function configOf(mod: unknown, from: string): LaurelConfig {
  const m = mod as Record<string, unknown> | null;
  const d = m?.default as Record<string, unknown> | undefined;
  // ESM default, named `config`; a CommonJS module (or a transpiled one) nests them one level deeper.
  const candidates = [m?.default, m?.config, d?.config, d?.default];
  for (const c of candidates) if (isCompiledConfig(c)) return c;
  const found = candidates.find((c) => typeof c === 'object' && c !== null);
  if (found) throw new UsageError(`${from}: the exported configuration was not compiled by defineConfig; export defineConfig({ ... }) from 'laurel'`);
  throw new UsageError(`${from} has no configuration: export it as the default export or as \`config\` (compiled by defineConfig)`);
}

function isCompiledConfig(c: unknown): c is LaurelConfig {
  if (typeof c !== 'object' || c === null) return false;
  const index = (c as { index?: { metrics?: unknown } }).index;
  return typeof index === 'object' && index !== null && index.metrics instanceof Map;
}

/** Quotes a value for a POSIX shell when it needs it. */
export function shellQuote(s: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`;
}

// ---------------------------------------------------------------------------------------------------------
// Optional modules: the drivers (`pg`, `ioredis`) and `tsx` are optional peers, resolved from the CLI's own
// location first, then from the working directory (the operator's project).

const isNotFound = (error: unknown) => {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND' || code === 'ERR_PACKAGE_PATH_NOT_EXPORTED';
};

async function importOptional(specifier: string, missing: string): Promise<Record<string, unknown>> {
  try {
    return (await import(specifier)) as Record<string, unknown>;
  } catch (error) {
    if (!isNotFound(error)) throw error;
  }
  try {
    const path = createRequire(join(process.cwd(), 'noop.js')).resolve(specifier);
    return (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  } catch (error) {
    if (!isNotFound(error)) throw error;
  }
  throw new UsageError(missing);
}

/** Imports a configuration module: .js, .mjs and .cjs natively; .ts, .mts and .cts through tsx when installed. */
export async function loadConfig(spec: string): Promise<LaurelConfig> {
  const file = resolve(spec);
  if (!existsSync(file)) throw new UsageError(`Config module not found: ${file}`);
  const url = pathToFileURL(file).href;
  let mod: unknown;
  if (/\.[cm]?tsx?$/i.test(file)) {
    const tsx = await importOptional(
      'tsx/esm/api',
      `${spec} is a TypeScript module and tsx is not installed: compile the configuration to JavaScript (.js/.mjs/.cjs), or install tsx (npm install -D tsx)`,
    );
    const tsImport = tsx.tsImport as (specifier: string, parent: string) => Promise<unknown>;
    try {
      mod = await tsImport(url, import.meta.url);
    } catch (error) {
      throw new UsageError(`Could not load ${spec}: ${messageOf(error)}`);
    }
  } else {
    try {
      mod = await import(url);
    } catch (error) {
      throw new UsageError(`Could not load ${spec}: ${messageOf(error)}`);
    }
  }
  return configOf(mod, spec);
}

interface Pool extends Queryable {
  end(): Promise<void>;
  on(event: 'error', listener: (error: unknown) => void): unknown;
}

async function openPool(url: string): Promise<Pool> {
  const pg = await importOptional('pg', 'The PostgreSQL driver is not installed: npm install pg (an optional peer dependency of laurel)');
  const PoolClass = ((pg.default as Record<string, unknown> | undefined)?.Pool ?? pg.Pool) as new (opts: object) => Pool;
  // Replay and rebuilds are sequential: a few connections are plenty.
  const pool = new PoolClass({ connectionString: url, max: 4, application_name: 'laurel-cli' });
  pool.on('error', () => undefined); // an idle connection that drops must not end the process
  try {
    await pool.query('SELECT 1');
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw new ConnectionError(`Cannot connect to PostgreSQL at ${redact(url)}: ${messageOf(error)}`);
  }
  return pool;
}

/** The database or Redis could not be reached: exit code 1. */
class ConnectionError extends Error {
  override name = 'ConnectionError';
}

/** A connection URL without its password. */
function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@');
  }
}

interface RedisClient extends RedisLike {
  quit(): Promise<unknown>;
  disconnect(): void;
  on(event: 'error', listener: (error: unknown) => void): unknown;
}

async function openRedis(url: string): Promise<{ redis: RedisClient; lastError: () => unknown }> {
  const mod = await importOptional('ioredis', 'The Redis driver is not installed: npm install ioredis (an optional peer dependency of laurel)');
  const Redis = (mod.default ?? mod.Redis) as new (url: string, opts: object) => RedisClient;
  const redis = new Redis(url, { maxRetriesPerRequest: 2, connectTimeout: 5000 });
  let last: unknown = null;
  redis.on('error', (error) => {
    last = error;
  });
  return { redis, lastError: () => last };
}

// ---------------------------------------------------------------------------------------------------------
// Output helpers.

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

function describeError(error: unknown): string {
  if (isLaurelError(error)) {
    const cause = (error as { cause?: unknown }).cause;
    const hint = missingSchemaHint(cause ?? error);
    return `${error.code}: ${error.message}${hint}`;
  }
  return `${messageOf(error)}${missingSchemaHint(error)}`;
}

/** A hint when PostgreSQL says a table or function is missing (the schema was not migrated). */
function missingSchemaHint(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return code === '42P01' || code === '42883' || code === '3F000' ? ' (is the schema migrated? run `laurel migrate`)' : '';
}

function formatNumber(n: number): string {
  return Number.isInteger(n) ? n.toLocaleString('en-US') : n.toLocaleString('en-US', { maximumFractionDigits: 6 });
}

function signed(n: number): string {
  return n > 0 ? `+${formatNumber(n)}` : formatNumber(n);
}

function formatBytes(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

function formatSeconds(ms: number): string {
  return ms < 60_000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.floor(ms / 60_000)} min ${((ms % 60_000) / 1000).toFixed(1)} s`;
}

/** Peak resident set size of this process so far, in bytes. */
export function peakRss(): number {
  return process.resourceUsage().maxRSS * 1024;
}

function table(rows: [string, string][]): string {
  const width = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`).join('\n');
}

function validateSchema(schema: string): string {
  if (!SCHEMA_NAME.test(schema)) throw new InvalidArgumentError('letters, digits and _ only (1..63 characters, not starting with a digit)');
  return schema;
}

function validatePgUrl(url: string): string {
  if (!/^postgres(?:ql)?:\/\//i.test(url)) throw new InvalidArgumentError('expected a postgres:// or postgresql:// URL');
  return url;
}

function validateRedisUrl(url: string): string {
  if (!/^rediss?:\/\//i.test(url)) throw new InvalidArgumentError('expected a redis:// or rediss:// URL');
  return url;
}

function parseUserList(value: string): string[] {
  const ids = value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (ids.length === 0) throw new InvalidArgumentError('expected a comma-separated list of user ids');
  return ids;
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

// ---------------------------------------------------------------------------------------------------------
// replay

export interface ReplayCliOptions {
  config: string;
  store: string;
  policy: ReplayPolicy;
  dryRun?: boolean;
  users?: string[];
  after?: string;
  schema: string;
  pageSize: number;
  progress: boolean;
  json?: boolean;
  tenant?: string;
}

/** The running totals of a replay, kept from its callbacks so an interrupted run can report them too. */
interface Tally {
  users: number;
  changed: number;
  failedIds: string[];
  visited: number;
  cursor: string | null;
  summary: ReplayReport['summary'];
}

function addDiff(t: Tally, diff: ReplayDiff) {
  addToReplaySummary(t.summary, diff);
}

/** Signals: the first asks to stop after the current user, a second one quits at once. */
function onStopSignals(stop: (signal: string) => void): () => void {
  let count = 0;
  const handler = (signal: NodeJS.Signals) => {
    count++;
    if (count > 1) {
      process.stderr.write(`\nlaurel: ${signal} again: quitting now (the user in flight is committed or not, never half).\n`);
      process.exit(EXIT_INTERRUPTED);
    }
    stop(signal);
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  return () => {
    process.removeListener('SIGINT', handler);
    process.removeListener('SIGTERM', handler);
  };
}

async function replayCommand(o: ReplayCliOptions): Promise<number> {
  const config = await loadConfig(o.config);
  const pool = await openPool(o.store);
  try {
    const store = createPostgresStore({ client: pool, schema: o.schema });
    await checkMigrated(pool, o.schema);
    const root = createEngine({ config, store });
    const engine = o.tenant === undefined ? root : root.tenant(o.tenant);
    const users = o.users ? [...new Set(o.users)] : undefined;
    const total = users ? users.length : await countUsers(pool, o.schema, o.after, o.tenant ?? null);

    const tally: Tally = {
      users: 0,
      changed: 0,
      failedIds: [],
      visited: 0,
      cursor: null,
      summary: { achievementsGained: 0, achievementsLost: 0, points: {}, awardsReversed: 0, awardsAdded: 0, rejectedEvents: 0, streaksChanged: 0 },
    };
    let stopping: string | null = null;
    const started = performance.now();
    const rate = () => {
      const s = (performance.now() - started) / 1000;
      return s > 0 ? tally.visited / s : 0;
    };
    const bar = o.progress && total > 0
      ? new cliProgress.SingleBar(
          {
            format: 'replay [{bar}] {percentage}% | {value}/{total} users | changed {changed} | failed {failed} | {rate} users/s | ETA {eta_formatted}{status}',
            stream: process.stderr,
            noTTYOutput: true,
            notTTYSchedule: 10_000,
            etaBuffer: 200,
            hideCursor: false,
          },
          cliProgress.Presets.shades_classic,
        )
      : null;
    const payload = () => ({ changed: tally.changed, failed: tally.failedIds.length, rate: rate().toFixed(0), status: stopping ? ` | ${stopping}: stopping after the current user` : '' });
    bar?.start(total, 0, payload());
    const unlisten = onStopSignals((signal) => {
      stopping = signal;
      bar?.update(tally.visited, payload());
      if (!bar) process.stderr.write(`laurel: ${signal}: stopping after the current user (again to quit now)\n`);
    });

    let report: ReplayReport | null = null;
    let crash: unknown = null;
    try {
      report = await engine.replay({
        policy: o.policy,
        dryRun: o.dryRun === true,
        pageSize: o.pageSize,
        ...(users ? { users } : {}),
        ...(o.after !== undefined && !users ? { after: o.after } : {}),
        onDiff: (diff) => addDiff(tally, diff),
        onProgress: (p) => {
          tally.visited++;
          if (p.failed > tally.failedIds.length) tally.failedIds.push(p.cursor);
          tally.users = p.done;
          tally.changed = p.changed;
          tally.cursor = p.cursor;
          if (bar) {
            if (tally.visited > bar.getTotal()) bar.setTotal(tally.visited);
            bar.update(tally.visited, payload());
          }
          if (stopping) throw new Interrupted(stopping);
        },
      });
    } catch (error) {
      crash = error;
    } finally {
      unlisten();
      bar?.stop();
    }
    const elapsed = performance.now() - started;
    const interrupted = crash instanceof Interrupted;

    // The engine's report when the run finished; the callbacks' tally when it stopped early (same counts).
    const summary = report ? report.summary : tally.summary;
    // (A run that stopped early has the failed users' ids from the progress reports, not their errors.)
    const failures: { userId: string; code: string | null; message: string | null }[] = report
      ? report.failures.map((f) => ({ userId: f.userId, code: f.error.code, message: f.error.message }))
      : tally.failedIds.map((userId) => ({ userId, code: null, message: null }));
    const counted = report ? { users: report.users, changed: report.changed } : { users: tally.users, changed: tally.changed };
    const cursor = report ? report.cursor : tally.cursor;
    const stopped = interrupted ? 'interrupted' : crash ? 'error' : null;
    // Where to pick up: a walk resumes after its cursor; a list goes on with the users not reached yet.
    let resume: string | null = null;
    if (stopped) {
      if (users) {
        const rest = users.slice(cursor === null ? 0 : users.indexOf(cursor) + 1);
        resume = rest.length > 0 ? `--users ${shellQuote(rest.join(','))}` : null;
      } else if (cursor !== null) resume = `--after ${shellQuote(cursor)}`;
      else if (o.after !== undefined) resume = `--after ${shellQuote(o.after)}`;
    }
    const systems = [...new Set([...config.pointsSystems.map((s) => s.key), ...Object.keys(summary.points)])];
    const points = Object.fromEntries(systems.map((k) => [k, summary.points[k] ?? 0]));
    const usersPerSecond = elapsed > 0 ? (tally.visited / elapsed) * 1000 : 0;

    if (o.json) {
      const out = {
        policy: o.policy,
        dryRun: o.dryRun === true,
        complete: !stopped,
        stopped,
        error: crash && !interrupted ? describeError(crash) : null,
        users: counted.users,
        changed: counted.changed,
        failed: failures.length,
        failures,
        summary: { ...summary, points },
        cursor,
        resume,
        usersPerSecond: Math.round(usersPerSecond * 10) / 10,
        elapsedMs: Math.round(elapsed),
        peakRssBytes: peakRss(),
      };
      process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
    } else {
      const head = `Replay (${o.policy}${o.dryRun ? ', dry run: nothing was committed' : ''})${stopped === 'interrupted' ? ': stopped by request' : stopped === 'error' ? ': stopped by an error' : ''}`;
      const rows: [string, string][] = [
        ['users replayed', formatNumber(counted.users)],
        [o.dryRun ? 'would change' : 'changed', formatNumber(counted.changed)],
        ['failed', formatNumber(failures.length)],
        ['achievements gained', formatNumber(summary.achievementsGained)],
        ['achievements lost', formatNumber(summary.achievementsLost)],
        ...Object.entries(points).map(([k, v]): [string, string] => [`points ${k}`, signed(v)]),
        ['awards reversed', formatNumber(summary.awardsReversed)],
        ['awards added', formatNumber(summary.awardsAdded)],
        ['rejected events', formatNumber(summary.rejectedEvents)],
        ['streaks changed', formatNumber(summary.streaksChanged)],
        ['rate', `${usersPerSecond.toFixed(1)} users/s`],
        ['elapsed', formatSeconds(elapsed)],
        ['peak RSS', formatBytes(peakRss())],
      ];
      const lines = [head, table(rows)];
      if (failures.length > 0) {
        lines.push('', `Failed users (${failures.length}; nothing of theirs was committed):`);
        for (const f of failures.slice(0, 20)) lines.push(`  ${f.userId}${f.code ? `  ${f.code}: ${f.message}` : ''}`);
        if (failures.length > 20) lines.push(`  ... and ${failures.length - 20} more`);
        if (failures.length <= 100) lines.push(`Retry them with: --users ${shellQuote(failures.map((f) => f.userId).join(','))}`);
      }
      if (crash && !interrupted) lines.push('', `Stopped by an error: ${describeError(crash)}`);
      if (resume) lines.push('', `Resume with: ${resume}`);
      else if (stopped) lines.push('', 'Nothing is left to replay.');
      process.stdout.write(`${lines.join('\n')}\n`);
    }
    if (interrupted) return EXIT_INTERRUPTED;
    return crash || failures.length > 0 ? EXIT_FAILED : EXIT_OK;
  } finally {
    await pool.end();
  }
}

/** Refuses to replay on a schema with migrations not applied (run `laurel migrate` first). */
async function checkMigrated(client: Queryable, schema: string): Promise<void> {
  const applied = await appliedMigrations(client, schema);
  if (applied === null) throw new UsageError(`Schema "${schema}" has no Laurel tables: run \`laurel migrate\` first (or pass --schema)`);
  const pending = MIGRATIONS.filter((m) => !applied.includes(m.id)).map((m) => m.id);
  if (pending.length > 0) throw new UsageError(`Schema "${schema}" has migrations not applied (${pending.join(', ')}): run \`laurel migrate\` first`);
}

/** The ids of the migrations applied to a schema, or null when it has no migrations table. */
async function appliedMigrations(client: Queryable, schema: string): Promise<string[] | null> {
  const exists = await client.query(`SELECT to_regclass($1) IS NOT NULL AS ok`, [`"${schema}".migrations`]);
  if (!exists.rows[0]?.ok) return null;
  const r = await client.query(`SELECT id FROM "${schema}".migrations ORDER BY id`);
  return r.rows.map((row) => String(row.id));
}

// ---------------------------------------------------------------------------------------------------------
// migrate

async function migrateCommand(o: { store: string; schema: string; json?: boolean }): Promise<number> {
  const pool = await openPool(o.store);
  try {
    const store: PostgresStore = createPostgresStore({ client: pool, schema: o.schema });
    const started = performance.now();
    const before = (await appliedMigrations(pool, o.schema)) ?? [];
    await store.migrate();
    const after = (await appliedMigrations(pool, o.schema)) ?? [];
    const applied = after.filter((id) => !before.includes(id));
    const elapsed = performance.now() - started;
    if (o.json) {
      process.stdout.write(`${JSON.stringify({ schema: o.schema, applied, alreadyApplied: before, elapsedMs: Math.round(elapsed) }, null, 2)}\n`);
    } else if (applied.length === 0) {
      process.stdout.write(`Schema "${o.schema}" is up to date (${after.length} migrations: ${after.join(', ')}).\n`);
    } else {
      const lines = [`Schema "${o.schema}": applied ${applied.length} migration${applied.length === 1 ? '' : 's'} in ${formatSeconds(elapsed)}:`, ...applied.map((id) => `  ${id}`)];
      if (before.length > 0) lines.push(`(already applied: ${before.join(', ')})`);
      process.stdout.write(`${lines.join('\n')}\n`);
    }
    return EXIT_OK;
  } finally {
    await pool.end();
  }
}

// ---------------------------------------------------------------------------------------------------------
// rebuild-ranks

/** The indexes a schema holds entries for. */
export async function storeIndexes(client: Queryable, schema: string, tenant: string | null = null): Promise<string[]> {
  if (!SCHEMA_NAME.test(schema)) throw new UsageError(`Invalid schema name: ${JSON.stringify(schema)}`);
  const r = await client.query(`SELECT DISTINCT idx FROM "${schema}".entries WHERE tenant = $1 ORDER BY idx`, [tenant ?? '']);
  return r.rows.map((row) => String(row.idx));
}

const globEscape = (s: string) => s.replace(/[*?[\]\\]/g, (c) => `\\${c}`);

/** The indexes a Redis rank index holds under `prefix` (their `{prefix}{index}:h` hashes), one SCAN at a time. */
async function redisIndexes(redis: RedisLike, prefix: string): Promise<string[]> {
  const out = new Set<string>();
  let cursor = '0';
  do {
    const [next, keys] = (await redis.call('SCAN', cursor, 'MATCH', `${globEscape(prefix)}{*}:h`, 'COUNT', 1000, 'TYPE', 'hash')) as [string, string[]];
    cursor = String(next);
    for (const key of keys) {
      const k = String(key);
      if (k.startsWith(`${prefix}{`) && k.endsWith('}:h')) out.add(k.slice(prefix.length + 1, -3));
    }
  } while (cursor !== '0');
  return [...out];
}

/** Options of `laurel rebuild-ranks`. */
interface RebuildRanksOptions {
  store: string;
  redis: string;
  schema: string;
  prefix: string;
  index: string[];
  json?: boolean;
  tenant?: string;
}

async function rebuildRanksCommand(o: RebuildRanksOptions): Promise<number> {
  const pool = await openPool(o.store);
  let client: Awaited<ReturnType<typeof openRedis>> | null = null;
  try {
    client = await openRedis(o.redis);
    const { redis } = client;
    const root = createPostgresStore({ client: pool, schema: o.schema });
    await checkMigrated(pool, o.schema);
    const rootIndex = createRedisRankIndex({ redis, prefix: o.prefix, timeoutMs: 10_000 });
    // A tenant's store and index (its keys under `{prefix}t:<tenant, URI-encoded>:`, see createRedisRankIndex).
    const store = o.tenant === undefined ? root : root.tenant(o.tenant);
    const rankIndex = o.tenant === undefined ? rootIndex : (rootIndex.tenant as (id: string) => typeof rootIndex)(o.tenant);
    const keyPrefix = o.tenant === undefined ? o.prefix : `${o.prefix}t:${encodeURIComponent(o.tenant)}:`;
    const started = performance.now();
    // Every index either side holds: one PostgreSQL no longer has (its last entries were removed while Redis
    // was away) is emptied in Redis.
    const indexes =
      o.index.length > 0
        ? o.index
        : [...new Set([...(await storeIndexes(pool, o.schema, o.tenant ?? null)), ...(await withTimeout(redisIndexes(redis, keyPrefix), 30_000, 'listing the Redis indexes', client.lastError))])].sort();
    const results: { index: string; copied: number; ms: number }[] = [];
    for (const index of indexes) {
      const t0 = performance.now();
      const copied = await rebuildRankIndex(store, rankIndex, index);
      results.push({ index, copied, ms: performance.now() - t0 });
      if (!o.json) process.stdout.write(`  ${index}  ${formatNumber(copied)} entries (${formatSeconds(performance.now() - t0)})\n`);
    }
    const elapsed = performance.now() - started;
    const copied = results.reduce((a, r) => a + r.copied, 0);
    if (o.json) process.stdout.write(`${JSON.stringify({ schema: o.schema, prefix: o.prefix, ...(o.tenant === undefined ? {} : { tenant: o.tenant }), indexes: results.map((r) => ({ index: r.index, copied: r.copied })), copied, elapsedMs: Math.round(elapsed) }, null, 2)}\n`);
    else process.stdout.write(`Rebuilt ${results.length} index${results.length === 1 ? '' : 'es'} (${formatNumber(copied)} entries) from schema "${o.schema}"${o.tenant === undefined ? '' : ` (tenant ${JSON.stringify(o.tenant)})`} into Redis prefix "${o.prefix}" in ${formatSeconds(elapsed)}.\n`);
    return EXIT_OK;
  } finally {
    if (client) await client.redis.quit().catch(() => client?.redis.disconnect());
    await pool.end();
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string, lastError: () => unknown): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const last = lastError();
      reject(new Error(`Redis did not answer ${what} within ${ms / 1000} s${last ? ` (${messageOf(last)})` : ''}`));
    }, ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

// ---------------------------------------------------------------------------------------------------------
// The program.

function version(): string {
  try {
    // dist/cli.js and src/cli.ts both sit one level below the package root.
    return String((createRequire(import.meta.url)('../package.json') as { version?: unknown }).version ?? 'unknown');
  } catch {
    return 'unknown';
  }
}

const storeOption = () => new Option('--store <postgres-url>', 'PostgreSQL connection URL (postgres://user:pass@host:5432/db)').argParser(validatePgUrl).makeOptionMandatory();
const tenantOption = () =>
  new Option('--tenant <id>', 'only this tenant (engine.tenant(id)); default: the default tenant').argParser((v) => {
    if (v.length === 0 || v.length > 255) throw new InvalidArgumentError('1 to 255 characters');
    return v;
  });
const schemaOption = () => new Option('--schema <name>', "schema holding Laurel's tables").default('laurel').argParser(validateSchema);

/** The `laurel` program. Actions store their exit code in `result.code`. */
export function buildProgram(result: { code: number }): Command {
  const program = new Command('laurel')
    .description('Laurel operators\' command line: replay users under a new configuration, migrate the PostgreSQL schema, rebuild the Redis rank index.')
    .version(version(), '-v, --version', 'print the version')
    .showHelpAfterError('(run with --help for usage)')
    .addHelpText(
      'after',
      '\nExit codes: 0 success; 1 something failed (users failed, the database or Redis failed); 2 usage or setup error (bad options, a config module that does not load, a missing driver, an unmigrated schema: nothing ran); 130 stopped by Ctrl-C.',
    );

  program
    .command('replay')
    .description('Recompute users from their ledgers under a configuration (engine.replay) on the PostgreSQL store.')
    .requiredOption('--config <module>', 'configuration module: its default export or export `config`, compiled by defineConfig (.js/.mjs/.cjs; .ts with tsx installed)')
    .addOption(storeOption())
    .addOption(new Option('--policy <policy>', 'what replay may change in the past').choices(['forward', 'retroactive', 'grandfather']).default('forward'))
    .option('--dry-run', 'compute and report the changes without committing anything')
    .option('--users <ids>', 'only these users (comma-separated ids; unknown ids are skipped)', parseUserList)
    .option('--after <user-id>', 'resume a walk over every user after this user id (the cursor a stopped run printed)')
    .addOption(schemaOption())
    .addOption(
      new Option('--page-size <n>', 'users read per page of the walk (1..1000)')
        .default(100)
        .argParser((v) => {
          const n = Number(v);
          if (!Number.isInteger(n) || n < 1 || n > 1000) throw new InvalidArgumentError('an integer from 1 to 1000');
          return n;
        }),
    )
    .option('--no-progress', 'no progress bar (it is drawn on stderr; a line every 10 s when stderr is not a terminal)')
    .option('--json', 'print the summary as JSON')
    .addOption(tenantOption())
    .addHelpText(
      'after',
      [
        '',
        'Each user is committed on its own with the usual version check, so replay is safe while traffic continues.',
        'Ctrl-C (or SIGTERM) stops after the current user and prints where to resume (--after <cursor>); a second one quits at once.',
        'If the deployment keeps ranks in Redis, run `laurel rebuild-ranks` after a replay that committed.',
        '',
        'Examples:',
        '  laurel replay --config ./laurel.config.mjs --store postgres://localhost/app --dry-run',
        '  laurel replay --config ./laurel.config.mjs --store postgres://localhost/app --policy retroactive --users u1,u2',
      ].join('\n'),
    )
    .action(async (opts: ReplayCliOptions & { users?: string[] }) => {
      if (opts.users && opts.after !== undefined) throw new UsageError('--after resumes a walk over every user; it cannot be combined with --users');
      result.code = await replayCommand(opts);
    });

  program
    .command('migrate')
    .description("Create or upgrade Laurel's PostgreSQL schema (safe to run again, and from several processes at once).")
    .addOption(storeOption())
    .addOption(schemaOption())
    .option('--json', 'print the result as JSON')
    .action(async (opts: { store: string; schema: string; json?: boolean }) => {
      result.code = await migrateCommand(opts);
    });

  program
    .command('rebuild-ranks')
    .description("Rebuild the Redis rank index from PostgreSQL's entries (rebuildRankIndex), e.g. after Redis lost data or missed writes.")
    .addOption(storeOption())
    .addOption(new Option('--redis <redis-url>', 'Redis connection URL (redis://host:6379)').argParser(validateRedisUrl).makeOptionMandatory())
    .addOption(schemaOption())
    .option('--prefix <prefix>', 'key prefix of the Redis rank index', 'laurel:')
    .option('--index <name>', 'only this index (repeatable); default: every index PostgreSQL or Redis holds', collect, [])
    .option('--json', 'print the result as JSON')
    .addOption(tenantOption())
    .action(async (opts: RebuildRanksOptions) => {
      result.code = await rebuildRanksCommand(opts);
    });

  return program;
}

/** Runs the CLI on `argv` (as `process.argv`) and returns its exit code. */
export async function main(argv: readonly string[] = process.argv): Promise<number> {
  const result = { code: EXIT_OK };
  const program = buildProgram(result);
  program.exitOverride();
  for (const c of program.commands) c.exitOverride();
  try {
    await program.parseAsync([...argv]);
    return result.code;
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version end with exit code 0; commander already printed its message otherwise.
      return error.exitCode === 0 ? EXIT_OK : EXIT_USAGE;
    }
    if (error instanceof UsageError) {
      process.stderr.write(`laurel: ${error.message}\n`);
      return EXIT_USAGE;
    }
    process.stderr.write(`laurel: ${describeError(error)}\n`);
    return EXIT_FAILED;
  }
}

/** True when this module is the program being run (dist/cli.js through `npx laurel`, or `tsx src/cli.ts`). */
function isMain(): boolean {
  const entry = process.argv[1];
  if (entry === undefined) return false;
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isMain()) {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      process.stderr.write(`laurel: ${messageOf(error)}\n`);
      process.exitCode = EXIT_FAILED;
    },
  );
}
