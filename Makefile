# Every target installs what it needs first: a fresh clone needs only `make run` or `make test`.
SHELL := /bin/bash
PORT ?= 3000
WORKERS ?=
STAMP := node_modules/.keelson-installed

.PHONY: install build lint typecheck test run bench docker clean

$(STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

install: $(STAMP)

build: $(STAMP)
	npx tsc -p tsconfig.build.json

lint: $(STAMP)
	npx oxlint --deny-warnings src supervisor test examples load-tests

typecheck: $(STAMP)
	npx tsc --noEmit -p tsconfig.json

# lint + typecheck + every test suite (unit, process-level, browser).
test: lint typecheck build
	npx vitest run

# The example service; WORKERS=N forks N workers behind one port (default: one per CPU).
run: build
	PORT=$(PORT) node dist/examples/bookstore/main.js

bench: build
	node --import tsx load-tests/bench.ts

clean:
	rm -rf dist node_modules
