/**
 * A per-key async mutex. Calls for the same user inside one process run one after another, so they never
 * race each other into optimistic-concurrency conflicts; conflicts with other processes are still handled
 * by the engine's bounded retries.
 */
export class KeyedLock {
  private readonly tails = new Map<string, Promise<unknown>>();

  /** Whether no call holds or waits for `key`'s lock (a call that is synchronous from here on cannot race one). */
  idle(key: string): boolean {
    return !this.tails.has(key);
  }

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key);
    let result: Promise<T>;
    if (previous === undefined) {
      // Uncontended (the common case): start at once, without waiting a turn behind a resolved promise.
      try {
        result = task();
      } catch (error) {
        result = Promise.reject(error);
      }
    } else {
      result = previous.then(task, task);
    }
    const release = (): undefined => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
      return undefined;
    };
    const tail: Promise<unknown> = result.then(release, release);
    this.tails.set(key, tail);
    return result;
  }
}

/**
 * Runs `task` holding the locks of every key in `keys` (taken in sorted order, so two calls that share keys
 * never wait on each other in a cycle).
 */
export async function runLocked<T>(lock: KeyedLock, keys: readonly string[], task: () => Promise<T>): Promise<T> {
  const sorted = [...new Set(keys)].sort();
  // Each lock is held by a turn that waits for `done`; they are taken one after another (a loop, not nested
  // calls: a batch of 10 000 users must not take 10 000 stack frames).
  let release!: () => void;
  const done = new Promise<void>((resolve) => {
    release = resolve;
  });
  try {
    for (const key of sorted) {
      await new Promise<void>((acquired) => {
        void lock.run(key, () => {
          acquired();
          return done;
        });
      });
    }
    return await task();
  } finally {
    release();
  }
}
