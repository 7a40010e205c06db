import { createWriteStream, openAsBlob } from "node:fs";
import type { IncomingMessage } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type busboy from "busboy";
import type { H3Event } from "h3";
import { errorMessage, createError, type KError } from "../errors.js";
import { lazyImport } from "../lazy-package.js";
import { bodyIncomplete } from "./body.js";
import { countStorageFailure, makeUploadFolder, registerUploadParent, removeUploadFolder } from "./upload-folders.js";

/** Limits of a form body (`bodyType: "form"`), per route; the total size is the route's body limit. */
export interface FormLimits {
  /** The largest file, bytes (default: the body limit). */
  fileSize?: number;
  /** How many files (default 10). */
  files?: number;
  /** How many non-file fields (default 100). */
  fields?: number;
  /** The longest field value, bytes (default 1 MiB, at most the body limit). */
  fieldSize?: number;
  /** Where files are written while the request lasts (default `os.tmpdir()`). */
  tmpDir?: string;
}

/** FormLimits with every default applied. */
export interface ResolvedFormLimits {
  total: number;
  fileSize: number;
  files: number;
  fields: number;
  fieldSize: number;
  tmpDir: string | undefined;
}

/** The parsed form: a field sent once is a string (a file a File), sent again an array. */
export type FormValue = Record<string, string | File | Array<string | File>>;

const FORM_TYPE = /^(?:multipart\/form-data|application\/x-www-form-urlencoded)\b/i;

function checkCount(route: string, name: string, value: unknown, min: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min) {
    throw new TypeError(`${route}: formLimits.${name} must be an integer >= ${min}, got ${String(value)}`);
  }
  return value;
}

/** Applies the defaults; refuses a bad limit at registration, naming the route and the option. */
export function resolveFormLimits(route: string, limits: FormLimits | undefined, total: number): ResolvedFormLimits {
  const given = limits ?? {};
  if (given.tmpDir !== undefined && (typeof given.tmpDir !== "string" || given.tmpDir === "")) {
    throw new TypeError(`${route}: formLimits.tmpDir must be a non-empty path, got ${JSON.stringify(given.tmpDir)}`);
  }
  registerUploadParent(given.tmpDir);
  return {
    total,
    fileSize: Math.min(given.fileSize === undefined ? total : checkCount(route, "fileSize", given.fileSize, 1), total),
    files: given.files === undefined ? 10 : checkCount(route, "files", given.files, 0),
    fields: given.fields === undefined ? 100 : checkCount(route, "fields", given.fields, 0),
    fieldSize: Math.min(given.fieldSize === undefined ? 1024 * 1024 : checkCount(route, "fieldSize", given.fieldSize, 1), total),
    tmpDir: given.tmpDir,
  };
}

/** The longest field name read; a longer one is refused rather than cut (two names could become one). */
const FIELD_NAME_BYTES = 256;
const tooLarge = (message: string) => createError("PAYLOAD_TOO_LARGE", message);

/**
 * The temporary folder failed (a full disk, a quota, an I/O error, a folder it may not write): the
 * server's fault, never the client's. A 507, logged with the cause and counted.
 */
function storageFailed(error: unknown): KError {
  countStorageFailure();
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return createError("UPLOAD_STORAGE_FAILED", `The server could not store the upload${code ? ` (${code})` : ""}`, error);
}

/** A form body that has been read: its value, and the removal of the files it wrote. */
export interface ReadForm {
  value: FormValue | undefined;
  /** Removes the request's files; called once the handler has finished with them. */
  cleanup(): Promise<void>;
}

function add(value: FormValue, name: string, item: string | File): void {
  const before = value[name];
  if (before === undefined) value[name] = item;
  else if (Array.isArray(before)) before.push(item);
  else value[name] = [before, item];
}

/** The body as a Node stream: the request itself on Node, the web body elsewhere (`app.request()`). */
function bodyStream(event: H3Event): Readable | undefined {
  const nodeReq = event.runtime?.node?.req as IncomingMessage | undefined;
  if (nodeReq && !nodeReq.readableEnded) return nodeReq;
  const body = event.req.body;
  return body ? Readable.fromWeb(body as import("node:stream/web").ReadableStream<Uint8Array>) : undefined;
}

/**
 * Reads a `multipart/form-data` or `application/x-www-form-urlencoded` body with busboy, streaming:
 * each file goes to its own file in a temporary folder as it arrives and is handed to the handler as
 * a `File` backed by that file (`fs.openAsBlob`), so memory stays flat whatever the upload's size.
 * Limits are checked while the bytes arrive: the first one crossed stops reading and answers 413;
 * a malformed body is a 400, another media type a 415, a client that goes away a 400 nobody reads.
 * Every failure removes what was written.
 */
