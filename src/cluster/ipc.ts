import { errorMessage } from "../errors.js";
import { Slots } from "../slots.js";
/**
 * The one IPC protocol between the supervisor (primary) and its workers. Every message is an
 * envelope `{ keelson: 1, type, id?, replyTo?, payload }`; anything else on the channel (user
 * messages) is ignored. Requests carry `id`; the answer carries `replyTo` with the same number.
 * Every type is declared the same way, as a value made by `defineIpcMessage` / `defineIpcRequest`:
 * the core's own (ready, heartbeat, draining, failed, shutdown) below, the features' in their own
 * files, like node:cluster's internal messages share one envelope whatever they carry.
 */

/**
 * A message type an integration owns: a one-way `send`/`on` (`kind: "message"`) or a
 * `request`/`handle` pair with a reply (`kind: "request"`). The payload types live only in the
 * type parameters; on the wire it is the name in the one envelope. Make them with
 * `defineIpcMessage` / `defineIpcRequest`.
 */
export interface IpcMessageType<Payload> {
  readonly kind: "message";
  readonly name: string;
  /** Phantom: never set, carries the payload type. */
  readonly payload?: Payload;
}

/** A request type with its reply type; see `IpcMessageType`. */
export interface IpcRequestType<Payload, Reply> {
  readonly kind: "request";
  readonly name: string;
  /** Phantom: never set, carry the payload and reply types. */
  readonly payload?: Payload;
  readonly reply?: Reply;
}

const OWNED_NAME = /^[a-z][a-z0-9-]*:[a-z][a-zA-Z0-9-]*$/;
const registered = new Map<string, "message" | "request">();

function register(name: string, kind: "message" | "request"): void {
  if (!OWNED_NAME.test(name)) throw new Error(`IPC type "${name}" must be "<integration>:<name>" (e.g. "metrics:snapshot")`);
  const known = registered.get(name);
  // The same module evaluated twice (dist/ and src/ in one process) defines the same name again: fine.
  if (known !== undefined && known !== kind) throw new Error(`IPC type "${name}" is already registered as a ${known}`);
  registered.set(name, kind);
}

/**
 * Registers a one-way IPC message type of an integration. The core protocol (`workerReady`, …
 * below) is declared the same way under its bare names; everything an integration
 * adds (metrics, later jobs, rate limits, status) is declared in the integration's own file with
 * this and `defineIpcRequest`, and handled on each side with the Channel (worker side:
 * `getPrimaryChannel()`; primary side: the FeatureHost's `handle()`/`onMessage()` for every
 * worker, or `worker.channel`). Names are `"<integration>:<name>"`, so integrations cannot
 * collide with the core or with each other.
 *
 * @example
 * // src/jobs/ipc.ts — types shared by both sides
 * export const jobDone = defineIpcMessage<{ id: string; ms: number }>("jobs:done");
 * // worker
 * getPrimaryChannel()?.send(jobDone, { id, ms });
 * // primary
 * host.onMessage(jobDone, ({ id, ms }, worker) => record(worker.id, id, ms));
 */
export function defineIpcMessage<Payload>(name: string): IpcMessageType<Payload> {
  register(name, "message");
  return Object.freeze({ kind: "message", name });
}

/**
 * Registers an IPC request type (a message with a reply, bounded by the caller's timeout) of an
 * integration; see `defineIpcMessage` for the rules. Either side may serve it.
 *
 * @example
 * // src/metrics/ipc.ts
 * export const metricsSnapshot = defineIpcRequest<Record<string, never>, { snapshot: MetricsSnapshot }>("metrics:snapshot");
 * // worker: serves it
 * getPrimaryChannel()?.handle(metricsSnapshot, async () => ({ snapshot: await read() }));
 * // primary: asks one worker, never waiting past 2 s
 * const { snapshot } = await worker.channel.request(metricsSnapshot, {}, 2000);
 */
export function defineIpcRequest<Payload, Reply>(name: string): IpcRequestType<Payload, Reply> {
  register(name, "request");
  return Object.freeze({ kind: "request", name });
}

/** The core protocol's types: declared like an integration's, named without a prefix (no integration can take one). */
function defineCoreMessage<Payload>(name: string): IpcMessageType<Payload> {
  registered.set(name, "message");
  return Object.freeze({ kind: "message", name });
}

/**
 * Worker → primary: the App is listening, the worker counts as ready. `url` and `docsUrl` feed the
 * supervisor's summary line; `shutdownTimeout` is the App's budget, after which (plus a margin) it is killed.
 */
export const workerReady = defineCoreMessage<{ pid: number; port: number; url: string; docsUrl?: string; shutdownTimeout: number }>("ready");
/** Worker → primary, on an interval from the event loop: a missing beat means a blocked loop. */
export const workerHeartbeat = defineCoreMessage<{ at: number }>("heartbeat");
/** Worker → primary: it began draining (signal or close()). */
export const workerDraining = defineCoreMessage<{ reason: string }>("draining");
/** Worker → primary: it is about to die of this, in one line: its App could not start, or an uncaught error. */
export const workerFailed = defineCoreMessage<{ reason: string }>("failed");
/** Worker → primary: the App has shut down; `problems` says in one line what made it unclean (the drain cap, a hook), empty when clean. */
export const workerStopped = defineCoreMessage<{ clean: boolean; problems: string }>("stopped");
/** Primary → worker: drain and exit (where a signal cannot be sent). */
export const primaryShutdown = defineCoreMessage<{ reason: string }>("shutdown");

type PayloadOf<T> = T extends IpcMessageType<infer P> ? P : never;

