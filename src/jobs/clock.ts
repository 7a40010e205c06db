/** setTimeout's longest delay; a later tick is reached in several waits. */
const MAX_WAIT_MS = 2 ** 31 - 1;

/**
 * Calls `onTick(scheduledAt)` at each tick of `nextTick`, from now on. A tick that passed while
 * the event loop was blocked fires once, late, with its own scheduled time; the ticks after it
 * that have also passed are skipped (never a burst of catch-up runs).
 */
export class TickClock {
  readonly #nextTick: (after: Date) => Date;
  readonly #onTick: (scheduledAt: Date) => void;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(nextTick: (after: Date) => Date, onTick: (scheduledAt: Date) => void) {
    this.#nextTick = nextTick;
    this.#onTick = onTick;
  }

  start(): void {
    this.#stopped = false;
    this.#arm(this.#nextTick(new Date()));
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #arm(due: Date): void {
    if (this.#stopped) return;
    const wait = due.getTime() - Date.now();
    this.#timer = setTimeout(() => {
      if (Date.now() < due.getTime()) return this.#arm(due);
      this.#onTick(due);
      this.#arm(this.#nextTick(new Date(Math.max(due.getTime(), Date.now() - 1))));
    }, Math.min(Math.max(wait, 0), MAX_WAIT_MS));
    // The clock never keeps a process alive on its own: the server (or the supervisor) does.
    this.#timer.unref();
  }
}
