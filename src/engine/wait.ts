/**
 * An interruptible wait for the engine's background loops (subscriptions, the sweeper, the webhook relay):
 * `wait(ms)` resolves after `ms`, or at once when `interrupt()` is called (a `stop()` must not sit out a
 * poll interval or a backoff).
 */
export function interruptibleWait() {
  let wake: (() => void) | null = null;
  return {
    wait(ms: number): Promise<void> {
      return new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          wake = null;
          resolve();
        }, ms);
        wake = () => {
          clearTimeout(timer);
          wake = null;
          resolve();
        };
      });
    },
    /** Ends the wait in progress, if any. */
    interrupt(): void {
      (wake as (() => void) | null)?.();
    },
  };
}
