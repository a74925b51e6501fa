# make test installs what the tests need (versitygw, a cached Garage build,
# spin for the lock's models), then runs vet and the whole suite with the race detector, servers required.
SHELL := /bin/bash
GO ?= go
CACHE ?= $(HOME)/.cache/cairn-state
VERSITYGW_VERSION ?= v1.8.0
VERSITYGW_BIN ?= $(CACHE)/versitygw-$(VERSITYGW_VERSION)/bin/versitygw
AGE_VERSION ?= v1.3.2
AGE_BIN ?= $(CACHE)/age-$(AGE_VERSION)/bin/age
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK_BIN ?= $(CACHE)/staticcheck-$(STATICCHECK_VERSION)/bin/staticcheck

.PHONY: test unit servers versitygw garage spin age vet staticcheck demo bench fuzz

test: servers spin age vet
	GARAGE_BIN="$$(bash scripts/install-garage.sh)" VERSITYGW_BIN="$(VERSITYGW_BIN)" AGE_BIN="$(AGE_BIN)" \
	CAIRN_REQUIRE_SERVERS=1 $(GO) test -race -count=1 -parallel 4 -timeout 40m ./...

unit: vet
	$(GO) test -race -count=1 ./...

servers: versitygw garage

# age: the stock age CLI the recovery recipe's test runs (docs/recovery.md),
# pinned to the filippo.io/age version in go.mod so that every identity kind,
# post-quantum included, is checked.
age: $(AGE_BIN)

$(AGE_BIN):
	GOBIN="$(dir $(AGE_BIN))" $(GO) install filippo.io/age/cmd/...@$(AGE_VERSION)

versitygw: $(VERSITYGW_BIN)

$(VERSITYGW_BIN):
	GOBIN="$(dir $(VERSITYGW_BIN))" $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)

garage:
	bash scripts/install-garage.sh

# spin checks the lock's Promela models (lock/model); installed with apt-get
# where missing, through sudo when not root.
spin:
	@command -v spin >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then sudo=; \
	  elif command -v sudo >/dev/null; then sudo=sudo; \
	  else echo "make: spin is missing, and installing it needs root or sudo: run apt-get install spin as root" >&2; exit 1; fi; \
	  $$sudo apt-get update && $$sudo apt-get install -y spin \
	    || { echo "make: could not install spin with apt-get; install it by hand (Debian/Ubuntu: apt-get install spin)" >&2; exit 1; }; \
	}

# vet: gofmt, go vet, staticcheck (pinned, installed into the cache like the
# servers), and no executable binary tracked by git.
vet: staticcheck
	test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(STATICCHECK_BIN) ./...
	bash scripts/check-tracked-binaries.sh

staticcheck: $(STATICCHECK_BIN)

$(STATICCHECK_BIN):
	GOBIN="$(dir $(STATICCHECK_BIN))" $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# demo builds the example app into bin/ and runs the binary (not go run, which
# hides its exit code and does not pass SIGTERM on). Run through make, a
# failure shows as make's exit 2; the README's first command runs the same
# two steps in the shell, where the app's own exit code and signals reach you.
demo:
	$(GO) build -o bin/ ./examples/instance
	bin/instance

# Benchmarks, servers included; compare two runs' output with benchstat.
bench: servers
	GARAGE_BIN="$$(bash scripts/install-garage.sh)" VERSITYGW_BIN="$(VERSITYGW_BIN)" \
	$(GO) test -run '^$$' -bench . -count 5 ./backend/fs ./backend/s3 ./envelope ./store ./lock

# The parsers' fuzz targets, FUZZTIME each; seeds that found bugs stay in testdata/fuzz.
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzOpen$$' -fuzztime $(FUZZTIME) ./envelope
	$(GO) test -run '^$$' -fuzz '^FuzzSealOpen$$' -fuzztime $(FUZZTIME) ./envelope
	$(GO) test -run '^$$' -fuzz '^FuzzParseRecipient$$' -fuzztime $(FUZZTIME) ./envelope
	$(GO) test -run '^$$' -fuzz '^FuzzX25519Stanza$$' -fuzztime $(FUZZTIME) ./envelope
	$(GO) test -run '^$$' -fuzz '^FuzzBech32Decode$$' -fuzztime $(FUZZTIME) ./envelope
	$(GO) test -run '^$$' -fuzz '^FuzzPeekStamp$$' -fuzztime $(FUZZTIME) ./envelope
	$(GO) test -run '^$$' -fuzz '^FuzzValidateName$$' -fuzztime $(FUZZTIME) ./store
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeManifest$$' -fuzztime $(FUZZTIME) ./store
	$(GO) test -run '^$$' -fuzz '^FuzzDiskPath$$' -fuzztime $(FUZZTIME) ./backend/fs
	$(GO) test -run '^$$' -fuzz '^FuzzParseURL$$' -fuzztime $(FUZZTIME) ./backend/s3
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRecord$$' -fuzztime $(FUZZTIME) ./lock
	$(GO) test -run '^$$' -fuzz '^FuzzParseName$$' -fuzztime $(FUZZTIME) ./lock
	$(GO) test -run '^$$' -fuzz '^FuzzRedactURL$$' -fuzztime $(FUZZTIME) .
	$(GO) test -run '^$$' -fuzz '^FuzzRedact$$' -fuzztime $(FUZZTIME) ./internal/secret
