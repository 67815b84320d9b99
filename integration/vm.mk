# integration/vm.mk — included by the top-level Makefile. The VMs integration/vm_test.go boots:
#   make vm-images   build/vm/bookworm and build/vm/trixie: stock Debian 12 and 13 with systemd and
#                    their own kernels (disk.img, vmlinuz, initrd.img), built by
#                    integration/vm/build.sh side by side, each rebuilt only when the script, the
#                    package list (integration/vm/packages), build/rootfs or build/rootfs-sessions changed
# It installs QEMU and debootstrap with apt when they are missing.

VM_SUITES := bookworm trixie
VM_DIR := $(CURDIR)/build/vm

.PHONY: vm-images vm-tools

vm-tools:
	@if ! command -v qemu-system-x86_64 >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then \
		echo "installing qemu-system-x86 and debootstrap"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=600 \
			qemu-system-x86 debootstrap; \
	fi

# Both suites at once (most of a build is waiting for the mirror and dpkg), each line of output
# marked with its suite; it fails if either does.
vm-images: vm-tools rootfs
	@mkdir -p $(VM_DIR); rcs=$$(mktemp -d); \
	for s in $(VM_SUITES); do \
		{ sh integration/vm/build.sh $$s $(VM_DIR)/$$s $(ROOTFS_DIR) $(SESSION_ROOTFS_DIR) 2>&1; echo $$? >$$rcs/$$s; } | sed -u "s/^/[$$s] /" & \
	done; wait; \
	failed=; for s in $(VM_SUITES); do [ "$$(cat $$rcs/$$s 2>/dev/null)" = 0 ] || failed="$$failed $$s"; done; \
	rm -rf $$rcs; \
	if [ -n "$$failed" ]; then echo "building the VM images failed:$$failed (see the lines marked with it above)" >&2; exit 1; fi
