# Every target installs what it needs first: a fresh clone needs only `make run` or `make test`.
SHELL := /bin/bash
PORT ?= 3000
# The address of `make run` and `make dev`: this machine only, as a development server; HOST=0.0.0.0 (or ::)
# for every interface, as a container needs. `keelson start` itself listens on every interface unless told.
HOST ?= 127.0.0.1
WORKERS ?=
STAMP := node_modules/.keelson-installed

# One Node.js version for dev, CI and the image: .node-version (`make test NODE_VERSION=22.23.3` overrides
# it). A system Node of the same major is used as is. Otherwise (older, newer or none) the pinned version is
# installed from the npm registry into .cache/node/ and comes first on PATH for every recipe, npm and npx too.
NODE_VERSION := $(shell cat .node-version)
ifneq ($(shell node -p 'process.versions.node.split(".")[0]' 2>/dev/null),$(firstword $(subst ., ,$(NODE_VERSION))))
NODE_HOME := $(CURDIR)/.cache/node/$(NODE_VERSION)
export PATH := $(NODE_HOME)/bin:$(PATH)
PINNED_NODE := $(NODE_HOME)/bin/node
else
PINNED_NODE :=
endif

.PHONY: token install build build-bench lint typecheck test test-prerequisites check-h3-latest run dev bench bench-instructions scenarios fleet docker docker-engine clean

$(STAMP): package.json package-lock.json | $(PINNED_NODE)
	npm ci --include=dev --no-audit --no-fund
	@touch $@

install: $(STAMP)

ifneq ($(PINNED_NODE),)
$(PINNED_NODE):
	scripts/ensure-node.sh $(NODE_VERSION) $(NODE_HOME)
endif

# The docs page's Scalar bundle is copied into dist/: it ships with keelson, never from a CDN.
# dist/bundle: the example and the CLI bundled (keelson bundle), what the image runs.
# The build runs only when one of its inputs is newer than its stamp, so a second `make run` starts at
# once. The folders are inputs too: adding, removing or renaming a source changes its folder's time. The
# stamp names the Node major (the bundle targets it); a build on another major removes the others' stamps.
NODE_MAJOR := $(firstword $(subst ., ,$(NODE_VERSION)))
BUILT := dist/.built-node$(NODE_MAJOR)
BUILD_INPUTS := package.json package-lock.json tsconfig.json tsconfig.build.json scripts/copy-scalar.mjs scripts/build-package.mjs \
	$(shell find src supervisor cli examples -type d -o -name '*.ts')

build: $(BUILT)

# The install stamp is order-only: package.json and the lock file already say when dependencies changed.
$(BUILT): $(BUILD_INPUTS) | $(STAMP)
	@rm -f dist/.built-node*
	npm run build
	node dist/cli/cli.js bundle dist/examples/bookstore/main.js --out dist/bundle
	@touch $@

lint: $(STAMP)
	npx oxlint --deny-warnings src supervisor cli test harness examples load-tests

typecheck: $(STAMP)
	npx tsc --noEmit -p tsconfig.json

# lint + typecheck + every test suite (unit, socket, process-level, browser, repository tooling).
test: test-prerequisites lint typecheck build
	@echo "make test: Node $$(node --version) at $$(command -v node)"
	npx vitest run --project unit --project socket --project process --project browser --project tooling

# System packages the suites run, checked before anything else: installed with apt-get when missing
# (as root or with sudo), or make stops at once with the command to run. One line per package.
# PostgreSQL: the keelson/sql suites start their own throwaway server from its binaries.
# Prometheus: promtool checks the cluster's /metrics exposition (the server itself is not started).
test-prerequisites:
	@scripts/ensure-apt.sh /usr/bin/chromium chromium
	@scripts/ensure-apt.sh '/usr/lib/postgresql/*/bin/initdb' postgresql
	@scripts/ensure-apt.sh /usr/bin/promtool prometheus
	@scripts/ensure-apt.sh /usr/bin/redis-server redis-server
	@scripts/ensure-apt.sh /usr/sbin/haproxy haproxy

