// hono at keelson's full-stack work (see hono-full-app.ts).
import { startHonoFull } from "./hono-full-app.js";

startHonoFull();
