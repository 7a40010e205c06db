// keelson's full stack without the features named in BENCH_OFF (comma-separated: log, metrics,
// tracer, cors), for the cost of each one measured alone against the plain keelson target:
// `BENCH_OFF=tracer node --import tsx load-tests/bench.ts instructions --targets keelson,keelson-ablate`.
import { buildApp, FEATURES, startApp, type Feature } from "./keelson-app.js";

const named = (process.env.BENCH_OFF ?? "").split(",").map((name) => name.trim()).filter(Boolean);
const unknown = named.filter((name) => !(FEATURES as readonly string[]).includes(name));
if (unknown.length > 0 || named.length === 0) {
  console.error(`BENCH_OFF must name one or more of ${FEATURES.join(", ")}; got ${JSON.stringify(process.env.BENCH_OFF ?? "")}`);
  process.exit(2);
}
await startApp(buildApp({ without: new Set(named as Feature[]) }));
