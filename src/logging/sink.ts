/**
 * Buffered log output. Lines are collected in memory and written in one batch
 * per event-loop turn, so a busy server does one write syscall per tick rather
 * than one per request. Every output target (a file descriptor or a writer
 * object) has exactly one shared Sink, so lines from different loggers to the
 * same target keep their order.
 *
 * Writing to a file descriptor never waits for its reader: what a full pipe does not take at
 * once waits in a bounded backlog (`KEELSON_LOG_BUFFER_BYTES`, 1 MiB by default, as Docker's
 * non-blocking log mode) that a timer retries; whole lines past it are dropped and counted,
 * and once the reader has taken the backlog a line says how many were lost. At exit the
 * backlog gets a bounded time (`EXIT_DRAIN_MS`) to go out.
 */
import { writeSync } from "node:fs";

/** Anything with a write(string) method: a stream, a test capture, ... (Go's io.Writer). */
export interface LogWriter {
  write(chunk: string): unknown;
}

/** A file descriptor (written with fs.writeSync) or a writer object. */
export type LogOutput = number | LogWriter;

/** The shape of fs.writeSync used here; injectable so tests can simulate full and closed pipes. */
export type FdWrite = (fd: number, buffer: Uint8Array, offset: number, length: number) => number;

/** What one write attempt achieved: bytes the descriptor took, and whether its reader is gone (EPIPE). */
export interface WriteResult {
  written: number;
  closed: boolean;
}

// Past this many UTF-16 units a burst is written at once instead of waiting for the tick.
const FLUSH_THRESHOLD = 64 * 1024;
// Rounds of flushing at exit: a writer that logs while being flushed must not loop forever.
const MAX_FLUSH_ROUNDS = 8;
/** Bytes a sink holds for a reader that does not keep up, unless KEELSON_LOG_BUFFER_BYTES says otherwise. */
export const DEFAULT_LOG_BUFFER_BYTES = 1024 * 1024;
/** How long the exit hook waits at most for a stalled reader to take the backlog. */
export const EXIT_DRAIN_MS = 2000;
// Retries of a backlogged descriptor: soon while the reader takes bytes, then, while it takes
// nothing (stalled), further and further apart up to RETRY_MAX_MS.
const RETRY_FIRST_MS = 1;
const RETRY_MAX_MS = 100;
const NEWLINE = 0x0a;

// Only sinks holding unwritten lines: flushed sinks leave, so nothing here outlives its data.
const pending = new Set<Sink>();
// Sinks whose descriptor refused bytes: the exit hook drains them.
const backlogged = new Set<Sink>();
const fdSinks = new Map<number, Sink>();
const writerSinks = new WeakMap<LogWriter, Sink>();
let flushScheduled = false;
let exitHookInstalled = false;
let droppedTotal = 0;
const sleepCell = new Int32Array(new SharedArrayBuffer(4));
// Under the supervisor, a worker's stdout and stderr are pipes to the primary, which relays them;
// the service's real ones stay open as KEELSON_LOG_FDS ("4,5"). When the primary is gone (EPIPE),
// the lines go there instead of being lost while the worker drains.
const fallbackFds = readFallbackFds(process.env.KEELSON_LOG_FDS);
const bufferLimit = readBufferLimit(process.env.KEELSON_LOG_BUFFER_BYTES);

/** Formats the line that reports dropped lines, in the format of a logger writing to the sink. */
export type DropReporter = (message: string) => string;

/** One output target and the lines waiting to be written to it. */
export class Sink {
  private buffer = "";
  // Set on EPIPE: the reader is gone for good, so later lines are dropped unformatted.
  private closed = false;
  // Bytes the descriptor refused (a full pipe), oldest first; the first may be a line's tail.
  private backlog: Uint8Array[] = [];
  private backlogBytes = 0;
  // Lines dropped since the last report, and when the first of them was.
  private dropped = 0;
  private droppedSince = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private retryDelay = RETRY_FIRST_MS;
  private reporter: DropReporter | undefined;
  private drainWaiters: Array<() => void> = [];

  constructor(private output: LogOutput) {
    if (output === 1 || output === 2) makeNonBlocking(output);
  }

  /** Queues one complete line (with its trailing newline). */
  write(line: string): void {
    if (this.closed) return;
    if (this.buffer.length === 0) markPending(this);
    this.buffer += line;
    if (this.buffer.length >= FLUSH_THRESHOLD) this.flush();
  }

  /**
   * Writes already-encoded complete lines (another process's output relayed through this one)
   * right after the queued lines, so both keep their order on the one target. Never throws.
   */
  writeBytes(bytes: Uint8Array): void {
    this.flush();
    this.emit(bytes);
  }

  /** Writes to `fd` from now on, the lines already queued included. */
  redirect(fd: number): void {
    this.output = fd;
  }

  /** The first logger on a sink decides how the "lines dropped" report is worded and formatted. */
  reportDropsWith(reporter: DropReporter): void {
    this.reporter ??= reporter;
  }

  /** Synchronously writes out everything queued. Never throws. */
  flush(): void {
    const chunk = this.buffer;
    if (chunk.length === 0) return;
    // Cleared before writing so a writer that logs re-enters with a fresh buffer.
    this.buffer = "";
    pending.delete(this);
    this.emit(chunk);
  }

  /** True while bytes wait for the descriptor's reader: a relay should stop reading its source. */
  get congested(): boolean {
    return this.backlogBytes > 0;
  }

  /** Calls `callback` once the backlog has gone out (or the reader is gone for good). */
  onceDrained(callback: () => void): void {
    if (this.backlogBytes === 0) callback();
    else this.drainWaiters.push(callback);
  }

  private emit(chunk: string | Uint8Array): void {
    if (this.closed) return;
    if (typeof this.output === "number") {
      const bytes = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk;
      if (this.backlogBytes > 0) {
        this.enqueue(bytes);
        this.drain();
        return;
      }
      const { written, closed } = writeAvailable(this.output, bytes);
      if (closed) this.readerGone(bytes);
      // The rest of a chunk the descriptor took in part is kept whatever the limit: dropping the
      // tail of a line already half written would glue the next line onto it.
      else if (written < bytes.length) this.hold(bytes.subarray(written));
      return;
    }
    try {
      this.output.write(typeof chunk === "string" ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString("utf8"));
    } catch {
      // A failing writer loses its own lines; it must not crash the code that logged.
    }
  }

  /** Keeps whole lines for the reader if the backlog has room, else drops and counts them. */
  private enqueue(bytes: Uint8Array): void {
    if (this.backlogBytes + bytes.length <= bufferLimit) {
      this.hold(bytes);
      return;
    }
    const lines = countLines(bytes);
    if (this.dropped === 0) this.droppedSince = Date.now();
    this.dropped += lines;
    droppedTotal += lines;
  }

  private hold(bytes: Uint8Array): void {
    // A copy: a relayed chunk's memory belongs to its stream.
    this.backlog.push(Uint8Array.from(bytes));
    this.backlogBytes += bytes.length;
    backlogged.add(this);
    this.scheduleRetry();
  }

  /** Writes as much of the backlog as the descriptor takes now; reports drops once it is empty. */
  private drain(): void {
    const before = this.backlogBytes;
    while (this.backlog.length > 0 && typeof this.output === "number") {
      const head = this.backlog[0] as Uint8Array;
      const { written, closed } = writeAvailable(this.output, head);
      if (closed) {
        const rest = [head.subarray(written), ...this.backlog.slice(1)];
        this.clearBacklog();
        for (const bytes of rest) this.readerGone(bytes);
        return;
      }
      this.backlogBytes -= written;
      if (written < head.length) {
        this.backlog[0] = head.subarray(written);
        if (this.backlogBytes < before) this.retryDelay = RETRY_FIRST_MS;
        return;
      }
      this.backlog.shift();
    }
    this.clearBacklog();
    if (this.dropped > 0) this.reportDrops();
    this.wakeDrainWaiters();
  }

  private wakeDrainWaiters(): void {
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const wake of waiters) wake();
  }

  private reportDrops(): void {
    const seconds = Math.max(0, Math.round((Date.now() - this.droppedSince) / 100) / 10);
    const message = `${this.dropped} log line(s) dropped over ${seconds}s: the reader of this output (fd ${String(this.output)}) ` +
      `did not keep up and the ${bufferLimit}-byte log buffer was full (KEELSON_LOG_BUFFER_BYTES)`;
    this.dropped = 0;
    const line = this.reporter?.(message) ?? `[WARN] keelson: ${message}\n`;
    this.emit(line);
  }

  private clearBacklog(): void {
    this.backlog = [];
    this.backlogBytes = 0;
    backlogged.delete(this);
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.retryDelay = RETRY_FIRST_MS;
  }

  private scheduleRetry(): void {
    if (this.retryTimer !== undefined) return;
    const delay = this.retryDelay;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      // Doubled unless drain() sees progress and sets it back.
      this.retryDelay = Math.min(delay * 2, RETRY_MAX_MS);
      this.drain();
      if (this.backlogBytes > 0) this.scheduleRetry();
    }, delay);
    // Lines waiting for a reader must not keep a finished process alive: the exit hook drains them.
    this.retryTimer.unref();
  }

  /** EPIPE: on to the fallback descriptor if there is one, else closed for good. */
  private readerGone(bytes: Uint8Array): void {
    const fallback = typeof this.output === "number" ? fallbackFds.get(this.output) : undefined;
    if (typeof this.output === "number") fallbackFds.delete(this.output);
    if (fallback === undefined) {
      this.closed = true;
      this.clearBacklog();
      this.wakeDrainWaiters();
      return;
    }
    // The chunk again, whole: part of it may be lost with the primary, duplicates are the lesser harm.
    this.output = fallback;
    this.emit(bytes);
  }

  /** At exit: waits for the reader at most until `deadline` (performance.now()), then gives up. */
  drainUntil(deadline: number): void {
    this.drain();
    while (this.backlogBytes > 0 && performance.now() < deadline) {
      Atomics.wait(sleepCell, 0, 0, 1);
      this.drain();
    }
  }
}

