# runsc/runsc.mk — included by the top-level Makefile. Builds what the python kind's sandboxes need:
#   make runsc    gVisor's runsc at the pinned version (runsc/VERSION) in build/bin
#   make rootfs   the sandboxes' root filesystems, each rebuilt when its inputs change, by bin/toolhost-rootfs
#                 (the builder an installed toolhost runs as `toolhost rootfs`): build/rootfs for tool runs
#                 (Debian bookworm, python3, pip and the Debian packages of [python] packages in
#                 $(ROOTFS_CONFIG)) and build/rootfs-sessions for conversation sandboxes (the same and
#                 [python] session_packages: numpy, pandas, matplotlib)
#   make netdeps  iptables and iproute2, for network namespaces and the firewall of network = true
#   make sandbox  all three
# The runsc version is written in one place only: runsc/VERSION.

RUNSC_VERSION := $(shell cat $(CURDIR)/runsc/VERSION)
RUNSC_BIN := $(CURDIR)/build/bin/runsc
RUNSC_STAMP := $(CURDIR)/build/bin/.runsc-version
ROOTFS_DIR := $(CURDIR)/build/rootfs
SESSION_ROOTFS_DIR := $(CURDIR)/build/rootfs-sessions
ROOTFS_CONFIG ?= $(CURDIR)/examples/toolhost.toml
# Debian packages built in besides those of the config:
#   make rootfs ROOTFS_PACKAGES="python3-numpy python3-requests"
ROOTFS_PACKAGES ?=

.PHONY: runsc rootfs netdeps sandbox

runsc:
	@if [ -x "$(RUNSC_BIN)" ] && { [ "$$(cat "$(RUNSC_STAMP)" 2>/dev/null)" = "$(RUNSC_VERSION)" ] || \
		go version -m "$(RUNSC_BIN)" 2>/dev/null | grep -q "gvisor.dev/gvisor[[:space:]]*$(RUNSC_VERSION)[[:space:]]"; }; then \
		echo "$(RUNSC_VERSION)" > "$(RUNSC_STAMP)"; \
		echo "runsc $(RUNSC_VERSION) is built: $(RUNSC_BIN)"; \
	else \
		echo "building runsc $(RUNSC_VERSION) (a minute or two)"; \
		mkdir -p "$(dir $(RUNSC_BIN))" && \
		GOBIN="$(CURDIR)/build/bin" CGO_ENABLED=0 go install "gvisor.dev/gvisor/runsc@$(RUNSC_VERSION)" && \
		echo "$(RUNSC_VERSION)" > "$(RUNSC_STAMP)"; \
	fi

rootfs: bin/toolhost-rootfs
	@bin/toolhost-rootfs --config "$(ROOTFS_CONFIG)" --out "$(ROOTFS_DIR)" --session-out "$(SESSION_ROOTFS_DIR)" $(ROOTFS_PACKAGES)

netdeps:
	@if ! command -v iptables >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1; then \
		echo "installing iptables and iproute2"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q iptables iproute2; \
	fi

sandbox: runsc rootfs netdeps
