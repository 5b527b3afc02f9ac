# worldfs — see README.md. Every target runs on a fresh machine with Go.
GO       ?= go
BUCKET   ?= ./worldfs-data
PKGS     := ./...

.PHONY: build install test integration race lint bench demo clean

build:
	$(GO) build -buildvcs=auto -o bin/worldfs ./cmd/worldfs

# worldfs on PATH (in $(go env GOBIN), or $(go env GOPATH)/bin).
install:
	$(GO) install -buildvcs=auto ./cmd/worldfs

# The whole test suite; then, verbosely, the bucket conformance suite again,
# so the log names every backend it ran (a skipped backend fails), and one
# TestRealPart* per real part the suite runs on (FUSE mounts, DuckDB, rsync;
# fake-gcs-server is the conformance suite's gcs backend), each printing
# "real part: …" when it used the part, "real part missing: …" when it was
# skipped without it, and failing under CI=true without it, as the tests
# that need it do (internal/realpart); then the suite again under the race
# detector (make race).
SHELL := /bin/bash

test:
	$(GO) test -count=1 -timeout 30m $(PKGS)
	@set -o pipefail; $(GO) test -count=1 -run '^(TestConformance|TestRealPart[A-Za-z]+)$$' -v \
		./bucket/ ./integration/ ./sql/ ./cmd/worldfs/ \
		| grep -E '^    --- (PASS|FAIL|SKIP): TestConformance/[^/ ]+ |^ +[a-z_]+_test\.go:[0-9]+: real part' \
		| sed -E 's/^    --- /conformance: /; s/^ +[a-z_]+_test\.go:[0-9]+: //'
	$(MAKE) --no-print-directory race

# Just the mount tests: real FUSE mounts (as root, with /dev/fuse).
integration:
	$(GO) test -count=1 ./integration/

# The suite under the race detector, a second go test run (-race builds
# every package anew): part of make test. A test whose worth under the
# detector is the concurrency it exercises, not its volume, runs smaller
# there (internal/race: fewer ticks, rounds or rows, never none).
# export/iceberg runs without it: its tests are iceberg-go's scans of
# Arrow data, 20 minutes instrumented on 2 cores, and what it does
# concurrently (intents held while it writes) is index's and
# maintenance's, which run under it. RACE_TIMEOUT bounds each package's
# test binary.
RACE_PKGS    ?= $(shell $(GO) list ./... | grep -v '/export/iceberg$$')
RACE_TIMEOUT ?= 40m

race:
	$(GO) test -race -count=1 -timeout $(RACE_TIMEOUT) $(RACE_PKGS)

# go.mod tidy, vet, gofmt, and golangci-lint with .golangci.yml: depguard
# holds the layers of docs/ARCHITECTURE.md (a wrong import fails here).
GOLANGCI_VERSION := v2.15.0
GOLANGCI         := .ci/bin/golangci-lint-$(GOLANGCI_VERSION)

lint: $(GOLANGCI)
	$(GO) mod tidy -diff
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GOLANGCI) run $(PKGS)

# golangci-lint, pinned, built once into .ci/bin (minutes on a fresh
# machine; kept across runs and by make clean).
$(GOLANGCI):
	mkdir -p .ci/bin
	GOBIN=$(CURDIR)/.ci/bin $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)
	mv .ci/bin/golangci-lint $@

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./bucket/ ./engine/ ./maintenance/ ./sql/
	$(GO) run ./cmd/worldfs bench commit --bucket 'mem://bench?profile=gcs' --duration 10s
	$(GO) run ./cmd/worldfs bench ingest --bucket 'mem://bench?profile=gcs' --duration 10s

# The main job on the default local bucket: the reference simulation end to
# end (ticks, a resuming writer, a fork, a cold start).
demo:
	$(GO) run ./cmd/worldfs demo --bucket $(BUCKET)

# Build outputs and the local buckets the demo and benchmarks make.
clean:
	rm -rf bin worldfs-data bench-data
