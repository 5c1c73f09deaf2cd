# gcompose: `make demo` runs the main job, `make test` passes the tests.
GO        ?= go
BIN       := bin
# Every binary under cmd/ except the CLI becomes an image gcompose/<name>:dev.
IMAGES    := $(filter-out gcompose,$(notdir $(wildcard cmd/*)))
GOFLAGS_STATIC := CGO_ENABLED=0 GOOS=linux
# Build tools (not images), kept out of bin/, which is the images' build context.
TOOLS     := .tools

.PHONY: all build binaries images test test-podman test-podman-rootless test-short bench lint fmt vet tidy nocurrency cross demo clean devnet interrupt-sweep reconcile-sweep size-sweep size-sweep-podman clean-test-images

all: build

build: $(BIN)/gcompose

$(BIN)/gcompose: FORCE
	$(GOFLAGS_STATIC) $(GO) build -trimpath -ldflags "-s -w -X main.commit=$$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" -o $@ ./cmd/gcompose

binaries: build
	@for b in $(IMAGES); do echo "go build $$b"; $(GOFLAGS_STATIC) $(GO) build -trimpath -ldflags "-s -w" -o $(BIN)/$$b ./cmd/$$b || exit 1; done

# Images are built by the Docker Engine from images/<name>.Dockerfile with bin/ as context.
# The devnet's provider images need a static /bin/sh: Debian's busybox-static (apt-get install -y busybox-static).
$(BIN)/busybox:
	@mkdir -p $(BIN) && cp /bin/busybox $@ || { echo "missing /bin/busybox: apt-get install -y busybox-static"; exit 1; }

# The CLI's own image (docs/ci.md) takes the host's CA bundle, or an empty one.
$(BIN)/ca-certificates.crt:
	@mkdir -p $(BIN) && { cp /etc/ssl/certs/ca-certificates.crt $@ 2>/dev/null || : > $@; }

# Through the Engine API (internal/tools/imagebuild), not the docker CLI, whose legacy builder warns per image.
$(TOOLS)/imagebuild: FORCE
	@mkdir -p $(TOOLS) && $(GO) build -o $@ ./internal/tools/imagebuild

images: binaries $(BIN)/busybox $(BIN)/ca-certificates.crt $(TOOLS)/imagebuild
	@for b in $(IMAGES); do if [ -f images/$$b.Dockerfile ]; then echo "image gcompose/$$b:dev"; $(TOOLS)/imagebuild -f images/$$b.Dockerfile -t gcompose/$$b:dev $(BIN) || exit 1; fi; done
	@echo "image gcompose/gcompose:dev"; $(TOOLS)/imagebuild -f images/gcompose.Dockerfile -t gcompose/gcompose:dev $(BIN)

lint: fmt vet tidy nocurrency

# core/ is the generic engine: what things cost is the adapters' to say (protocol: spent, cost), in their
# currency. No Golem currency in core/, code, messages or test data; the dApp-store conformance inputs are
# third-party descriptors quoted as written (one is named "GLM Query").
nocurrency:
	@if grep -rn GLM core/ --exclude-dir=conformance; then echo 'nocurrency: core/ names the Golem currency (above): costs and currencies come from the adapters'; exit 1; fi

# go.mod must say what the code imports: a direct import marked `// indirect`, or a module tidy would add or
# drop, fails here. -diff prints what tidy would change and exits 1 without writing anything.
tidy:
	$(GO) mod tidy -diff

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# The CLI runs on users' laptops too: it must keep building for macOS and Windows (only the file state
# backend's OS lock is unix-only there, and it says so at run time).
CROSS_OS := darwin windows
cross:
	@for os in $(CROSS_OS); do echo "GOOS=$$os go build ./cmd/gcompose"; GOOS=$$os $(GO) build -o /dev/null ./cmd/gcompose || exit 1; GOOS=$$os $(GO) vet ./cmd/gcompose || exit 1; done

# The docs' test (docs/docs_test.go) runs last and alone: it deploys the tutorial's app, whose name the golem
# e2e tests deploy too, and a first deploy refuses to start beside another state's objects of the same app.
test: lint cross images
	$(GO) test -race -count=1 -timeout 40m $$($(GO) list ./... | grep -v '/docs$$')
	@if [ -n "$$GCOMPOSE_PODMAN_HOST" ]; then $(MAKE) --no-print-directory test-podman; \
	elif [ -n "$$CI" ]; then echo 'test: CI is set and GCOMPOSE_PODMAN_HOST is not: run .ci/run, or eval "$$(.ci/podman start)"'; exit 1; \
	else echo 'test: the Podman pass is skipped: GCOMPOSE_PODMAN_HOST is unset (docs/engines.md)'; fi
	$(GO) test -count=1 -timeout 10m ./docs/

# The suites that cross the engine boundary, again against Podman (docs/engines.md): make images, the runner,
# the adapter client (one-shot, served, misbehaving; not the hangs, which only wait out timeouts), the image
# builders, and the CLI's deploy/plan/update/destroy, kill and leftovers, misbehaving and served adapters,
# docker-compose run of the CLI's image, and a remote engine; then the runner's suite on rootless Podman.
# GCOMPOSE_PODMAN_HOST names Podman's Docker-API socket, GCOMPOSE_REMOTE_ENGINE_HOST an engine that does not
# see this machine's /tmp, GCOMPOSE_PODMAN_ROOTLESS_HOST and _USER the rootless one: `eval "$$(.ci/podman
# start)"` (.ci/run does) sets them all.
PODMAN_PKGS := ./core/runner/ ./core/adapter/ ./adapters/golem/lowering/ ./internal/testimage/ ./internal/tools/imagebuild/ ./internal/dockerbuild/
PODMAN_SKIP := TestMisbehaveAdapter/(action|state|init)_hang|TestErrors/timeout
PODMAN_CLI  := TestComposeRunDeploysAndDestroys|TestE2EDeployRedeployUpdateDestroy|TestE2EKillDuringDeployConverges|TestE2EFirstDeployRefusedWhenContainersExist|TestE2EMissingPlugDirectoryIsCreated|TestE2EMisbehaving.*|TestE2EInitWrongProtocol|TestE2EInitHangIsKilledByTheTimeout|TestE2EServerDoesNotOutliveGcompose|TestE2ELogsFromAnAdapter|TestE2ERemoteEngine
test-podman:
	@test -n "$$GCOMPOSE_PODMAN_HOST" || { echo 'test-podman: GCOMPOSE_PODMAN_HOST is unset: eval "$$(.ci/podman start)" first (docs/engines.md)'; exit 1; }
	DOCKER_HOST=$$GCOMPOSE_PODMAN_HOST $(MAKE) --no-print-directory images
	DOCKER_HOST=$$GCOMPOSE_PODMAN_HOST $(GO) test -race -count=1 -timeout 20m -skip '$(PODMAN_SKIP)' $(PODMAN_PKGS)
	DOCKER_HOST=$$GCOMPOSE_PODMAN_HOST $(GO) test -race -count=1 -timeout 20m -run '^($(PODMAN_CLI))$$' ./cmd/gcompose/
	@if [ -n "$$GCOMPOSE_PODMAN_ROOTLESS_HOST" ]; then $(MAKE) --no-print-directory test-podman-rootless; fi

# The runner's suite on rootless Podman, run as its user (GCOMPOSE_PODMAN_ROOTLESS_USER): the test binary is
# built here; it runs there beside a copy of what it builds its test image from (go.mod and the test
# adapter's source), which that user can read whoever owns this checkout.
ROOTLESS_DIR := /var/tmp/gcompose-rootless-test
test-podman-rootless:
	@test -n "$$GCOMPOSE_PODMAN_ROOTLESS_HOST" -a -n "$$GCOMPOSE_PODMAN_ROOTLESS_USER" || { echo 'test-podman-rootless: GCOMPOSE_PODMAN_ROOTLESS_HOST and _USER are unset: eval "$$(.ci/podman start)" first'; exit 1; }
	rm -rf $(ROOTLESS_DIR) && mkdir -p $(ROOTLESS_DIR)/src/core/runner
	cp --parents -r go.mod go.sum internal/testimage/testdata $(ROOTLESS_DIR)/src/
	$(GO) test -c -race -o $(ROOTLESS_DIR)/runner.test ./core/runner/
	cd $(ROOTLESS_DIR)/src/core/runner && setpriv --reuid=$$GCOMPOSE_PODMAN_ROOTLESS_USER --regid=$$GCOMPOSE_PODMAN_ROOTLESS_USER --init-groups \
	  env -i PATH=$(dir $(shell command -v $(GO))):/usr/bin:/bin HOME=$$(getent passwd $$GCOMPOSE_PODMAN_ROOTLESS_USER | cut -d: -f6) \
	  DOCKER_HOST=$$GCOMPOSE_PODMAN_ROOTLESS_HOST GOFLAGS=-buildvcs=false GOTOOLCHAIN=local $(ROOTLESS_DIR)/runner.test -test.count=1 -test.timeout=10m
	rm -rf $(ROOTLESS_DIR)

# The full devnet interrupt sweep (docs/golem.md): the webapp deploy cut short by SIGKILL and SIGINT after
# every adapter call and inside calls, and a replace of a running service cut short inside it, each followed by
# a deploy and a destroy. `make test` runs a sample.
interrupt-sweep:
	GCOMPOSE_INTERRUPT_SWEEP=1 $(GO) test -count=1 -v -run '^(TestInterruptSweep|TestInterruptReplaceSweep)$$' -timeout 240m ./adapters/golem/e2e/

# The devnet at size (docs/performance.md): an app of GCOMPOSE_SIZE_SWEEP_SIZES services (default 30) on one
# VPN deployed, re-deployed and destroyed GCOMPOSE_SIZE_SWEEP_N times (default 10) against a devnet with
# devnet.yaml's providers; after each destroy nothing may be left in the engine, which must answer a ping
# within 10 s throughout. `make test` runs one cycle of 5 services. GCOMPOSE_HEAVY_LOCK=FILE takes that lock
# (flock) for each cycle rather than for the whole sweep. size-sweep-podman runs it on rootful Podman
# (GCOMPOSE_PODMAN_HOST: eval "$$(.ci/podman start)").
size-sweep:
	GCOMPOSE_SIZE_SWEEP_N=$${GCOMPOSE_SIZE_SWEEP_N:-10} GCOMPOSE_SIZE_SWEEP_SIZES=$${GCOMPOSE_SIZE_SWEEP_SIZES:-30} $(GO) test -count=1 -v -run '^TestSizeSweep$$' -timeout 180m ./adapters/golem/devnet/

size-sweep-podman:
	@test -n "$$GCOMPOSE_PODMAN_HOST" || { echo 'size-sweep-podman: GCOMPOSE_PODMAN_HOST is unset: eval "$$(.ci/podman start)" first (docs/engines.md)'; exit 1; }
	DOCKER_HOST=$$GCOMPOSE_PODMAN_HOST $(MAKE) --no-print-directory size-sweep

# The reconciler's healing test (docs/reconcile.md) with 10 provider kills instead of the 3 of make test, and a
# leader paused (SIGSTOP) past its leases mid-repair, whose late writes the state lock refuses.
reconcile-sweep:
	GCOMPOSE_RECONCILE_TRIES=10 $(GO) test -count=1 -v -run '^(TestReconcileHealsAKilledProvider|TestReconcilePausedLeaderIsFenced)$$' -timeout 60m ./adapters/golem/e2e/

# The golem e2e suite's long tail (docs/golem.md): tests that `make test` skips (golemSweep in
# adapters/golem/e2e) because a faster test it runs proves the same capability; this runs them. A test moved
# here gets golemSweep(t) and its name in GOLEM_SWEEP (TestGolemSweepListsEveryGatedTest checks both agree).
.PHONY: golem-sweep
GOLEM_SWEEP := TestExpiredAgreementIsRentedAgain|TestReconcileLeaderKilledMidRepair|TestReconcileRefusesOverBudget|TestMarketCapsAndDeny|TestMarketPlanEstimate|TestMarketPreferSubnet|TestBuildPayloadFromSource
golem-sweep:
	GCOMPOSE_GOLEM_SWEEP=1 $(GO) test -race -count=1 -v -run '^($(GOLEM_SWEEP))$$' -timeout 60m ./adapters/golem/e2e/

test-short:
	$(GO) test -short -count=1 ./...

# -p 1: one package's benchmarks at a time, so that they do not measure each other (docs/performance.md).
# The machine is shared: the load average is printed before and after, as the figures are read beside it.
# Among them: the fresh deploy and the long-running memory (core/engine/enginebench), the Golem deploy on the
# devnet (adapters/golem/devnet); `make test` runs none of them.
bench: images
	@echo "load average before: $$(cat /proc/loadavg 2>/dev/null)"
	$(GO) test -p 1 -run '^$$' -bench . -benchmem -benchtime 1x -timeout 60m ./...
	@echo "load average after: $$(cat /proc/loadavg 2>/dev/null)"

# Starts the devnet, deploys examples/webapp on it, prints the local URL and fetches the page (docs/golem.md).
demo: images
	@sh examples/webapp/demo.sh

# The local yagna-compatible devnet (adapters/golem/devnet) on 127.0.0.1:$${GCOMPOSE_DEVNET_PORT:-7465}; key:
# $$YAGNA_APPKEY or devnet-appkey. One per machine: the compose project is pinned to gcompose-devnet (.env).
# GCOMPOSE_DEVNET_CONFIG=FILE: the devnet reads that file instead of adapters/golem/devnet/devnet.yaml (made
# absolute here, as docker-compose would read a relative path against docker-compose.yml's folder); a running
# devnet is recreated with it. The file is checked first, so a typo is named before anything restarts.
devnet: images
	@if [ -n "$$GCOMPOSE_DEVNET_CONFIG" ]; then \
	  cfg=$$(realpath -e "$$GCOMPOSE_DEVNET_CONFIG") || { echo "GCOMPOSE_DEVNET_CONFIG=$$GCOMPOSE_DEVNET_CONFIG: no such file"; exit 1; }; \
	  $(BIN)/devnet -check-config -config "$$cfg" || exit 1; \
	  echo "devnet config: $$cfg"; GCOMPOSE_DEVNET_CONFIG=$$cfg docker-compose up -d devnet; \
	else docker-compose up -d devnet; fi

clean:
	rm -rf $(BIN) $(TOOLS)

# Test images (internal/testimage) are tagged by their content (gcompose-test/file-adapter:e2e-<hash>), so
# that runs from different checkouts never swap each other's adapters, and stay after the tests: a run from
# another checkout may be using the very same image. A test that builds removes its name's images unused for
# 6h; this removes every test image (and the old fixed-tag ones) unused for TEST_IMAGE_AGE, 6h by default,
# longer than any test run lasts. TEST_IMAGE_AGE=0 removes all that no container uses: only when no test
# runs against this Engine. Images a container uses stay.
TEST_IMAGE_AGE ?= 6h
clean-test-images:
	$(GO) run ./internal/testimage/cleanimages -age $(TEST_IMAGE_AGE)

FORCE:
