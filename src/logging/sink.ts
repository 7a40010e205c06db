/**
 * Buffered log output. Lines are collected in memory and written in one batch
 * per event-loop turn, so a busy server does one write syscall per tick rather
 * than one per request. Every output target (a file descriptor or a writer
 * object) has exactly one shared Sink, so lines from different loggers to the
 * same target keep their order.
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

// Past this many UTF-16 units a burst is written at once instead of waiting for the tick.
const FLUSH_THRESHOLD = 64 * 1024;
// Rounds of flushing at exit: a writer that logs while being flushed must not loop forever.
const MAX_FLUSH_ROUNDS = 8;

// Only sinks holding unwritten lines: flushed sinks leave, so nothing here outlives its data.
const pending = new Set<Sink>();
const fdSinks = new Map<number, Sink>();
const writerSinks = new WeakMap<LogWriter, Sink>();
let flushScheduled = false;
let exitHookInstalled = false;
const sleepCell = new Int32Array(new SharedArrayBuffer(4));
// Under the supervisor, a worker's stdout and stderr are pipes to the primary, which relays them;
// the service's real ones stay open as KEELSON_LOG_FDS ("4,5"). When the primary is gone (EPIPE),
// the lines go there instead of being lost while the worker drains.
const fallbackFds = readFallbackFds(process.env.KEELSON_LOG_FDS);

/** One output target and the lines waiting to be written to it. */
export class Sink {
  private buffer = "";
  // Set on EPIPE: the reader is gone for good, so later lines are dropped unformatted.
  private closed = false;

  constructor(private output: LogOutput) {}

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

  /** Synchronously writes out everything queued. Never throws. */
  flush(): void {
    const chunk = this.buffer;
    if (chunk.length === 0) return;
    // Cleared before writing so a writer that logs re-enters with a fresh buffer.
    this.buffer = "";
    pending.delete(this);
    this.emit(chunk);
  }

  private emit(chunk: string | Uint8Array): void {
    if (this.closed) return;
    if (typeof this.output === "number") {
      if (writeAllSync(this.output, chunk)) return;
      const fallback = fallbackFds.get(this.output);
      fallbackFds.delete(this.output);
      if (fallback === undefined) this.closed = true;
      else {
        // The chunk again, whole: part of it may be lost with the primary, duplicates are the lesser harm.
        this.output = fallback;
        this.emit(chunk);
      }
      return;
    }
    try {
      this.output.write(typeof chunk === "string" ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString("utf8"));
    } catch {
      // A failing writer loses its own lines; it must not crash the code that logged.
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

/** How many sinks hold unwritten lines (for leak tests). */
export function pendingSinkCount(): number {
  return pending.size;
}

function markPending(sink: Sink): void {
  pending.add(sink);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    // 'exit' also fires after an uncaught exception, so this covers crashes without
    // an 'uncaughtException' listener (which would change Node's crash behaviour).
    process.on("exit", flushAllSinks);
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

/**
 * Writes all of `chunk` to `fd`, retrying partial writes and EAGAIN (a full
 * non-blocking pipe) until done. Returns false when the reader is gone (EPIPE);
 * other errors drop this chunk only. Never throws.
 */
export function writeAllSync(fd: number, chunk: string | Uint8Array, write: FdWrite = writeSync): boolean {
  const bytes = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk;
  let offset = 0;
  while (offset < bytes.length) {
    try {
      offset += write(fd, bytes, offset, bytes.length - offset);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "EAGAIN") {
        // Block for 1 ms instead of spinning: the reader needs the CPU to drain the pipe.
        Atomics.wait(sleepCell, 0, 0, 1);
      } else if (code !== "EINTR") {
        return code !== "EPIPE";
      }
    }
  }
  return true;
}
