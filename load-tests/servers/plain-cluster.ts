// The least a cluster costs: a bare node:cluster primary forking one worker of the server file given
// as its argument (the start-up benchmark runs bare h3 under it). No restarts, no IPC of its own:
// what is left over keelson's supervised start is keelson's.
import cluster from "node:cluster";

const [exec] = process.argv.slice(2);
if (exec === undefined) throw new Error("usage: plain-cluster.js <worker entry>");
cluster.setupPrimary({ exec });
cluster.fork();
process.on("SIGTERM", () => {
  for (const worker of Object.values(cluster.workers ?? {})) worker?.kill("SIGTERM");
  process.exit(0);
});
