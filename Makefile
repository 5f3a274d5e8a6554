# xdpfw — two entry points:
#   make demo   install what is missing, build, run the namespace demo
#   make test   install what is missing, build, run every test (what CI runs)
GO      ?= go
ARCH    := $(shell uname -m)
# bpf2go's clang flags are pinned in internal/*/gen.go (-O2 -g -Wall -Werror,
# and -mcpu=v3 for the data plane: 32-bit ALU and jumps, Linux 5.1+); their
# -cflags expand $BPF2GO_CFLAGS (bpf2go itself reads that variable only when
# -cflags is absent), which adds the multiarch include dir Debian keeps
# <asm/types.h> in: a fresh Debian has no /usr/include/asm.
export BPF2GO_CFLAGS := -I/usr/include/$(ARCH)-linux-gnu
export GOFLAGS := -mod=mod
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/xdpfw/xdpfw/internal/cli.Version=$(VERSION)

.PHONY: all deps build man generate check-generated vet test test-go test-race fuzz demo demo-router clean

all: build

deps:
	@bash scripts/deps.sh

# Static, without cgo (nothing needs it): the process starts 2-3 ms sooner,
# which single edits notice (docs/classifier.md, "Single edits").
build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o bin/xdpfw ./cmd/xdpfw

man: build
	bin/xdpfw man bin/man

generate:
	$(GO) generate ./internal/datapath/ ./internal/bench/ ./internal/nat/

# CI: the committed bpf2go output must be what the sources produce.
check-generated: generate
	@git diff --exit-code -- internal/datapath/ 'internal/bench/*_bpfel.*' 'internal/nat/*_bpfel.*' || { echo "bpf2go output is stale: run 'make generate' and commit"; exit 1; }

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l cmd internal testutil test)" || { gofmt -l cmd internal testutil test; echo "gofmt needed"; exit 1; }

test: deps
	$(MAKE) check-generated vet build test-go test-race

test-go:
	$(GO) test -count=1 -timeout 15m ./...

# The race detector over the packages where goroutines share state (the
# daemon's watcher, reloads, GC and forwarder; the firewall's lock; the
# telemetry readers; the CLI's commands). It needs cgo: gcc, or the clang
# that deps installs; the data plane's packages run packets through BPF
# and gain nothing from it but a 10x longer run.
RACE_PKGS := ./internal/daemon/ ./internal/firewall/ ./internal/telemetry/ ./internal/conntrack/ ./internal/cli/
RACE_CC   := $(shell command -v gcc || command -v clang)
test-race:
	CGO_ENABLED=1 CC=$(RACE_CC) $(GO) test -race -count=1 -timeout 15m $(RACE_PKGS)

fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=30s ./internal/rules/
	$(GO) test -run='^$$' -fuzz='^FuzzParseSetElems$$' -fuzztime=30s ./internal/rules/

demo: deps build
	bash scripts/demo.sh

# the router demo: LAN -> WAN through an xdpfw router, MASQUERADE and a port forward
demo-router: deps build
	bash scripts/demo-router.sh

clean:
	rm -rf bin