/** The shared sink for an output target; writer sinks die with their writer. */
export function sinkFor(output: LogOutput): Sink {
  if (typeof output === "number") {
    let sink = fdSinks.get(output);
    if (sink === undefined) fdSinks.set(output, (sink = new Sink(output)));
    return sink;
  }
  let sink = writerSinks.get(output);
  if (sink === undefined) writerSinks.set(output, (sink = new Sink(output)));
  return sink;
}

/**
 * The primary is gone: from now on lines go to the service's real stdout and stderr (a no-op
 * outside a supervised worker). Called as soon as the IPC channel drops, so the drain's lines
 * never go into a pipe that nobody reads any more.
 */
export function bypassRelay(): void {
  for (const [fd, original] of fallbackFds) sinkFor(fd).redirect(original);
  fallbackFds.clear();
}

function readFallbackFds(value: string | undefined): Map<number, number> {
  const [out, err] = (value ?? "").split(",").map(Number);
  const fds = new Map<number, number>();
  if (Number.isInteger(out) && Number.isInteger(err)) fds.set(1, out as number).set(2, err as number);
  return fds;
}

/** Flushes every sink with pending lines, synchronously. */
export function flushAllSinks(): void {
  for (let round = 0; pending.size > 0 && round < MAX_FLUSH_ROUNDS; round++) {
    // A snapshot: a writer that logs while flushed re-adds its sink, which a live
    // Set iteration would visit again and again.
    for (const sink of Array.from(pending)) sink.flush();
  }
}

/** At exit: flushes, then gives every backlogged descriptor's reader EXIT_DRAIN_MS in all. */
function flushAtExit(): void {
  flushAllSinks();
  const deadline = performance.now() + EXIT_DRAIN_MS;
  for (const sink of Array.from(backlogged)) sink.drainUntil(deadline);
}

/** How many sinks hold unwritten lines (for leak tests). */
export function pendingSinkCount(): number {
  return pending.size;
}

/** Log lines this process dropped because a reader did not keep up (`keelson_log_lines_dropped_total`). */
export function droppedLogLines(): number {
  return droppedTotal;
}

function markPending(sink: Sink): void {
  pending.add(sink);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    // 'exit' also fires after an uncaught exception, so this covers crashes without
    // an 'uncaughtException' listener (which would change Node's crash behaviour).
    process.on("exit", flushAtExit);
  }
  if (!flushScheduled) {
    flushScheduled = true;
    setImmediate(runScheduledFlush);
  }
}

function runScheduledFlush(): void {
  flushScheduled = false;
  flushAllSinks();
}

function countLines(bytes: Uint8Array): number {
  let lines = 0;
  for (let index = bytes.indexOf(NEWLINE); index !== -1; index = bytes.indexOf(NEWLINE, index + 1)) lines++;
  return Math.max(1, lines);
}

/**
 * Opening process.stdout (or stderr) on a pipe or socket makes libuv put the descriptor in
 * O_NONBLOCK mode, so that a full pipe answers a write with EAGAIN instead of stopping the
 * whole process inside write(2). Files and terminals are left as they are.
 */
function makeNonBlocking(fd: 1 | 2): void {
  try {
    void (fd === 1 ? process.stdout : process.stderr).fd;
  } catch {
    // No usable stream (a closed descriptor): writes fail and are dropped.
  }
}

function readBufferLimit(value: string | undefined): number {
  if (value === undefined || value === "") return DEFAULT_LOG_BUFFER_BYTES;
  const bytes = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(bytes)) {
    throw new Error(`KEELSON_LOG_BUFFER_BYTES must be a whole number of bytes (0 or more); got ${JSON.stringify(value)}`);
  }
  return bytes;
}

/**
 * Writes what `fd` takes now of `bytes`, retrying partial writes and EINTR, never waiting:
 * stops at EAGAIN (a full non-blocking pipe). `closed` is true when the reader is gone (EPIPE);
 * other errors drop the chunk (counted as written). Never throws.
 */
export function writeAvailable(fd: number, bytes: Uint8Array, write: FdWrite = writeSync): WriteResult {
  let written = 0;
  while (written < bytes.length) {
    try {
      written += write(fd, bytes, written, bytes.length - written);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "EAGAIN") return { written, closed: false };
      if (code === "EPIPE") return { written, closed: true };
      if (code !== "EINTR") return { written: bytes.length, closed: false };
    }
  }
  return { written, closed: false };
}