export function readFormBody(event: H3Event, limits: ResolvedFormLimits): Promise<ReadForm> {
  const nodeReq = event.runtime?.node?.req as IncomingMessage | undefined;
  const type = nodeReq ? (nodeReq.headers["content-type"] ?? null) : event.req.headers.get("content-type");
  const length = nodeReq ? (nodeReq.headers["content-length"] ?? null) : event.req.headers.get("content-length");
  if (length !== null && Number(length) > limits.total) {
    return Promise.reject(tooLarge(`Request body exceeds the limit of ${limits.total} bytes`));
  }
  if (type === null || !FORM_TYPE.test(type)) {
    if (length === "0" || (type === null && length === null && !event.req.body)) return Promise.resolve({ value: undefined, cleanup: async () => {} });
    return Promise.reject(createError("UNSUPPORTED_MEDIA_TYPE", "Request body must be multipart/form-data or application/x-www-form-urlencoded"));
  }
  // A client that left while a middleware awaited: its stream's events have fired already.
  if (nodeReq && !nodeReq.readableEnded && nodeReq.destroyed) {
    return Promise.reject(bodyIncomplete(nodeReq.errored));
  }
  const source = bodyStream(event);
  if (source === undefined) return Promise.resolve({ value: undefined, cleanup: async () => {} });
  return loadBusboy().then((parse) => parseForm(parse, source, type, limits));
}

/** busboy is loaded by the first form body, not at start-up: most services never read one. */
// A CommonJS module: its export is the default of the ES namespace.
const loadBusboy = lazyImport("busboy", async () => ((await import("busboy")) as unknown as { default: typeof busboy }).default);

function parseForm(parse: typeof busboy, source: Readable, type: string, limits: ResolvedFormLimits): Promise<ReadForm> {
  return new Promise<ReadForm>((resolve, reject) => {
    // In the order the parts arrived; a file is there once it is on disk.
    const entries: Array<{ name: string; item: string | Promise<File | undefined> }> = [];
    let folder: Promise<string> | undefined;
    let received = 0;
    let failed = false;
    const cleanup = async () => {
      if (folder) await folder.then(removeUploadFolder, () => {});
    };

    let parser: busboy.Busboy;
    const fail = (error: KError) => {
      if (failed) return;
      failed = true;
      source.off("data", count);
      source.unpipe(parser);
      // The rest of the body is not needed: the answer closes the connection.
      source.pause();
      // Limits are reported from inside busboy's own write, which goes on using the part it was
      // parsing once the handler returns: destroying it there (as Node 22 does at once) leaves it
      // writing to a part it has already let go of.
      process.nextTick(() => parser.destroy());
      void cleanup().then(() => reject(error));
    };
    try {
      parser = parse({
        headers: { "content-type": type },
        defParamCharset: "utf8",
        limits: { fileSize: limits.fileSize, files: limits.files, fields: limits.fields, fieldSize: limits.fieldSize, fieldNameSize: FIELD_NAME_BYTES },
      });
    } catch (error) {
      reject(createError("BAD_REQUEST", `Malformed form body: ${errorMessage(error)}`, error));
      return;
    }

    const count = (chunk: Buffer) => {
      received += chunk.length;
      if (received > limits.total) fail(tooLarge(`Request body exceeds the limit of ${limits.total} bytes`));
    };
    parser.on("field", (name, text, info) => {
      if (failed) return;
      if (info.nameTruncated) return fail(tooLarge(`A field name exceeds the limit of ${FIELD_NAME_BYTES} bytes`));
      if (info.valueTruncated) return fail(tooLarge(`Field ${name} exceeds the limit of ${limits.fieldSize} bytes`));
      entries.push({ name, item: text });
    });
    parser.on("file", (name, stream, info) => {
      // A part cut short (a client gone, a limit crossed) errors its stream; the pipeline below
      // reports it, but only once the folder exists.
      stream.on("error", () => {});
      const filename = info.filename;
      // A file input left empty: browsers send a part with no file name and no bytes; and nothing
      // more is written once the request has failed.
      if (failed || filename === undefined || filename === "") {
        stream.resume();
        return;
      }
      folder ??= makeUploadFolder(limits.tmpDir ?? tmpdir());
      let truncated = false;
      stream.once("limit", () => {
        truncated = true;
        fail(tooLarge(`File ${name} exceeds the limit of ${limits.fileSize} bytes`));
      });
      const index = entries.length;
      // Which side failed decides whose fault it is: the disk's errors are the server's.
      let diskError: unknown;
      const onDisk = <T>(step: Promise<T>) => step.catch((error: unknown) => {
        diskError ??= error;
        throw error;
      });
      const path = onDisk(folder).then((dir) => join(dir, String(index)));
      entries.push({ name, item: path.then(async (file) => {
        const out = createWriteStream(file);
        out.once("error", (error) => (diskError ??= error));
        await pipeline(stream, out);
        if (truncated || failed) return undefined;
        return new File([await onDisk(openAsBlob(file))], filename, { type: info.mimeType });
      }).catch((error: unknown) => {
        if (!failed) fail(diskError === undefined ? bodyIncomplete(error) : storageFailed(diskError));
        return undefined;
      }) });
    });
    parser.on("filesLimit", () => fail(tooLarge(`Form has more than ${limits.files} file(s)`)));
    parser.on("fieldsLimit", () => fail(tooLarge(`Form has more than ${limits.fields} field(s)`)));
    parser.on("error", (error: Error) => failed || fail(createError("BAD_REQUEST", `Malformed form body: ${error.message}`, error)));
    parser.on("close", () => {
      void Promise.all(entries.map((entry) => entry.item)).then((items) => {
        if (failed) return;
        const value = Object.create(null) as FormValue;
        items.forEach((item, i) => {
          if (item !== undefined) add(value, entries[i]!.name, item);
        });
        resolve({ value, cleanup });
      });
    });
    const gone = (error?: Error) => fail(bodyIncomplete(error));
    source.on("data", count);
    source.once("aborted", () => gone());
    source.once("error", gone);
    source.pipe(parser);
  });
}
