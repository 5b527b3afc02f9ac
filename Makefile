# worldfs — see README.md. Every target runs on a fresh machine with Go.
GO       ?= go
BUCKET   ?= ./worldfs-data
PKGS     := ./...

.PHONY: build install test race lint bench demo clean

build:
	$(GO) build -buildvcs=auto -o bin/worldfs ./cmd/worldfs

# worldfs on PATH (in $(go env GOBIN), or $(go env GOPATH)/bin).
install:
	$(GO) install -buildvcs=auto ./cmd/worldfs

# The whole test suite; then the bucket conformance suite again, verbosely,
# so the log names every backend it ran (a skipped backend fails).
SHELL := /bin/bash

test:
	$(GO) test -count=1 $(PKGS)
	@set -o pipefail; $(GO) test -count=1 -run '^TestConformance$$' -v ./bucket/ \
		| grep -E '^    --- (PASS|FAIL|SKIP): TestConformance/[^/ ]+ ' \
		| sed 's/^    --- /conformance: /'

race:
	$(GO) test -race -count=1 $(PKGS)

lint:
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./bucket/ ./engine/ ./sql/
	$(GO) run ./cmd/worldfs bench commit --bucket 'mem://bench?profile=gcs' --duration 10s
	$(GO) run ./cmd/worldfs bench ingest --bucket 'mem://bench?profile=gcs' --duration 10s

# The main job on the default local bucket: the reference simulation end to
# end (ticks, a resuming writer, a fork, a cold start).
demo:
	$(GO) run ./cmd/worldfs demo --bucket $(BUCKET)

# Build outputs and the local buckets the demo and benchmarks make.
clean:
	rm -rf bin worldfs-data bench-data
