# Once — build, test and run the operator on a local control plane built
# from source. `make help` lists the targets.

# Setting SHELL to bash allows bash commands to be executed by recipes.
# Options are set to exit when a recipe line exits non-zero or a piped command fails.
SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

# YEAR is stamped into generated files' licence headers.
YEAR ?= $(shell date +%Y)
# IMG is the manager's container image, for deploying to a real cluster.
IMG ?= once-manager:latest
# VERSION is stamped into the manager (bin/manager --version, the image) and
# the plugin (kubectl once version).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-20s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate the CRDs and the ClusterRole.
	"$(CONTROLLER_GEN)" rbac:roleName=manager-role crd paths="./..." output:crd:artifacts:config=config/crd/bases

.PHONY: docs
docs: manifests ## Generate docs/reference.md from the CRDs (a test fails when it is not current).
	go run ./hack/crdref -crds config/crd/bases -out docs/reference.md

.PHONY: generate
generate: controller-gen ## Generate DeepCopy methods.
	"$(CONTROLLER_GEN)" object:headerFile="hack/boilerplate.go.txt",year=$(YEAR) paths="./..."

.PHONY: fmt
fmt: ## Run go fmt against code.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet against code, also with the failpoints and e2e build tags.
	go vet ./...
	go vet -tags failpoints,e2e ./...

# Controller tests run with failpoints compiled in, to stop a manager at the
# protocol's crash windows; the production binary (make build) has none.
TEST_TAGS ?= failpoints

.PHONY: test
test: manifests generate fmt vet controlplane-binaries ## Run all tests: unit, envtest (real API server) and end-to-end.
	KUBEBUILDER_ASSETS="$(ASSETS)" go test -tags $(TEST_TAGS) $$(go list ./... | grep -v /test/e2e) -coverprofile cover.out
	$(MAKE) test-e2e

# UNIT_SKIP are the packages whose tests need a real API server (envtest).
# The fuzz targets of internal/ingress need none: test-unit runs their seeds.
UNIT_SKIP = /test/e2e$$|/internal/controller$$|/internal/ingress$$|/internal/shard$$|/internal/presence$$|/test/apiserver$$|/test/harness$$

.PHONY: mcp-clients
mcp-clients: test/mcpts/node_modules/.package-lock.json ## Install the official MCP TypeScript SDK (its v1 package and its v2 client), at the versions test/mcpts pins, for the end-to-end tests' clients.
test/mcpts/node_modules/.package-lock.json: test/mcpts/package.json test/mcpts/package-lock.json
	cd test/mcpts && npm ci --no-audit --no-fund

.PHONY: test-unit
test-unit: ## Run the tests that need no API server, in seconds: the pure packages, the simulator's stories without its hunt, and every fuzz target's seed corpus.
	go test $$(go list ./... | grep -Ev '$(UNIT_SKIP)') -short -skip TestAPIServerModel
	go test -run '^Fuzz' ./internal/ingress/

.PHONY: test-e2e
test-e2e: build controlplane-binaries mcp-clients ## Run the end-to-end tests: manager and sandbox binaries, local control plane, kubectl.
	KUBEBUILDER_ASSETS="$(ASSETS)" go test -tags e2e ./test/e2e/ -v -timeout 30m -ginkgo.v

# SEEDS and STEPS size a hunt of the deterministic simulator (test/sim);
# WORKERS processes share it, one per core by default.
SEEDS ?= 1000
STEPS ?= 2000
WORKERS ?= $(shell nproc 2>/dev/null || echo 1)

.PHONY: sim
sim: ## Hunt for schedules that break the invariants: the real reconcilers in the simulator over SEEDS random seeds of STEPS steps on WORKERS cores; each seed draws its rates, weights and flags (SIM_FLAGS adds or overrides).
	go run ./test/sim/cmd/sim -seeds $(SEEDS) -steps $(STEPS) -workers $(WORKERS) -mix -keep-going $(SIM_FLAGS)

.PHONY: lint
lint: golangci-lint ## Run golangci-lint.
	"$(GOLANGCI_LINT)" run --build-tags failpoints,e2e

# FUZZTIME is how long make fuzz runs each fuzz target; FUZZ_FLAGS adds
# go test flags, e.g. FUZZ_FLAGS="-parallel 1".
FUZZTIME ?= 1m

.PHONY: fuzz
fuzz: ## Run every fuzz target (each func Fuzz in a _test.go, found by hack/fuzz.sh) for FUZZTIME, one after another.
	FUZZTIME=$(FUZZTIME) FUZZ_FLAGS="$(FUZZ_FLAGS)" hack/fuzz.sh

# Benchmarks run only here: without -bench, go test (and so make test) runs
# none of them.
.PHONY: bench-go
bench-go: ## Go benchmarks of the hot pure code, with allocations.
	go test -run '^$$' -bench . -benchmem ./internal/protocol/ ./internal/saga/ ./internal/effects/http/

##@ Build

.PHONY: build
build: manifests generate fmt vet ## Build the manager, the failpoint-enabled manager for tests, the sandbox tool, the kubectl once plugin and the MCP gateway.
	go build -ldflags "$(LDFLAGS)" -o bin/manager ./cmd
	go build -tags failpoints -ldflags "$(LDFLAGS)" -o bin/manager-failpoints ./cmd
	go build -o bin/sandbox-tool ./test/sandbox/cmd/sandbox-tool
	go build -ldflags "$(LDFLAGS)" -o bin/kubectl-once ./cmd/kubectl-once
	install -m 0755 cmd/kubectl-once/kubectl_complete-once bin/kubectl_complete-once
	go build -o bin/once-mcp ./cmd/once-mcp
	go build -o bin/mcp-call ./test/mcpwire/cmd/mcp-call

# PLUGIN_DIR is where install-plugin puts kubectl-once and its completion
# script kubectl_complete-once: a folder on the PATH.
PLUGIN_DIR ?= $(HOME)/.local/bin

.PHONY: install-plugin
install-plugin: ## Build the kubectl once plugin and install it, with kubectl_complete-once for kubectl's completion, in PLUGIN_DIR (default ~/.local/bin).
	go build -ldflags "$(LDFLAGS)" -o bin/kubectl-once ./cmd/kubectl-once
	install -d "$(PLUGIN_DIR)"
	install -m 0755 bin/kubectl-once "$(PLUGIN_DIR)/kubectl-once"
	install -m 0755 cmd/kubectl-once/kubectl_complete-once "$(PLUGIN_DIR)/kubectl_complete-once"
	@case ":$$PATH:" in *":$(PLUGIN_DIR):"*) ;; *) echo "$(PLUGIN_DIR) is not on your PATH: add it, or run make install-plugin PLUGIN_DIR=<a folder on it>";; esac

.PHONY: run
run: manifests generate fmt vet ## Run the manager from your host against the current kubeconfig.
	go run ./cmd --health-probe-bind-address=0 --allow-egress-cidrs=127.0.0.0/8

.PHONY: docker-build
docker-build: ## Build the manager's container image (needs a Docker engine).
	docker build --build-arg VERSION=$(VERSION) -t $(IMG) .

# DIST is where make release writes the manifests.
DIST ?= dist

.PHONY: release
release: manifests ## Write $(DIST)/install.yaml (cluster-wide), and install-namespaced-cluster.yaml and install-namespaced.yaml, with the image IMG.
	mkdir -p "$(DIST)"
	"$(KUBECTL)" kustomize config/default | sed 's|image: controller:latest|image: $(IMG)|' > "$(DIST)/install.yaml"
	"$(KUBECTL)" kustomize config/namespaced/cluster > "$(DIST)/install-namespaced-cluster.yaml"
	"$(KUBECTL)" kustomize config/namespaced | sed 's|image: controller:latest|image: $(IMG)|' > "$(DIST)/install-namespaced.yaml"
	@for f in "$(DIST)/install.yaml" "$(DIST)/install-namespaced.yaml"; do \
		grep -q 'image: $(IMG)$$' "$$f" || { echo "$$f: the image was not set to $(IMG)" >&2; exit 1; }; \
	done

##@ Local control plane

.PHONY: controlplane-binaries
controlplane-binaries: ## Build kube-apiserver, kube-controller-manager, etcd and kubectl from source into the cache, once per machine.
	@hack/controlplane-binaries.sh >/dev/null

.PHONY: controlplane-up
controlplane-up: manifests controlplane-binaries ## Start the local control plane with the CRDs; prints its kubeconfig path.
	hack/controlplane.sh start

.PHONY: controlplane-down
controlplane-down: ## Stop the local control plane and remove its state.
	hack/controlplane.sh stop

