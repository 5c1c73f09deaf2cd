# gcompose: `make demo` runs the main job, `make test` passes the tests.
GO        ?= go
BIN       := bin
# Every binary under cmd/ except the CLI becomes an image gcompose/<name>:dev.
IMAGES    := $(filter-out gcompose,$(notdir $(wildcard cmd/*)))
GOFLAGS_STATIC := CGO_ENABLED=0 GOOS=linux

.PHONY: all build binaries images test test-short bench lint fmt vet demo clean devnet

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

images: binaries $(BIN)/busybox $(BIN)/ca-certificates.crt
	@for b in $(IMAGES); do if [ -f images/$$b.Dockerfile ]; then echo "image gcompose/$$b:dev"; docker build -q -f images/$$b.Dockerfile -t gcompose/$$b:dev $(BIN) >/dev/null || exit 1; fi; done
	@echo "image gcompose/gcompose:dev"; docker build -q -f images/gcompose.Dockerfile -t gcompose/gcompose:dev $(BIN) >/dev/null

lint: fmt vet

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

test: lint images
	$(GO) test -race -count=1 -timeout 40m ./...

test-short:
	$(GO) test -short -count=1 ./...

# -p 1: one package's benchmarks at a time, so that they do not measure each other (docs/performance.md).
bench: images
	$(GO) test -p 1 -run '^$$' -bench . -benchmem -benchtime 1x -timeout 60m ./...

# Starts the devnet, deploys examples/webapp on it, prints the local URL and fetches the page (docs/golem.md).
demo: images
	@sh examples/webapp/demo.sh

# The local yagna-compatible devnet (adapters/golem/devnet) on 127.0.0.1:7465; key: $$YAGNA_APPKEY or devnet-appkey.
devnet: images
	docker-compose up -d devnet

clean:
	rm -rf $(BIN)

FORCE:
