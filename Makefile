# Every target installs what it needs first: a fresh clone needs only `make run` or `make test`.
SHELL := /bin/bash
PORT ?= 3000
WORKERS ?=
STAMP := node_modules/.keelson-installed

.PHONY: install build build-bench lint typecheck test test-prerequisites run dev bench bench-instructions scenarios docker clean

$(STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

install: $(STAMP)

# The docs page's Scalar bundle is copied into dist/: it ships with keelson, never from a CDN.
build: $(STAMP)
	npm run build

lint: $(STAMP)
	npx oxlint --deny-warnings src supervisor test examples load-tests

typecheck: $(STAMP)
	npx tsc --noEmit -p tsconfig.json

# lint + typecheck + every test suite (unit, process-level, browser).
test: test-prerequisites lint typecheck build
	npx vitest run --project unit --project socket --project process --project browser

# System packages the suites run, checked before anything else: installed with apt-get when missing
# (as root or with sudo), or make stops at once with the command to run. One line per package.
# PostgreSQL: the keelson/sql suites start their own throwaway server from its binaries.
test-prerequisites:
	@scripts/ensure-apt.sh '/usr/lib/postgresql/*/bin/initdb' postgresql

# The example service; WORKERS=N forks N workers behind one port (default: one per CPU).
run: build
	PORT=$(PORT) node dist/supervisor/cli.js start dist/examples/bookstore/main.js $(if $(WORKERS),--workers $(WORKERS))

# keelson dev on the example's TypeScript sources: a rolling reload on every save.
dev: $(STAMP)
	PORT=$(PORT) node --import tsx supervisor/cli.ts dev examples/bookstore/main.ts $(if $(WORKERS),--workers $(WORKERS))

# The benchmark servers compile into the same dist/ (tsconfig.bench.json) and run from there.
build-bench: build
	npx tsc -p tsconfig.bench.json

# MODE=peers (default), instructions, supervisor, shutdown or tracing: `node --import tsx load-tests/bench.ts --help`.
MODE ?= peers
bench: build-bench
	node $(if $(filter tracing,$(MODE)),--expose-gc) --import tsx load-tests/bench.ts $(MODE)

# Load-test scenarios (signals under load, scraping, random paths, malformed requests), each ending in
# a VERDICT line; exits 1 if any fails. ONLY=sigterm,sighup runs a subset, LOAD_SECONDS=N sets each load phase.
scenarios: build-bench
	ONLY=$(ONLY) LOAD_SECONDS=$(LOAD_SECONDS) npx vitest run --project scenarios

# Instructions per request under valgrind (callgrind): a noise-free complement to `make bench`
# on a shared VM (about 1 minute per target). Needs valgrind (apt-get install valgrind).
bench-instructions: build-bench
	node --import tsx load-tests/bench.ts instructions

# The example's container image (docker/Dockerfile), tagged $(IMAGE) and $(IMAGE):<package.json version>.
# Needs a Docker engine; without one it says so and fails, so CI never mistakes "skipped" for "built".
IMAGE ?= keelson-example
docker:
	@command -v docker >/dev/null 2>&1 || { echo "make docker: the docker CLI is not installed: the image was NOT built." >&2; exit 1; }
	@docker info >/dev/null 2>&1 || { echo "make docker: no Docker engine is reachable (docker info failed): the image was NOT built. Start Docker (or set DOCKER_HOST) and retry." >&2; exit 1; }
	docker build -f docker/Dockerfile -t $(IMAGE) -t $(IMAGE):$$(node -p 'require("./package.json").version') .

clean:
	rm -rf dist node_modules
