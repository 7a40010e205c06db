import { connect } from "node:net";

/**
 * Writes one raw request (`head`, then `body`) and resolves with the status line's code and the
 * body once the server answers. A server that answers before it has read the whole body and closes
 * is what fetch reports as a reset; this reads the answer as soon as it is complete.
 */
export function sendRaw(port: number, head: string, body: Buffer | string | ReadonlyArray<Buffer | string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => {
      socket.write(head);
      for (const piece of typeof body === "string" || Buffer.isBuffer(body) ? [body] : body) socket.write(piece, () => {});
    });
    let text = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      text += chunk;
      const end = text.indexOf("\r\n\r\n");
      const length = Number(/content-length: (\d+)/i.exec(text)?.[1] ?? NaN);
      if (end >= 0 && text.length >= end + 4 + length) {
        socket.destroy();
        resolve({ status: Number(text.slice(9, 12)), body: text.slice(end + 4, end + 4 + length) });
      }
    });
    socket.on("error", reject);
  });
}
