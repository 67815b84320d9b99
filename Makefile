# toolhost — `make run` serves the example config; `make test` installs what
# the tests need and runs them all. Everything built lands in bin/ and
# build/ (both git-ignored); a second run reuses them.

GO ?= go
export CGO_ENABLED ?= 0
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/toolhost/toolhost/host.Version=$(VERSION)

# The generators of the plugin protocol's Go code, pinned.
BUF_VERSION := v1.75.0
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.0
STATICCHECK_VERSION := v0.8.2
TOOLS_BIN := $(CURDIR)/build/bin

# Every folder under plugins/ with a main.go is a built-in kind.
KINDS := $(patsubst plugins/%/main.go,%,$(wildcard plugins/*/main.go))

.PHONY: all build plugins pins run test check lint tools proto bench clean
all: build

include runsc/runsc.mk

build: bin/toolhost plugins pins

bin/toolhost: FORCE
	@mkdir -p bin
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./host/cmd/toolhost

plugins: FORCE
	@mkdir -p bin/plugins
	@for k in $(KINDS); do \
		echo "$(GO) build -o bin/plugins/toolhost-plugin-$$k ./plugins/$$k"; \
		$(GO) build -trimpath -o bin/plugins/toolhost-plugin-$$k ./plugins/$$k || exit 1; \
	done

# The built-in plugins' pins, read by examples/toolhost.toml
# ([plugins] sha256_file), so nobody hand-edits hashes of what we built.
# They go beside the plugin folder, not in it: the pins say what may run
# from that folder. toolhost refuses a plugin folder, plugin or pins file
# that group or others can write, so none of them is left so here.
pins: plugins
	@chmod go-w bin bin/plugins bin/plugins/toolhost-plugin-*
	@rm -f bin/plugins/pins.toml
	@{ echo "# Written by \`make build\`: the SHA-256 of each built-in plugin."; \
	  for k in $(KINDS); do \
		echo "$$k = \"$$(sha256sum bin/plugins/toolhost-plugin-$$k | cut -d' ' -f1)\""; \
	  done; } > bin/pins.toml.tmp
	@chmod 0644 bin/pins.toml.tmp && mv bin/pins.toml.tmp bin/pins.toml
	@echo "wrote bin/pins.toml"

run: build sandbox
	bin/toolhost serve --config examples/toolhost.toml

# Pinned generators and linters, from the Go module proxy.
tools:
	@mkdir -p $(TOOLS_BIN)
	@test -x $(TOOLS_BIN)/buf && $(TOOLS_BIN)/buf --version | grep -qx '$(BUF_VERSION:v%=%)' || \
		GOBIN=$(TOOLS_BIN) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
	@test -f $(TOOLS_BIN)/.protoc-gen-go-$(PROTOC_GEN_GO_VERSION) || { \
		GOBIN=$(TOOLS_BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION) && \
		touch $(TOOLS_BIN)/.protoc-gen-go-$(PROTOC_GEN_GO_VERSION); }
	@test -f $(TOOLS_BIN)/.protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION) || { \
		GOBIN=$(TOOLS_BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION) && \
		touch $(TOOLS_BIN)/.protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION); }
	@test -f $(TOOLS_BIN)/.staticcheck-$(STATICCHECK_VERSION) || { \
		GOBIN=$(TOOLS_BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) && \
		touch $(TOOLS_BIN)/.staticcheck-$(STATICCHECK_VERSION); }

# The protocol's Go code goes to sdk/internal/pluginv1 (see sdk/proto/buf.gen.yaml).
proto: tools
	cd sdk/proto && PATH=$(TOOLS_BIN):$$PATH buf generate

lint: tools
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "not gofmt-ed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	@big=$$(git ls-files -z | xargs -0 -r find 2>/dev/null -maxdepth 0 -type f -size +1M); \
		test -z "$$big" || { echo "build outputs or large files are committed: $$big"; exit 1; }
	$(GO) vet ./...
	$(TOOLS_BIN)/staticcheck ./...
	$(TOOLS_BIN)/buf breaking sdk/proto --against sdk/proto/v1.released.binpb

# Every test: unit tests beside the code, end-to-end tests in integration/
# (real plugins, real runsc, real sockets). Needs root for the sandboxes.
test: build tools sandbox lint
	$(GO) test -count=1 -timeout 40m ./...
	$(GO) test -run '^$$' -fuzz FuzzDecodeFrame -fuzztime 10s ./host/api

# The benchmarks, side by side with their baselines; the python table is
# kept, dated, in bench/.
bench: build sandbox
	$(GO) test -run '^$$' -bench . -benchtime 300x ./integration/ ./host/api/
	$(GO) run ./bench -root . | tee bench/results-$$(date -u +%F).txt

clean:
	rm -rf bin build/rootfs

FORCE:
