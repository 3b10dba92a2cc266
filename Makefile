# Skiff: build, run and test. `make help` lists the targets.

GO           ?= go
BIN          ?= bin/skiff
DATA_DIR     ?= /var/lib/skiff
TEST_TIMEOUT ?= 20m
# Two packages at a time: the machines have two cores.
TEST_FLAGS   ?= -p 2
TEST_PKGS    ?= ./...
VERSION      ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GIT_COMMIT   := $(shell git rev-parse HEAD 2>/dev/null)
GIT_TREE     := $(if $(findstring -dirty,$(VERSION)),dirty,clean)
# The embedded kubectl reports the Kubernetes release of its libraries
# (k8s.io/client-go v0.37.2 is Kubernetes v1.37.2), as upstream's build does.
KUBE_VERSION := $(shell $(GO) list -m -f '{{.Version}}' k8s.io/client-go 2>/dev/null | sed 's/^v0\./v1./')
KUBE_MINOR   := $(word 2,$(subst ., ,$(KUBE_VERSION)))
KUBE_LDFLAGS := $(foreach p,k8s.io/client-go/pkg/version k8s.io/component-base/version,\
	-X $(p).gitVersion=$(KUBE_VERSION) -X $(p).gitMajor=1 -X $(p).gitMinor=$(KUBE_MINOR) \
	-X $(p).gitCommit=$(GIT_COMMIT) -X $(p).gitTreeState=$(GIT_TREE))
LDFLAGS      := -X github.com/skiff-sh/skiff/internal/cli/version.version=$(VERSION) $(KUBE_LDFLAGS)

.PHONY: help setup build run test fuzz clean

help:
	@echo "make build   build $(BIN)"
	@echo "make run     install what is missing, build, run '$(BIN) server --data-dir $(DATA_DIR)' in the foreground"
	@echo "make test    install what is missing, build, run every test (go test $(TEST_FLAGS) -timeout $(TEST_TIMEOUT) $(TEST_PKGS))"
	@echo "make fuzz    run each fuzz target for FUZZTIME ($(FUZZTIME)); make test ends with it"
	@echo "make clean   remove bin/"
	@echo "make conformance  upstream's conformance suite against a fresh two-node cluster (docs/conformance.md)"
	@echo "make upstream-components-test  upstream kube-scheduler and kube-controller-manager against skiff server (test/upstream)"

setup:
	@bash scripts/setup.sh

# The runc shim is built on its own and embedded (internal/agent/shim).
build:
	GO=$(GO) sh internal/agent/shim/build.sh
	$(GO) build -tags skiffshim -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/skiff

run: setup build
	./$(BIN) server --data-dir $(DATA_DIR) $(ARGS)

# The e2e tests use the binary built here (SKIFF_BINARY) instead of building
# their own.
test: setup build
	SKIFF_BINARY=$(abspath $(BIN)) $(GO) test -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) $(TEST_PKGS)
	@$(MAKE) --no-print-directory fuzz

# A short run of every fuzz target (go test runs their committed seeds,
# testdata/fuzz, with the other tests). A failing input is written under
# the package's testdata/fuzz: commit it with the fix. Fuzzing builds its
# packages again with coverage instrumentation, which is most of its time.
# A count, not a duration: with a duration Go 1.26's fuzz coordinator may
# fail a target with "context deadline exceeded" as the time runs out
# (golang/go#75804, fixed in Go 1.27), as it did here under load.
FUZZTIME ?= 10000x
fuzz:
	@set -e; grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' internal cmd test | sed 's/:func /:/' | \
	while IFS=: read -r file target; do \
		echo "fuzz ./$$(dirname $$file) $$target for $(FUZZTIME)"; \
		$(GO) test -vet=off -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) ./$$(dirname $$file); \
	done

clean:
	rm -rf bin

# Upstream's conformance suite (v1.37.2 e2e.test) against a fresh two-node
# cluster; long, never part of test. FOCUS, SKIP, SERIAL=1, PROCS, KEEP=1:
# see hack/conformance.sh and docs/conformance.md.
.PHONY: conformance
conformance:
	bash hack/conformance.sh all

# Upstream kube-scheduler and kube-controller-manager v1.37.2 (built and
# cached by hack/upstream/build.sh) against skiff server with its own
# scheduler and controllers off, on simulated nodes; never part of test.
.PHONY: upstream-components-test
upstream-components-test:
	BIN=$(BIN) bash hack/upstream/components-test.sh
