/**
 * A client over a `pg` Pool for the store, like the pool itself, whose checked-out connections run each of
 * their queries through `around`: a test sees (or breaks) the store's statements on a real server.
 */
import type pg from 'pg';

/** What `around` gets: the statement, its parameters, and the real query on the checked-out connection. */
export type Around = (text: string, params: unknown[] | undefined, run: () => Promise<pg.QueryResult>) => Promise<unknown>;

export function interceptedPool(pool: pg.Pool, around: Around) {
  return {
    totalCount: 0,
    query: (text: string, params?: unknown[]) => pool.query(text, params),
    connect: async () => {
      const conn = await pool.connect();
      return {
        processID: (conn as unknown as { processID: number }).processID,
        on: (event: string, listener: (...a: unknown[]) => void) => conn.on(event as 'error', listener),
        removeListener: (event: string, listener: (...a: unknown[]) => void) => conn.removeListener(event, listener),
        release: (err?: Error | boolean) => conn.release(err),
        query: (text: string, params?: unknown[]) => around(text, params, () => conn.query(text, params)),
      };
    },
  };
}
