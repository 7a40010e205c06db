/**
 * A WebSocket client on a bare TCP socket, for what a browser's WebSocket cannot do: send pings,
 * send one frame of any size, stop reading, never answer a ping. Used by test/websockets*.test.ts
 * and the hostile WebSocket scenario.
 */
import { randomBytes } from "node:crypto";
import { connect, type Socket } from "node:net";

export const PING = 0x9;
export const TEXT = 0x1;

/** One client frame (masked, as RFC 6455 requires of a client), FIN set. */
export function frame(opcode: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const length = payload.length;
  const head = length < 126 ? Buffer.from([0x80 | opcode, 0x80 | length])
    : length < 65536 ? Buffer.from([0x80 | opcode, 0x80 | 126, length >> 8, length & 0xff])
    : Buffer.concat([Buffer.from([0x80 | opcode, 0x80 | 127]), (() => {
      const size = Buffer.alloc(8);
      size.writeBigUInt64BE(BigInt(length));
      return size;
    })()]);
  const mask = randomBytes(4);
  const masked = Buffer.allocUnsafe(length);
  for (let i = 0; i < length; i++) masked[i] = payload[i]! ^ mask[i & 3]!;
  return Buffer.concat([head, mask, masked]);
}

/** An open raw WebSocket: the socket (paused: nothing is read until `resume()`), and how it ended. */
export interface RawWebSocket {
  readonly socket: Socket;
  /** Resolves when the TCP connection closes. */
  readonly closed: Promise<void>;
  /** The bytes received after the handshake, once read (see `resume()`). */
  received(): Buffer;
  /** Starts reading what the server sent. */
  resume(): void;
  /** The close code of the first close frame received, if any (call after `resume()` and `closed`). */
  closeCode(): number | undefined;
}

/** Connects and completes the handshake; stops reading right after it unless `read` is true. */
export function openRaw(port: number, path: string, read = false): Promise<RawWebSocket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    const key = randomBytes(16).toString("base64");
    let buffer = Buffer.alloc(0);
    let body = Buffer.alloc(0);
    let open = false;
    let closedAt!: () => void;
    const closed = new Promise<void>((done) => (closedAt = done));
    socket.on("close", () => closedAt());
    socket.on("error", () => {});
    socket.write(`GET ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nupgrade: websocket\r\nconnection: Upgrade\r\n` +
      `sec-websocket-key: ${key}\r\nsec-websocket-version: 13\r\n\r\n`);
    const raw: RawWebSocket = {
      socket,
      closed,
      received: () => body,
      resume: () => socket.resume(),
      closeCode: () => {
        // Server frames are unmasked: walk them to the first close frame (opcode 8).
        let at = 0;
        while (at + 2 <= body.length) {
          const opcode = body[at]! & 0x0f;
          let length = body[at + 1]! & 0x7f;
          let start = at + 2;
          if (length === 126) {
            length = body.readUInt16BE(start);
            start += 2;
          } else if (length === 127) {
            length = Number(body.readBigUInt64BE(start));
            start += 8;
          }
          if (opcode === 8) return length >= 2 ? body.readUInt16BE(start) : 1005;
          at = start + length;
        }
        return undefined;
      },
    };
    socket.on("data", (chunk: Buffer) => {
      if (open) {
        body = Buffer.concat([body, chunk]);
        return;
      }
      buffer = Buffer.concat([buffer, chunk]);
      const end = buffer.indexOf("\r\n\r\n");
      if (end < 0) return;
      const head = buffer.subarray(0, end).toString("latin1");
      if (!head.startsWith("HTTP/1.1 101")) {
        reject(new Error(`no upgrade: ${head.split("\r\n")[0]}`));
        socket.destroy();
        return;
      }
      open = true;
      body = buffer.subarray(end + 4);
      if (!read) socket.pause();
      resolve(raw);
    });
  });
}
