import type { IpcHandler, IpcMessageType, IpcRequestType } from "../src/cluster/ipc.js";
import { Backoff, CrashBreaker } from "./backoff.js";
import type { Clock } from "./clock.js";
import type { ResolvedSupervisorOptions } from "./options.js";
import { WorkerHandle } from "./worker-handle.js";
import { workerEnv, type ForkWorker } from "./worker-process.js";

/** One worker slot: a stable id, the worker serving it now, its restart backoff. */
export interface Slot {
  readonly id: number;
  current: WorkerHandle | undefined;
  readonly backoff: Backoff;
  /** The cancel of its pending restart, if one is waiting out the backoff. */
  restartTimer: (() => void) | undefined;
  /** Workers forked into this slot so far (first start, restarts, reload replacements). */
  generation: number;
  /** Restarts after a crash. */
  restarts: number;
}


/** What the pool tells its owner. */
export interface PoolEvents {
  /** A slot's worker became ready. */
  ready(handle: WorkerHandle): void;
  /** The crash-loop breaker tripped; `why` is the one-line reason. */
  crashLoop(why: string): void;
  /**
   * The slot's worker ended before it was ready. True when the owner takes it as a failed
   * startup (no restart); false to treat it as a crash (backoff, breaker).
   */
  failedToStart(handle: WorkerHandle): boolean;
}

/**
 * The N worker slots: forks workers into them, keeps every live process (a slot may briefly have
 * two during a reload), and replaces a slot's worker that dies unexpectedly, after its backoff,
 * unless the crash-loop breaker trips.
 */
export class WorkerPool {
  readonly slots: readonly Slot[];
  readonly live = new Set<WorkerHandle>();
  readonly clock: Clock;
  readonly #options: ResolvedSupervisorOptions;
  readonly #events: PoolEvents;
  readonly #fork: ForkWorker;
  readonly #breaker: CrashBreaker;
  /** Integrations' request handlers and message listeners, installed on every worker as it is forked. */
  readonly #handlers = new Map<IpcRequestType<unknown, unknown>, IpcHandler<unknown, unknown>>();
  readonly #messageListeners: Array<(handle: WorkerHandle) => void> = [];
  readonly #listeners = new Set<(worker: WorkerHandle) => void>();
  readonly #excuses: Array<(worker: WorkerHandle) => string | undefined> = [];
  /** Set once stopping: nothing is forked or restarted any more. */
  closed = false;

  /** `fork` starts one worker process (node:cluster in production); `clock` times restarts and the breaker. */
  constructor(options: ResolvedSupervisorOptions, events: PoolEvents, fork: ForkWorker, clock: Clock) {
    this.#options = options;
    this.#events = events;
    this.#fork = fork;
    this.clock = clock;
    this.#breaker = new CrashBreaker(options.crashLoop);
    this.slots = Array.from({ length: options.workers }, (_, index) => ({
      id: index + 1, current: undefined, backoff: new Backoff(options.backoff), restartTimer: undefined,
      generation: 0, restarts: 0,
    }));
  }

  /** Serves a request type from every worker, present and future. */
  handle<P, R>(type: IpcRequestType<P, R>, handler: IpcHandler<P, R>): void {
    this.#handlers.set(type as IpcRequestType<unknown, unknown>, handler as IpcHandler<unknown, unknown>);
    for (const handle of this.live) handle.channel.handle(type, handler);
  }

  /** Listens to a message type from every worker, present and future. */
  onMessage<P>(type: IpcMessageType<P>, listener: (payload: P, worker: WorkerHandle) => void): void {
    const install = (handle: WorkerHandle) => handle.channel.on(type, (payload) => listener(payload, handle));
    this.#messageListeners.push(install);
    for (const handle of this.live) install(handle);
  }