/** The core messages a worker sends, by name → payload: the types above, which a Channel also accepts by name. */
export interface WorkerMessages {
  ready: PayloadOf<typeof workerReady>;
  heartbeat: PayloadOf<typeof workerHeartbeat>;
  draining: PayloadOf<typeof workerDraining>;
  failed: PayloadOf<typeof workerFailed>;
  stopped: PayloadOf<typeof workerStopped>;
}

/** The core messages the primary sends, by name → payload. */
export interface PrimaryMessages {
  shutdown: PayloadOf<typeof primaryShutdown>;
}

/** A handler of a request type: its value (or rejection) is the reply. */
export type IpcHandler<Payload, Reply> = (payload: Payload) => Reply | Promise<Reply>;

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

/** Requests one channel lets wait for a reply at once: an id is its slot (under this) plus a multiple of it. */
const MAX_PENDING = 2 ** 20;
/** Ids stay safe integers: MAX_PENDING × MAX_SEQUENCE is under 2⁵³. */
const MAX_SEQUENCE = 2 ** 32;

/** A request waiting for its reply. */
interface Pending {
  readonly id: number;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: Error) => void;
  readonly timer: NodeJS.Timeout;
}

function typeName(type: string | { readonly name: string }): string {
  return typeof type === "string" ? type : type.name;
}

/**
 * A typed, bidirectional message channel over one IPC endpoint. `request()` times out rather
 * than hang, so one busy or dead peer never blocks the caller past its deadline.
 */
export class Channel<Out extends object, In extends object> {
  readonly #endpoint: Endpoint;
  readonly #listeners = new Map<string, Set<Handler>>();
  readonly #handlers = new Map<string, Handler>();
  /** Requests waiting for their reply (not a Map keyed by the id: see Slots); a request's id carries its slot. */
  readonly #pending = new Slots<Pending>();
  #sequence = 0;
  readonly #onMessage = (message: unknown) => this.#receive(message);

  constructor(endpoint: Endpoint) {
    this.#endpoint = endpoint;
    endpoint.on("message", this.#onMessage);
  }

  /** Sends a one-way message (a core type such as `workerReady`, or an integration's; a core type also by its name); false when the channel is closed (never throws). */
  send<T extends keyof Out & string>(type: T, payload: Out[T]): boolean;
  send<P>(type: IpcMessageType<P>, payload: P): boolean;
  send(type: string | IpcMessageType<unknown>, payload: unknown): boolean {
    return this.#post({ keelson: 1, type: typeName(type), payload });
  }

  /** Listens to a one-way message type (a core type, or an integration's; a core type also by its name); returns the undo. */
  on<T extends keyof In & string>(type: T, listener: (payload: In[T]) => void): () => void;
  on<P>(type: IpcMessageType<P>, listener: (payload: P) => void): () => void;
  on(type: string | IpcMessageType<unknown>, listener: (payload: never) => void): () => void {
    const name = typeName(type);
    const set = this.#listeners.get(name) ?? new Set();
    set.add(listener as Handler);
    this.#listeners.set(name, set);
    return () => set.delete(listener as Handler);
  }

  /** Serves one request type (replacing an earlier handler); the handler's value (or rejection) is sent back as the reply. */
  handle<P, R>(type: IpcRequestType<P, R>, handler: IpcHandler<P, R>): void {
    this.#handlers.set(type.name, handler as Handler);
  }

  /** Asks the peer; rejects when it does not answer within `timeoutMs`, has no handler, or the channel closes. */
  request<P, R>(type: IpcRequestType<P, R>, payload: P, timeoutMs: number): Promise<R> {
    const name = type.name;
    return new Promise((resolve, reject) => {
      const slot = this.#pending.next;
      if (slot >= MAX_PENDING) {
        reject(new Error(`IPC request ${name} refused: ${MAX_PENDING} requests already wait for a reply`));
        return;
      }
      // The slot plus a count that changes at every request: a reply that comes after its
      // request timed out finds another id in that slot.
      const id = this.#sequence * MAX_PENDING + slot + 1;
      this.#sequence = (this.#sequence + 1) % MAX_SEQUENCE;
      const timer = setTimeout(() => {
        this.#take(id);
        reject(new Error(`IPC request ${name} timed out after ${timeoutMs}ms`));
      }, timeoutMs);
      this.#pending.add({ id, resolve: resolve as (v: unknown) => void, reject, timer });
      if (!this.#post({ keelson: 1, type: name, id, payload })) {
        clearTimeout(timer);
        this.#take(id);
        reject(new Error(`IPC request ${name} failed: channel closed`));
      }
    });
  }

  /** The request `id` still waiting for its reply (undefined: answered, timed out or never sent), its slot freed. */
  #take(id: number): Pending | undefined {
    const slot = (id - 1) % MAX_PENDING;
    const pending = this.#pending.get(slot);
    if (pending === undefined || pending.id !== id) return undefined;
    this.#pending.release(slot, pending);
    return pending;
  }

  /** Stops listening and fails every pending request. */
  close(): void {
    this.#endpoint.off("message", this.#onMessage);
    const pending = this.#pending;
    pending.forEach((request) => {
      clearTimeout(request.timer);
      request.reject(new Error("IPC channel closed"));
    });
    pending.clear();
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
      const pending = typeof message.replyTo === "number" ? this.#take(message.replyTo) : undefined;
      if (!pending) return;
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
      this.#post({ keelson: 1, type, replyTo: id, error: errorMessage(error) });
    }
  }
}

/** The channel to the primary, from a worker; the primary's side is `cluster.Worker`. */
export type PrimaryChannel = Channel<WorkerMessages, PrimaryMessages>;
