import { readdirSync, readFileSync } from "node:fs";
import { getHeapStatistics } from "node:v8";

/** Open file descriptors and the soft limit on them (RLIMIT_NOFILE); Linux only. */
export interface FdUsage {
  /** Descriptors open now. */
  fds: number;
  /** The soft limit; undefined when unlimited. */
  fdLimit: number | undefined;
}

/** Memory figures that never throw (see `memoryUsage`). */
export interface MemoryFigures {
  rss: number;
  heapUsed: number;
}

let lastRss = 0;
// The last limit read: when the descriptors are exhausted, /proc cannot be opened to read it again.
let lastLimit: number | undefined;

/**
 * `process.memoryUsage()` reads /proc/self/stat on Linux, which needs a free file descriptor:
 * at EMFILE it throws. Then the heap comes from V8 (no file needed) and the RSS is the last one read.
 */
export function memoryUsage(): MemoryFigures {
  try {
    const { rss, heapUsed } = process.memoryUsage();
    lastRss = rss;
    return { rss, heapUsed };
  } catch {
    return { rss: lastRss, heapUsed: getHeapStatistics().used_heap_size };
  }
}

/**
 * Descriptors in use (the entries of /proc/self/fd, less the one reading it) and the soft limit
 * (/proc/self/limits; Node has no getrlimit). Undefined where /proc is missing (not Linux). At
 * EMFILE the folder cannot be opened, and that itself says every descriptor is in use: the count
 * is then the limit.
 */
export function fdUsage(): FdUsage | undefined {
  if (process.platform !== "linux") return undefined;
  const limit = readFdLimit();
  try {
    return { fds: Math.max(0, readdirSync("/proc/self/fd").length - 1), fdLimit: limit };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if ((code === "EMFILE" || code === "ENFILE") && limit !== undefined) return { fds: limit, fdLimit: limit };
    return undefined;
  }
}

// Read once at load, while descriptors are surely free: a process that meets EMFILE before its first report still knows its limit.
if (process.platform === "linux") readFdLimit();

function readFdLimit(): number | undefined {
  try {
    const line = /^Max open files\s+(\S+)/m.exec(readFileSync("/proc/self/limits", "utf8"))?.[1];
    lastLimit = line === undefined || line === "unlimited" ? undefined : Number(line);
  } catch {
    // Kept from the last read: the limit rarely changes, the descriptors to read it may be gone.
  }
  return lastLimit;
}
