/**
 * A throwaway PostgreSQL cluster for fault tests that stop and restart their server: initdb into a temporary
 * directory, start on a free loopback port, stop (`-m fast` by default), start again, destroy. Never touches
 * any other server. As root, every command runs as the OS user `postgres` (`su postgres -c ...`), which owns
 * the directory.
 */
import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The PostgreSQL binaries: `LAUREL_PG_BIN`, else the newest `/usr/lib/postgresql/<version>/bin`; null if none. */
export function findPgBin(): string | null {
  const fromEnv = process.env.LAUREL_PG_BIN;
  if (fromEnv) return existsSync(join(fromEnv, 'initdb')) ? fromEnv : null;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number.parseFloat(a) - Number.parseFloat(b));
  const newest = versions[versions.length - 1];
  return newest === undefined ? null : join(root, newest, 'bin');
}

const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/** Runs a command, as `postgres` when this process is root. */
async function exec(args: string[]): Promise<string> {
  const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const { stdout } = asRoot ? await run('su', ['postgres', '-c', args.map(quote).join(' ')]) : await run(args[0] as string, args.slice(1));
  return stdout;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

export interface PgCluster {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication). */
  url: string;
  port: number;
  dir: string;
  start(): Promise<void>;
  /** `pg_ctl stop -m <mode>` (default `fast`: every backend is terminated, then the server stops). */
  stop(mode?: 'smart' | 'fast' | 'immediate'): Promise<void>;
  /** Stops the server if it runs (`-m immediate`) and deletes the directory. */
  destroy(): Promise<void>;
  /** The server's log, for failure messages. */
  log(): string;
}

/** Creates and starts a cluster. Call `destroy()` when done (also after a failure). */
export async function createPgCluster(bin: string): Promise<PgCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'laurel-pgfault-'));
  if (typeof process.getuid === 'function' && process.getuid() === 0) {
    const uid = Number((await run('id', ['-u', 'postgres'])).stdout.trim());
    const gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
    chownSync(dir, uid, gid);
  }
  const data = join(dir, 'data');
  const logFile = join(dir, 'log');
  const port = await freePort();
  const pgCtl = join(bin, 'pg_ctl');
  const cluster: PgCluster = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    dir,
    async start() {
      await exec([pgCtl, '-D', data, '-l', logFile, '-w', '-t', '60', '-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50`, 'start']);
    },
    async stop(mode = 'fast') {
      await exec([pgCtl, '-D', data, '-m', mode, '-w', '-t', '60', 'stop']);
    },
    async destroy() {
      await exec([pgCtl, '-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
    log: () => (existsSync(logFile) ? readFileSync(logFile, 'utf8') : ''),
  };
  try {
    await exec([join(bin, 'initdb'), '-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync']);
    await cluster.start();
  } catch (error) {
    await cluster.destroy();
    throw error;
  }
  return cluster;
}
