// Preloaded (`--require`) into a node:cluster primary only, by load-tests/worker-instructions.ts:
// every worker it forks runs under callgrind with instrumentation off, the primary itself natively.
// node:cluster takes `fork` from child_process when it is first loaded, which is after this file.
// CALLGRIND_FORK_OUT is callgrind's --callgrind-out-file (`%p`: the worker's pid).
const childProcess = require("node:child_process");

const fork = childProcess.fork;
const self = __filename;

childProcess.fork = function forkUnderCallgrind(modulePath, args, options = {}) {
  // The workers inherit the primary's Node options: this preload must not follow them.
  const given = options.execArgv ?? process.execArgv;
  const execArgv = given.filter((arg, i) => !arg.includes(self) && !(arg === "--require" && given[i + 1]?.includes(self)));
  return fork.call(this, modulePath, args, {
    ...options,
    execPath: "valgrind",
    execArgv: ["--tool=callgrind", "--instr-atstart=no", `--callgrind-out-file=${process.env.CALLGRIND_FORK_OUT}`, process.execPath, ...execArgv],
  });
};
