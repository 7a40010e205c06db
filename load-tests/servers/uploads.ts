// The upload benchmark's server (load-tests/modes/uploads.ts): `node uploads.js busboy|formdata PORT`.
// busboy: a keelson form route (bodyType "form": busboy, files spooled to disk). formdata: the same
// route shape on app.httpEngine reading the body with the web platform's Request.formData().
import { z } from "zod";
import { App, post } from "../../src/index.js";

const [mode, port] = process.argv.slice(2);
const app = new App({ serviceName: "uploads", port: Number(port), host: "127.0.0.1", bodyLimit: 64 * 1024 * 1024, env: "production" });
if (mode === "busboy") {
  app.route(post("/upload", { body: z.object({ file: z.file() }), bodyType: "form" }, (ctx) => ({ size: ctx.body.file.size })));
} else {
  app.httpEngine.post("/upload", async (event) => {
    const form = await event.req.formData();
    const file = form.get("file") as File;
    return { size: file.size };
  });
}
await app.listen();
