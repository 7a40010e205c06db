/**
 * The one IPC protocol between the supervisor (primary) and its workers. Every message is an
 * envelope `{ keelson: 1, type, id?, replyTo?, payload }`; anything else on the channel (user
 * messages) is ignored. Requests carry `id`; the answer carries `replyTo` with the same number.
 */

/** prom-client's `getMetricsAsJSON()` output, as sent over IPC. */
export type MetricsSnapshot = ReadonlyArray<Record<string, unknown>>;

/** Messages a worker sends, by type → payload. */
export interface WorkerMessages {
  /**
   * The App is listening: the worker counts as ready. `url` and `docsUrl` feed the supervisor's
   * summary line; `shutdownTimeout` is the App's budget, after which (plus a margin) it is killed.
   */
  ready: { pid: number; port: number; url: string; docsUrl?: string; shutdownTimeout: number };
  /** Sent on an interval from the event loop: a missing beat means a blocked loop. */
  heartbeat: { at: number };
  /** The worker began draining (signal or close()). */
  draining: { reason: string };
  /** The worker is about to die of this, in one line: its App could not start, or an uncaught error. */
  failed: { reason: string };
}

/** Messages the primary sends, by type → payload. */
export interface PrimaryMessages {
  /** Drain and exit (used where a signal cannot be sent). */
  shutdown: { reason: string };
}

/** Request types, by type → [request payload, reply payload]. Either side may serve them. */
export interface Requests {
  /** Worker → primary: the cluster-wide exposition for a scrape of /metrics; `timeoutMs` is per worker. */
  "metrics:cluster": [{ timeoutMs: number }, { text: string; contentType: string }];
  /** Primary → worker: this worker's metrics snapshot. */
  "metrics:snapshot": [Record<string, never>, { snapshot: MetricsSnapshot }];
  /** Worker → primary, after its drain: its last snapshot, kept by the primary once it has exited. */
  "metrics:final": [{ pid: number; snapshot: MetricsSnapshot }, Record<string, never>];
}

export type RequestType = keyof Requests;

export interface Envelope {
  keelson: 1;
  type: string;
  id?: number;
  replyTo?: number;
  error?: string;
  payload?: unknown;
}

/** The part of `process` (worker side) or `cluster.Worker` (primary side) a Channel needs. */
export interface Endpoint {
  send(message: Envelope): unknown;
  on(event: "message", listener: (message: unknown) => void): unknown;
  off(event: "message", listener: (message: unknown) => void): unknown;
  readonly connected?: boolean;
}

export function isEnvelope(message: unknown): message is Envelope {
  return typeof message === "object" && message !== null && (message as Envelope).keelson === 1
    && typeof (message as Envelope).type === "string";
}

type Handler = (payload: unknown) => unknown;

/**
 * A typed, bidirectional message channel over one IPC endpoint. `request()` times out rather
 * than hang, so one busy or dead peer never blocks the caller past its deadline.
 */
export class Channel<Out extends object, In extends object> {
  readonly #endpoint: Endpoint;
  readonly #listeners = new Map<string, Set<Handler>>();
  readonly #handlers = new Map<string, Handler>();
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();
  #nextId = 1;
  readonly #onMessage = (message: unknown) => this.#receive(message);

  constructor(endpoint: Endpoint) {
    this.#endpoint = endpoint;
    endpoint.on("message", this.#onMessage);
  }

  /** Sends a one-way message; false when the channel is closed (never throws). */
  send<T extends keyof Out & string>(type: T, payload: Out[T]): boolean {
    return this.#post({ keelson: 1, type, payload });
  }

  on<T extends keyof In & string>(type: T, listener: (payload: In[T]) => void): () => void {
    const set = this.#listeners.get(type) ?? new Set();
    set.add(listener as Handler);
    this.#listeners.set(type, set);
    return () => set.delete(listener as Handler);
  }

  /** Serves one request type; the handler's value (or rejection) is sent back as the reply. */
  handle<T extends RequestType>(type: T, handler: (payload: Requests[T][0]) => Requests[T][1] | Promise<Requests[T][1]>): void {
    this.#handlers.set(type, handler as Handler);
  }

  request<T extends RequestType>(type: T, payload: Requests[T][0], timeoutMs: number): Promise<Requests[T][1]> {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new Error(`IPC request ${type} timed out after ${timeoutMs}ms`));
      }, timeoutMs);
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject, timer });
      if (!this.#post({ keelson: 1, type, id, payload })) {
        clearTimeout(timer);
        this.#pending.delete(id);
        reject(new Error(`IPC request ${type} failed: channel closed`));
      }
    });
  }

  /** Stops listening and fails every pending request. */
  close(): void {
    this.#endpoint.off("message", this.#onMessage);
    for (const [id, pending] of this.#pending) {
      clearTimeout(pending.timer);
      pending.reject(new Error("IPC channel closed"));
      this.#pending.delete(id);
    }
  }

  #post(envelope: Envelope): boolean {
    if (this.#endpoint.connected === false) return false;
    try {
      this.#endpoint.send(envelope);
      return true;
    } catch {
      return false;
    }
  }

  #receive(message: unknown): void {
    if (!isEnvelope(message)) return;
    if (message.replyTo !== undefined) {
      const pending = this.#pending.get(message.replyTo);
      if (!pending) return;
      this.#pending.delete(message.replyTo);
      clearTimeout(pending.timer);
      if (message.error !== undefined) pending.reject(new Error(message.error));
      else pending.resolve(message.payload);
      return;
    }
    if (message.id !== undefined) {
      void this.#serve(message.type, message.id, message.payload);
      return;
    }
    for (const listener of this.#listeners.get(message.type) ?? []) listener(message.payload);
  }

  async #serve(type: string, id: number, payload: unknown): Promise<void> {
    const handler = this.#handlers.get(type);
    if (!handler) {
      this.#post({ keelson: 1, type, replyTo: id, error: `no handler for ${type}` });
      return;
    }
    try {
      this.#post({ keelson: 1, type, replyTo: id, payload: await handler(payload) });
    } catch (error) {
      this.#post({ keelson: 1, type, replyTo: id, error: error instanceof Error ? error.message : String(error) });
    }
  }
}
