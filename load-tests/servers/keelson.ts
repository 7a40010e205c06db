// keelson as an application would run it in production (JSON logs to a file).
import { buildApp, startApp } from "./keelson-app.js";

await startApp(buildApp());
