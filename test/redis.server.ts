/**
 * A throwaway redis-server for fault tests: started on a free loopback port, stopped and started again on
 * the same port (it comes back empty: no RDB, no AOF). Never touches the shared server at LAUREL_REDIS_URL.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer, Socket } from 'node:net';

/** True when a `redis-server` binary is on PATH. */
export const HAS_REDIS_SERVER = (() => {
  try {
    return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
  } catch {
    return false;
  }
})();

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/** Resolves once something answers PING with +PONG on the port, or rejects after `ms`. */
async function waitForPong(port: number, ms: number): Promise<void> {
  const until = Date.now() + ms;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = new Socket();
      const done = (v: boolean) => {
        s.destroy();
        resolve(v);
      };
      s.setTimeout(200, () => done(false));
      s.once('error', () => done(false));
      s.once('data', (d) => done(d.toString().startsWith('+PONG')));
      s.connect(port, '127.0.0.1', () => s.write('PING\r\n'));
    });
    if (ok) return;
    if (Date.now() > until) throw new Error(`redis-server on port ${port} did not start within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export interface SpawnedRedis {
  port: number;
  url: string;
  /** Starts the server (again) on the same port, empty. */
  start(): Promise<void>;
  /** Stops the server with SIGTERM and waits for the process to exit. */
  stop(): Promise<void>;
  /** Freezes the process (SIGSTOP): connections stay open, nothing answers. */
  pause(): void;
  /** Thaws it (SIGCONT). */
  resume(): void;
}

export async function spawnRedis(): Promise<SpawnedRedis> {
  const port = await freePort();
  let child: ChildProcess | null = null;
  const handle: SpawnedRedis = {
    port,
    url: `redis://127.0.0.1:${port}`,
    async start() {
      if (child) throw new Error('already running');
      const c = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--loglevel', 'warning'], { stdio: 'ignore' });
      child = c;
      c.once('exit', () => {
        if (child === c) child = null;
      });
      await waitForPong(port, 10_000);
    },
    pause() {
      child?.kill('SIGSTOP');
    },
    resume() {
      child?.kill('SIGCONT');
    },
    async stop() {
      const c = child;
      if (!c) return;
      if (c.exitCode !== null || c.signalCode !== null) {
        child = null;
        return;
      }
      const exited = new Promise<void>((resolve) => c.once('exit', () => resolve()));
      c.kill('SIGCONT');
      c.kill('SIGTERM');
      await exited;
      child = null;
    },
  };
  await handle.start();
  return handle;
}
