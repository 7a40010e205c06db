// The least a cluster costs: a bare node:cluster primary forking N workers (default 1) of the server
// file given as its argument (the start-up and cluster benchmarks run bare h3 under it). No
// restarts, no IPC of its own: what is left over keelson's supervised start is keelson's.
import cluster from "node:cluster";

const [exec, workers = "1"] = process.argv.slice(2);
if (exec === undefined) throw new Error("usage: plain-cluster.js <worker entry> [workers]");
cluster.setupPrimary({ exec });
for (let i = 0; i < Number(workers); i++) cluster.fork();
process.on("SIGTERM", () => {
  for (const worker of Object.values(cluster.workers ?? {})) worker?.kill("SIGTERM");
  process.exit(0);
});
