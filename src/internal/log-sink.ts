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

/** One output target and the lines waiting to be written to it. */
export class Sink {
  private buffer = "";
  // Set on EPIPE: the reader is gone for good, so later lines are dropped unformatted.
  private closed = false;

  constructor(private readonly output: LogOutput) {}

  /** Queues one complete line (with its trailing newline). */
  write(line: string): void {
    if (this.closed) return;
    if (this.buffer.length === 0) markPending(this);
    this.buffer += line;
    if (this.buffer.length >= FLUSH_THRESHOLD) this.flush();
  }

  /** Synchronously writes out everything queued. Never throws. */
  flush(): void {
    const chunk = this.buffer;
    if (chunk.length === 0) return;
    // Cleared before writing so a writer that logs re-enters with a fresh buffer.
    this.buffer = "";
    pending.delete(this);
    if (typeof this.output === "number") {
      if (!writeAllSync(this.output, chunk)) this.closed = true;
      return;
    }
    try {
      this.output.write(chunk);
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
export function writeAllSync(fd: number, chunk: string, write: FdWrite = writeSync): boolean {
  const bytes = Buffer.from(chunk, "utf8");
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
