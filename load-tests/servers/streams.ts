// The streams scenario's worker entry (load-tests/scenarios/streams.ts), built to plain JavaScript in
// dist/ as a deployment runs its workers: the scenario's fixture app, compiled with the rest by `make build-bench`.
import "../../test/fixtures/streams-app.js";
