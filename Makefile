# Keel — developer targets. `make help` lists them; docs/development.md explains.
SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin

GO        ?= go
# Extra arguments for `make test`, e.g. make test ARGS='-run TestClaim ./keelpgx'
ARGS      ?=
# Per-target fuzzing time for `make fuzz`.
FUZZTIME  ?= 20s
# `make bench`: jobs to drain, and any other flags for `keel bench`.
BENCH_N    ?= 100000
BENCH_ARGS ?=
# `make bench-peers`: flags for the peer comparison program in bench/. By
# default every Keel/River mode runs (PostgreSQL drain, continuous, latency;
# SQLite drain) and the run closes with one Markdown summary table.
BENCH_PEERS_ARGS ?= --mode drain,continuous,latency,sqlite-drain

.DEFAULT_GOAL := help

.PHONY: help test test-short build dev bench bench-peers bench-events fuzz lint fmt generate clean

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

test: ## Whole suite: PostgreSQL + throwaway DB, go vet, go test -race (both drivers), bench/ (ARGS=... to narrow)
	scripts/test.sh $(ARGS)

test-short: ## go test -short ./...: no PostgreSQL setup, no -race (testdb skips PostgreSQL tests under -short)
	$(GO) test -short -count=1 ./...

build: ## Build bin/keel
	$(GO) build -o bin/keel ./cmd/keel

dev: ## Run `keel dev` (local engine + console)
	$(GO) run ./cmd/keel dev

bench: ## keel bench --mode drain -n 100000 (BENCH_N) against a throwaway PostgreSQL database
	scripts/test-env.sh bash -c 'KEEL_DATABASE_URL="$$KEEL_TEST_DATABASE_URL" exec $(GO) run ./cmd/keel bench --mode drain -n $(BENCH_N) $(BENCH_ARGS)'

bench-peers: ## Compare with peer job queues (separate module in bench/), throwaway database
	scripts/test-env.sh bash -c 'cd bench && KEEL_DATABASE_URL="$$KEEL_TEST_DATABASE_URL" exec $(GO) run . $(BENCH_PEERS_ARGS)'

bench-events: ## keel bench --mode events (outbox → JetStream → inbox) on a throwaway database and the test NATS (BENCH_N events)
	scripts/test-env.sh bash -c 'KEEL_DATABASE_URL="$$KEEL_TEST_DATABASE_URL" KEEL_NATS_URL="$$KEEL_TEST_NATS_URL" exec $(GO) run ./cmd/keel bench --mode events -n $(BENCH_N) $(BENCH_ARGS)'

.PHONY: bench-payment
bench-payment: ## Payment benchmarks: ingress per-callback vs group commit alternating, ledger backlog, reconciliation (scripts/bench-payment.sh)
	scripts/bench-payment.sh

fuzz: ## Run every Fuzz target for FUZZTIME (default 20s) each
	FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

lint: ## gofmt check + go vet (+ golangci-lint if installed)
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	@if [ -f bench/go.mod ]; then cd bench && $(GO) vet ./...; fi
	@if command -v golangci-lint >/dev/null 2>&1; then golangci-lint run ./...; fi

fmt: ## gofmt -w on all Go files
	gofmt -w .

generate: ## go generate ./...
	$(GO) generate ./...

clean: ## Remove build output and the test cache
	rm -rf bin/ coverage.out *.test
	$(GO) clean -testcache