.PHONY: demo
demo: build controlplane-binaries ## Run the main job: control plane, manager, sandbox tool, one operation committed once.
	hack/demo.sh

##@ Chaos

# N is the number of logical operations of the chaos run; it also creates
# N/8 sagas unless CHAOS_FLAGS says -sagas (go run ./test/chaos/cmd/chaos -h).
N ?= 2000
CHAOS_FLAGS ?=

.PHONY: chaos
chaos: build controlplane-binaries ## Chaos run: N operations and N/8 sagas under tool faults and manager kills; prints the figures that docs/design.md lists under Figures to report.
	go run ./test/chaos/cmd/chaos -n $(N) $(CHAOS_FLAGS)

##@ Benchmark

# BENCH_FLAGS are the benchmark's flags (go run ./test/bench/cmd/bench -h), e.g.
# BENCH_FLAGS="-n 1000 -runs 3 -managers 1,2".
BENCH_FLAGS ?=

.PHONY: bench
bench: build controlplane-binaries ## Benchmark: a plain client's ceiling against Once with one and two managers; prints a table, writes JSON.
	go run ./test/bench/cmd/bench $(BENCH_FLAGS)

# SOAK_FLAGS are the soak's flags (go run ./test/bench/cmd/soak -h), e.g.
# SOAK_FLAGS="-duration 10m -ttl 2m -retention 3m".
SOAK_FLAGS ?=

.PHONY: soak
soak: build controlplane-binaries ## Soak (not part of make test): a sustained load for 30 minutes, operations with TTLs of minutes; writes JSON and an SVG plot, exits 1 unless flat.
	go run ./test/bench/cmd/soak $(SOAK_FLAGS)

##@ Deployment

.PHONY: install
install: manifests ## Install the CRDs into the cluster of the current kubeconfig.
	"$(KUBECTL)" apply -k config/crd

.PHONY: uninstall
uninstall: manifests ## Uninstall the CRDs from the cluster of the current kubeconfig.
	"$(KUBECTL)" delete --ignore-not-found -k config/crd

.PHONY: deploy
deploy: manifests ## Deploy the manager to the cluster of the current kubeconfig (image IMG).
	"$(KUBECTL)" kustomize config/default | sed 's|image: controller:latest|image: $(IMG)|' | "$(KUBECTL)" apply -f -

.PHONY: undeploy
undeploy: ## Remove the manager from the cluster of the current kubeconfig.
	"$(KUBECTL)" kustomize config/default | "$(KUBECTL)" delete --ignore-not-found -f -

##@ Dependencies

## Location to install dependencies to
LOCALBIN ?= $(shell pwd)/bin
$(LOCALBIN):
	mkdir -p "$(LOCALBIN)"

# The control plane's binaries, built from Go modules pinned in hack/tools.
ASSETS = $(shell hack/controlplane-binaries.sh)
KUBECTL ?= $(ASSETS)/kubectl
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
GOLANGCI_LINT = $(LOCALBIN)/golangci-lint

CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION ?= v2.13.1

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN) ## Install controller-gen locally if necessary.
$(CONTROLLER_GEN): $(LOCALBIN)
	$(call go-install-tool,$(CONTROLLER_GEN),sigs.k8s.io/controller-tools/cmd/controller-gen,$(CONTROLLER_TOOLS_VERSION))

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT) ## Install golangci-lint locally if necessary.
$(GOLANGCI_LINT): $(LOCALBIN)
	$(call go-install-tool,$(GOLANGCI_LINT),github.com/golangci/golangci-lint/v2/cmd/golangci-lint,$(GOLANGCI_LINT_VERSION))

# go-install-tool will 'go install' any package with custom target and name of binary, if it doesn't exist
# $1 - target path with name of binary
# $2 - package url which can be installed
# $3 - specific version of package
define go-install-tool
@[ -f "$(1)-$(3)" ] && [ "$$(readlink -- "$(1)" 2>/dev/null)" = "$(1)-$(3)" ] || { \
set -e; \
package=$(2)@$(3) ;\
echo "Installing $${package}" ;\
rm -f "$(1)" ;\
GOBIN="$(LOCALBIN)" go install $${package} ;\
mv "$(LOCALBIN)/$$(basename "$(1)")" "$(1)-$(3)" ;\
} ;\
ln -sf "$$(realpath "$(1)-$(3)")" "$(1)"
endef
