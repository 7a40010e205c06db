import type { Readable } from "node:stream";
import { sinkFor } from "../src/logging/sink.js";

// A "line" longer than this without a newline is passed on in pieces, so a worker writing
// without newlines cannot grow the primary's memory without bound.
const MAX_PARTIAL = 1024 * 1024;
const NEWLINE = 0x0a;

/** A worker's output being copied: `done` when its end is closed; `hold()` stops passing it on until `release()`. */
export interface Relay {
  readonly done: Promise<void>;
  hold(): void;
  release(): void;
}

/**
 * Copies one worker's stdout (or stderr) to the primary's file descriptor `fd`, complete lines
 * only. Workers no longer share the primary's stdout: on a pipe a write over 4 KiB is not atomic,
 * so two workers' long lines could interleave inside one line. Here each worker has its own pipe
 * and the primary is the only writer of the real one; the bytes are passed on unchanged (no
 * decoding, no per-line work: one search for the chunk's last newline), behind the primary's own
 * buffered lines on the same target. When the target's reader does not keep up (its sink is
 * congested), the relay stops reading the worker's pipe until the sink has drained: the worker's
 * own log buffer then takes the wait (and counts its drops), and the primary holds at most one
 * chunk per worker. What a turn read is passed on in that turn's check phase (see passOn). While
 * held, what the worker writes waits in its pipe (see WorkerHandle: a worker's lines wait for the
 * primary's own about the same signal).
 */
export function relayOutput(stream: Readable, fd: number): Relay {
  const sink = sinkFor(fd);
  let partial: Buffer[] = [];
  let partialLength = 0;
  const emitPartial = () => {
    if (partialLength === 0) return;
    const last = partial.at(-1);
    const ended = last !== undefined && last[last.length - 1] === NEWLINE;
    sink.writeBytes(Buffer.concat(ended ? partial : [...partial, Buffer.of(NEWLINE)]));
    partial = [];
    partialLength = 0;
  };
  const relay = (chunk: Buffer) => {
    const end = chunk.lastIndexOf(NEWLINE);
    if (end === -1) {
      partial.push(chunk);
      partialLength += chunk.length;
      if (partialLength >= MAX_PARTIAL) emitPartial();
      return;
    }
    const lines = end === chunk.length - 1 ? chunk : chunk.subarray(0, end + 1);
    if (partialLength === 0) sink.writeBytes(lines);
    else {
      partial.push(lines);
      emitPartial();
    }
    if (end < chunk.length - 1) {
      partial.push(chunk.subarray(end + 1));
      partialLength = chunk.length - end - 1;
    }
  };
  let held = false;
  let waitingForSink = false;
  let closed = false;
  let ended = false;
  let finish!: () => void;
  const done = new Promise<void>((resolve) => (finish = resolve));
  // What was read in this turn, passed on in its check phase: see passOn.
  let queued: Buffer[] = [];
  let scheduled = false;
  const end = () => {
    if (ended) return;
    ended = true;
    // A last line without its newline (a process killed mid-write) still ends as a line.
    emitPartial();
    finish();
  };
  /**
   * Passes on what this turn read, after the poll phase has run every callback that was ready with
   * it. The worker tells the primary by IPC before it writes its own lines about the same event, so
   * when both are ready at once, the IPC message (which may hold this relay) has been handled by now,
   * whichever of the two descriptors the poll phase read first.
   */
  const passOn = () => {
    scheduled = false;
    if (held) return;
    const chunks = queued;
    queued = [];
    for (const chunk of chunks) relay(chunk);
    if (closed) end();
    else if (sink.congested && !waitingForSink) {
      waitingForSink = true;
      stream.pause();
      sink.onceDrained(resume);
    }
  };
  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(passOn);
  };
  const resume = () => {
    waitingForSink = false;
    if (!held) stream.resume();
  };
  stream.on("data", (chunk: Buffer) => {
    queued.push(chunk);
    schedule();
  });
  // A read error ends the relay like an EOF ('close' follows); it must not crash the primary.
  stream.on("error", () => {});
  stream.once("close", () => {
    closed = true;
    schedule();
  });
  return {
    done,
    hold: () => {
      held = true;
      stream.pause();
    },
    release: () => {
      if (!held) return;
      held = false;
      if (queued.length > 0 || closed) schedule();
      if (!waitingForSink) stream.resume();
    },
  };
}
