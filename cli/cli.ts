#!/usr/bin/env node
// The `keelson` bin. It checks the Node version before anything else is linked: an import of a
// builtin export an older Node lacks (node:module's `constants`, node:sqlite) fails at link time,
// with a stack trace instead of a reason. So this file uses only syntax and builtins Node 18 can
// load (no static import at all), and loads the real CLI once the version is known to be enough.

/** The `engines.node` of package.json, as numbers: the release that has node:sqlite and the module compile cache. */
const REQUIRED = { major: 22, minor: 13 };

const [major = 0, minor = 0] = process.versions.node.split(".").map(Number);
if (major < REQUIRED.major || (major === REQUIRED.major && minor < REQUIRED.minor)) {
  process.stderr.write(
    `keelson: needs Node.js >=${REQUIRED.major}.${REQUIRED.minor}, found ${process.version} (${process.execPath}); ` +
      "install a current LTS from https://nodejs.org/en/download (or: nvm install --lts)\n",
  );
  process.exit(1);
}
await import("./main.js");
