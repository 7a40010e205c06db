/**
 * Upload temp folders and the processes that own them, with real processes, sockets and signals
 * (fixture test/fixtures/upload-app.ts): a drain with an upload still arriving removes its folder
 * at exit; a process killed mid-upload leaves one, which the next start sweeps while a live
 * sibling's folder stays; a full file system (a 2 MiB tmpfs) is the server's 507, not the client's 400.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { killAllChildren, spawnChild, type Child } from "../harness/child.js";
import { sendRaw } from "./helpers/raw-http.js";

const made: string[] = [];
const sockets: Socket[] = [];
afterEach(() => {
  for (const socket of sockets.splice(0)) socket.destroy();
  killAllChildren();
});
afterAll(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

function scratch(): string {
  const dir = mkdtempSync(join(tmpdir(), "keelson-uploads-process-"));
  made.push(dir);
  return dir;
}

async function start(tmp: string): Promise<{ child: Child; port: number }> {
  const child = spawnChild([process.execPath, "--import", "tsx", "test/fixtures/upload-app.ts"], { env: { UPLOAD_TMP: tmp, PORT: "0" } });
  const line = await child.waitFor(/listening on http:\/\/\S+:(\d+)/);
  return { child, port: Number(/:(\d+)/.exec(line.split("listening on ")[1]!)![1]) };
}

const BOUNDARY = "keelsonboundary";

/** A multipart upload announcing `total` bytes of file, of which only the first 256 KiB are sent. */
function stalledUpload(port: number): Socket {
  const socket = connect(port, "127.0.0.1");
  sockets.push(socket);
  socket.on("error", () => {});
  const head = `--${BOUNDARY}\r\ncontent-disposition: form-data; name="file"; filename="big.bin"\r\ncontent-type: application/octet-stream\r\n\r\n`;
  const total = 8 * 1024 * 1024;
  socket.write(
    `POST /upload HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: multipart/form-data; boundary=${BOUNDARY}\r\n` +
    `content-length: ${head.length + total + `\r\n--${BOUNDARY}--\r\n`.length}\r\n\r\n${head}`,
  );
  socket.write(Buffer.alloc(256 * 1024, 7));
  return socket;
}

/** A whole upload of `size` bytes; the answer comes before the server has read it all. */
function uploadRaw(port: number, size: number): Promise<{ status: number; body: string }> {
  const head = `--${BOUNDARY}\r\ncontent-disposition: form-data; name="file"; filename="big.bin"\r\n\r\n`;
  const tail = `\r\n--${BOUNDARY}--\r\n`;
  return sendRaw(port, `POST /upload HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: multipart/form-data; boundary=${BOUNDARY}\r\n` +
    `content-length: ${head.length + size + tail.length}\r\n\r\n${head}`, [Buffer.alloc(size, 1), tail]);
}

/** Waits for a state of the file system (a folder appearing, the upload's first bytes on disk). */
async function until(what: string, test: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!test()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const folders = (tmp: string) => readdirSync(tmp);
const ownedBy = (tmp: string, pid: number) => folders(tmp).filter((name) => new RegExp(`-${pid}-[^-]+$`).test(name));

describe("upload folders across process ends", () => {
  it("a drain with an upload still arriving leaves no folder: removed at exit", async () => {
    const tmp = scratch();
    const { child, port } = await start(tmp);
    stalledUpload(port);
    await until("the upload's folder", () => folders(tmp).length === 1);
    child.kill("SIGTERM");
    const exit = await child.exited;
    // The drain gives up on the stalled upload: not a clean exit, but nothing left behind.
    expect(exit.code).toBe(1);
    expect(folders(tmp)).toEqual([]);
  });

  it("a process killed mid-upload leaves its folder; the next start sweeps it and leaves a live sibling's alone", async () => {
    const tmp = scratch();
    const sibling = await start(tmp);
    stalledUpload(sibling.port);
    await until("the sibling's folder", () => ownedBy(tmp, sibling.child.pid).length === 1);
    const killed = await start(tmp);
    stalledUpload(killed.port);
    await until("the killed process's folder", () => ownedBy(tmp, killed.child.pid).length === 1);
    killed.child.kill("SIGKILL");
    await killed.child.exited;
    expect(folders(tmp)).toHaveLength(2);

    const next = await start(tmp);
    await next.child.waitFor(/removed 1 upload folder\(s\) left by exited processes/);
    expect(ownedBy(tmp, killed.child.pid)).toEqual([]);
    expect(ownedBy(tmp, sibling.child.pid)).toHaveLength(1);
    expect(folders(tmp)).toHaveLength(1);
    expect(sibling.child.alive()).toBe(true);
  });
});

describe("a temporary folder that cannot take the upload", () => {
  it("a full file system answers 507 UPLOAD_STORAGE_FAILED, logs ENOSPC as an error and counts it", async () => {
    // A real full disk: a 2 MiB tmpfs (mounting needs root, as the deploy tests' unshare does).
    const tmp = scratch();
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", tmp]);
    try {
      const { child, port } = await start(tmp);
      const response = await uploadRaw(port, 5 * 1024 * 1024);
      expect(response.status).toBe(507);
      const body = JSON.parse(response.body) as { code: string; message: string };
      expect(body.code).toBe("UPLOAD_STORAGE_FAILED");
      expect(body.message).toContain("ENOSPC");
      await child.waitFor(/\[ERROR\].*POST \/upload failed:.*ENOSPC/);
      expect(child.lines(/\[WARN\].*POST \/upload 400/)).toEqual([]);
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(metrics).toMatch(/^keelson_upload_storage_errors_total 1$/m);
      await until("the folder removed", () => folders(tmp).length === 0);
      // A client that really leaves stays the client's: a 400 nobody reads, not counted as the server's.
      const socket = stalledUpload(port);
      await until("the upload's folder", () => folders(tmp).length === 1);
      socket.destroy();
      await child.waitFor(/POST \/upload 400/);
      expect((await (await fetch(`http://127.0.0.1:${port}/metrics`)).text())).toMatch(/^keelson_upload_storage_errors_total 1$/m);
      await child.stop();
    } finally {
      execFileSync("umount", ["-l", tmp]);
    }
  });
});
