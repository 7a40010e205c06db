import { createHash } from "node:crypto";
import { lazyImport } from "../lazy-package.js";
import { errorMessage } from "../errors.js";

/** Options of `openRedis()`. */
export interface RedisOptions {
  /** `redis://[user:password@]host:port[/db]` (or `rediss://` for TLS). */
  url: string;
  /** Milliseconds to wait for the connection (default 5000). */
  connectTimeoutMs?: number;
}

/** A Lua script run by its SHA1 (EVALSHA), sent whole (EVAL) only when the server does not know it yet. */
export interface RedisScript {
  readonly source: string;
  readonly sha1: string;
}

/** A connection to Redis shared by the stores of one process: what `openRedis()` returns. */
export interface RedisConnection {
  /** Runs one command (`["GET", "key"]`) and resolves its reply; rejects while Redis cannot be reached. */
  command(args: readonly string[], signal?: AbortSignal): Promise<unknown>;
  /** Runs `script` with its keys and arguments in one round trip (EVALSHA; EVAL once after a NOSCRIPT). */
  run(script: RedisScript, keys: readonly string[], args: readonly string[], signal?: AbortSignal): Promise<unknown>;
  /** Closes the connection; commands after it reject. */
  close(): Promise<void>;
}

/**
 * A Lua script and its SHA1, computed once, for `RedisConnection.run()`.
 *
 * @example
 * const touch = defineRedisScript("return redis.call('PEXPIRE', KEYS[1], ARGV[1])");
 * await redis.run(touch, ["session:42"], ["60000"]);
 */
export function defineRedisScript(source: string): RedisScript {
  return { source, sha1: createHash("sha1").update(source).digest("hex") };
}

/**
 * The part of node-redis keelson uses, written out: its own types are large enough to double the
 * compile time of every program importing keelson/redis, and they are loaded only when used.
 */
interface Client {
  on(event: "error", listener: (error: Error) => void): unknown;
  on(event: "ready", listener: () => void): unknown;
  connect(): Promise<unknown>;
  sendCommand(args: string[], options?: { abortSignal?: AbortSignal }): Promise<unknown>;
  close(): Promise<void>;
  readonly isOpen: boolean;
}

interface ClientOptions {
  url: string;
  disableOfflineQueue: boolean;
  socket: { connectTimeout: number; reconnectStrategy: (retries: number, cause: Error) => number | Error };
}

/** The package name in a variable: the compiler (and a bundler) leaves the optional peer alone. */
const REDIS_PACKAGE = "redis";

const loadRedis = lazyImport(REDIS_PACKAGE, async () => (await import(REDIS_PACKAGE)) as { createClient(options: ClientOptions): Client });

/** Reconnection waits grow to this at most while Redis is away. */
const MAX_RECONNECT_WAIT_MS = 1000;

async function connect(options: RedisOptions): Promise<Client> {
  const redis = await loadRedis("openRedis()");
  const client = redis.createClient({
    url: options.url,
    // A command sent while Redis is away fails at once (the limiter then allows or rejects by its
    // onStoreError) instead of waiting in a queue and spending units minutes later.
    disableOfflineQueue: true,
    socket: {
      connectTimeout: options.connectTimeoutMs ?? 5000,
      // The first connection is not retried (the command fails, the next one connects anew); a
      // connection that was up is, with waits growing to a second.
      reconnectStrategy: (retries: number, cause: Error) => (ready ? Math.min(50 * 2 ** retries, MAX_RECONNECT_WAIT_MS) : cause),
    },
  });
  let ready = false;
  let reported = 0;
  // Without a listener an 'error' event would end the process; the failed commands report the outage.
  client.on("error", (error: Error) => {
    if (reported++ % 100 === 0) console.error(`keelson: redis: ${error.message} (reconnecting)`);
  });
  client.on("ready", () => {
    ready = true;
    reported = 0;
  });
  await client.connect();
  return client;
}

/**
 * Opens a connection to Redis through the `redis` package (node-redis, an optional peer
 * dependency loaded on first use). It connects at the first command, reconnects on its own
 * (waits growing to 1 s), and never queues commands while disconnected: they reject at once.
 * Close it from a shutdown hook.
 *
 * @example
 * const redis = openRedis({ url: process.env.REDIS_URL! });
 * app.onShutdown(() => redis.close(), "redis: close");
 */
export function openRedis(options: RedisOptions): RedisConnection {
  if (typeof options?.url !== "string" || !/^rediss?:\/\//.test(options.url)) {
    throw new TypeError(`openRedis: url must be a redis:// or rediss:// URL, got ${JSON.stringify(options?.url)}`);
  }
  const timeout = options.connectTimeoutMs;
  if (timeout !== undefined && !(Number.isSafeInteger(timeout) && timeout > 0)) throw new TypeError(`openRedis: connectTimeoutMs must be a positive integer, got ${String(timeout)}`);
  let client: Promise<Client> | undefined;
  let closed = false;
  const open = () => {
    if (closed) return Promise.reject(new Error("the redis connection is closed"));
    // A failed first connection is tried again at the next command.
    return (client ??= connect(options).catch((error: unknown) => {
      client = undefined;
      throw error;
    }));
  };
  const command = async (args: readonly string[], signal?: AbortSignal) => {
    signal?.throwIfAborted();
    return (await open()).sendCommand([...args], signal === undefined ? undefined : { abortSignal: signal });
  };
  return {
    command,
    async run(script, keys, args, signal) {
      const tail = [String(keys.length), ...keys, ...args];
      try {
        return await command(["EVALSHA", script.sha1, ...tail], signal);
      } catch (error) {
        if (!errorMessage(error).startsWith("NOSCRIPT")) throw error;
        return command(["EVAL", script.source, ...tail], signal);
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      const connected = await client?.catch(() => undefined);
      if (connected?.isOpen) await connected.close();
    },
  };
}