# The tests against the newest h3 2.x, what a fresh install of keelson gets (scripts/check-h3-latest.sh; CI runs it).
check-h3-latest: $(STAMP)
	scripts/check-h3-latest.sh --project unit --project socket

# The example service; WORKERS=N forks N workers behind one port (default: one per CPU).
run: build
	HOST=$(HOST) PORT=$(PORT) node dist/cli/cli.js start dist/examples/bookstore/main.js $(if $(WORKERS),--workers $(WORKERS))

# A bearer token for the example's write routes (POST/PUT/DELETE under /api/books): scope books:write,
# 12 hours, signed with BOOKSTORE_JWT_SECRET or the example's development key. TOKEN=$$(make -s token).
token: $(STAMP)
	@node --import tsx examples/bookstore/token.ts

# keelson dev on the example's TypeScript sources: a rolling reload on every save.
dev: $(STAMP)
	HOST=$(HOST) PORT=$(PORT) node --import tsx cli/cli.ts dev examples/bookstore/main.ts $(if $(WORKERS),--workers $(WORKERS))

# The benchmark servers compile into the same dist/ (tsconfig.bench.json) and run from there.
build-bench: build
	npx tsc -p tsconfig.bench.json

# MODE=peers (default), instructions, supervisor, cluster, startup, shutdown or tracing: `node --import tsx load-tests/bench.ts --help`.
MODE ?= peers
bench: build-bench
	ROUNDS=$(ROUNDS) SIDE_BY_SIDE=$(SIDE_BY_SIDE) node $(if $(filter tracing,$(MODE)),--expose-gc) --import tsx load-tests/bench.ts $(MODE)

# Load-test scenarios (signals under load, scraping, random paths, malformed requests), each ending in
# a VERDICT line; exits 1 if any fails. ONLY=sigterm,sighup runs a subset, LOAD_SECONDS=N sets each load phase.
scenarios: build-bench
	ONLY=$(ONLY) LOAD_SECONDS=$(LOAD_SECONDS) npx vitest run --project scenarios

# The fleet: 3 pods × 2 workers behind HAProxy, PostgreSQL, Redis and Prometheus on this machine, under load:
# rate limits across pods, 3 rolling-deploy steps, a pod SIGKILLed, jobs and metrics checked; one VERDICT line.
# ROUNDS=N deploy steps, RATE=R requests per second. `make test` runs a short form (test/fleet.test.ts).
fleet: test-prerequisites $(STAMP)
	ROUNDS=$(ROUNDS) RATE=$(RATE) node --import tsx load-tests/fleet.ts

# Instructions per request under valgrind (callgrind): a noise-free complement to `make bench`
# on a shared VM (about 1 minute per target). Needs valgrind (apt-get install valgrind).
# TARGETS=keelson,keelson-ratelimit compares a variant with plain keelson; TARGETS=keelson,keelson-idempotency
# adds "POST /books keyed" (a fresh Idempotency-Key per request) to both: the cost of an idempotent POST.
bench-instructions: build-bench
	node --import tsx load-tests/bench.ts instructions $(if $(TARGETS),--targets $(TARGETS)) $(if $(ACCEPT_ENCODING),--accept-encoding '$(ACCEPT_ENCODING)')

# The example's container image (docker/Dockerfile), tagged $(IMAGE) and $(IMAGE):<package.json version>.
# Needs a Docker engine; without one it says so and fails, so CI never mistakes "skipped" for "built".
IMAGE ?= keelson-example
# The image runs the pinned Node (a build argument). Needs no Node here: the tag's version is read with sed.
docker: | docker-engine
	docker build -f docker/Dockerfile --build-arg NODE_VERSION=$(NODE_VERSION) -t $(IMAGE) -t $(IMAGE):$$(sed -n 's/^  "version": *"\([^"]*\)".*/\1/p' package.json) .

docker-engine:
	@command -v docker >/dev/null 2>&1 || { echo "make docker: the docker CLI is not installed: the image was NOT built." >&2; exit 1; }
	@docker info >/dev/null 2>&1 || { echo "make docker: no Docker engine is reachable (docker info failed): the image was NOT built. Start Docker (or set DOCKER_HOST) and retry." >&2; exit 1; }

clean:
	rm -rf dist node_modules