  /** Calls `listener` for every live worker now and for each one forked later; returns the undo. */
  onWorker(listener: (worker: WorkerHandle) => void): () => void {
    this.#listeners.add(listener);
    for (const handle of this.live) listener(handle);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Adds a judge of worker deaths: a reason it returns (e.g. the worker died running a job)
   * keeps that death out of the crash-loop breaker. The slot still restarts after its backoff.
   */
  excuseCrashes(judge: (worker: WorkerHandle) => string | undefined): void {
    this.#excuses.push(judge);
  }

  /** Forks a worker for slot `id` without making it the slot's worker (reload promotes it once ready). */
  fork(id: number): WorkerHandle {
    const handle = new WorkerHandle(id, this.#fork(workerEnv(this.#options, id)), this.#options.logger, this.clock);
    const slot = this.slots[id - 1];
    if (slot !== undefined) handle.generation = ++slot.generation;
    this.live.add(handle);
    for (const [type, handler] of this.#handlers) handle.channel.handle(type, handler);
    for (const install of this.#messageListeners) install(handle);
    for (const listener of this.#listeners) listener(handle);
    void handle.exited.then(() => this.#onExit(handle));
    return handle;
  }

  /** Starts (or restarts) a slot's worker; one not ready within `readyTimeout` is killed, which counts as a crash. */
  start(slot: Slot): void {
    if (this.closed) return;
    const handle = this.fork(slot.id);
    slot.current = handle;
    handle.waitReady(this.#options.readyTimeout).then(
      () => this.#events.ready(handle),
      (error: Error) => {
        if (handle.exit === undefined) handle.kill(error.message);
      },
    );
  }

  /** Makes `handle` the slot's worker (a reload's replacement, once ready). */
  promote(slot: Slot, handle: WorkerHandle): void {
    slot.restartTimer?.();
    slot.restartTimer = undefined;
    slot.current = handle;
  }

  /** The crash-loop breaker: crashes within its window now. */
  crashesNow(): number {
    return this.#breaker.recent(this.clock.now());
  }

  /** Stops forking and cancels pending restarts. */
  close(): void {
    this.closed = true;
    for (const slot of this.slots) slot.restartTimer?.();
  }

  #onExit(handle: WorkerHandle): void {
    this.live.delete(handle);
    const slot = this.slots[handle.id - 1];
    // Not the slot's worker: an old one a reload retired, or a replacement that failed (the reload logs it).
    if (slot === undefined || slot.current !== handle) return;
    slot.current = undefined;
    const { logger, crashLoop } = this.#options;
    if (this.closed) {
      logger.info("%s exited %s", handle.name, handle.describeEnd());
      return;
    }
    if (handle.readyAt === undefined && this.#events.failedToStart(handle)) return;
    if (handle.restartAsked !== undefined) {
      logger.info("%s exited %s; restarting its slot (%s)", handle.name, handle.describeEnd(), handle.restartAsked);
      slot.restarts++;
      this.start(slot);
      return;
    }
    const excuse = this.#excuse(handle);
    if (excuse !== undefined) {
      const delay = slot.backoff.delay(handle.uptime);
      logger.warn("%s died %s; restarting in %dms (not counted by the crash-loop breaker: %s)", handle.name, handle.describeEnd(), delay, excuse);
      this.#restartLater(slot, delay);
      return;
    }
    if (this.#breaker.record(this.clock.now())) {
      const why = `crash loop: ${this.#breaker.count} worker crashes within ${crashLoop.window}ms (limit ${crashLoop.maxCrashes}), the last: ${handle.name} exited ${handle.describeEnd()}; giving up`;
      logger.logError("%s", why);
      this.#events.crashLoop(why);
      return;
    }
    const delay = slot.backoff.delay(handle.uptime);
    logger.warn("%s died unexpectedly %s; restarting in %dms (crash %d within %dms; giving up at %d)",
      handle.name, handle.describeEnd(), delay, this.#breaker.count, crashLoop.window, crashLoop.maxCrashes);
    this.#restartLater(slot, delay);
  }

  #restartLater(slot: Slot, delay: number): void {
    slot.restartTimer = this.clock.after(delay, () => {
      slot.restartTimer = undefined;
      if (slot.current !== undefined) return;
      slot.restarts++;
      this.start(slot);
    });
  }

  #excuse(handle: WorkerHandle): string | undefined {
    for (const judge of this.#excuses) {
      const excuse = judge(handle);
      if (excuse !== undefined) return excuse;
    }
    return undefined;
  }
}
