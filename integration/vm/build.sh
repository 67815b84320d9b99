#!/bin/sh
# build.sh builds a stock Debian VM image that integration/vm_test.go boots in QEMU: a minimal
# Debian SUITE with systemd, its own kernel, the toolhost package's dependencies (the VM has no
# network), python3, and the sandboxes' rootfs and session rootfs where `toolhost rootfs` would
# have built them.
#
#   integration/vm/build.sh SUITE OUT_DIR ROOTFS_DIR SESSION_ROOTFS_DIR
#
# OUT_DIR gets disk.img (raw ext4), vmlinuz and initrd.img (the image's own, out of its /boot) and
# a stamp. It rebuilds only when this script, the package list (integration/vm/packages) or the
# stamp of the rootfs or the session rootfs changed, and builds in a folder beside OUT_DIR that it renames into place last,
# so a build cut off never looks finished.
#
# The one thing of ours in the image is test-agent.service: it mounts the read-only second disk
# (/dev/vdb) at /mnt/share and runs /mnt/share/agent, which the test puts there (see
# integration/vm/agent).
#
# The Debian mirror is the machine's own (read from /etc/apt/sources.list.d/*.sources or
# /etc/apt/sources.list); set TOOLHOST_DEBIAN_MIRROR to use another one.
set -eu

if [ "$#" -ne 4 ]; then
	echo "usage: $0 SUITE OUT_DIR ROOTFS_DIR SESSION_ROOTFS_DIR" >&2
	exit 2
fi
suite=$1
out=$2
rootfs=$3
session_rootfs=$4
here=$(cd "$(dirname "$0")" && pwd)
case $suite in
*[!a-z]* | "") echo "\"$suite\" isn't a Debian suite name" >&2; exit 2 ;;
esac

if [ "$(id -u)" != 0 ]; then
	echo "building a VM image needs root (debootstrap); run it as root" >&2
	exit 1
fi
for r in "$rootfs" "$session_rootfs"; do
	if [ ! -f "$r/.toolhost-rootfs" ] || [ ! -x "$r/usr/bin/python3" ]; then
		echo "the sandboxes' rootfs $r is missing or unfinished: run make rootfs" >&2
		exit 1
	fi
done

# One package a line; blank lines and # comments are ignored.
packages=$(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$here/packages" | sort -u)
for p in $packages; do
	case $p in
	*[!a-z0-9.+-]*) echo "\"$p\" in $here/packages isn't a Debian package name" >&2; exit 2 ;;
	esac
done

want=$( (cat "$0"; echo "suite=$suite"; echo "packages=$packages"; echo "rootfs=$(cat "$rootfs/.toolhost-rootfs")"; echo "session_rootfs=$(cat "$session_rootfs/.toolhost-rootfs")") | sha256sum | cut -d' ' -f1)
stamp=$out/stamp
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f "$out/disk.img" ] && [ -f "$out/vmlinuz" ] && [ -f "$out/initrd.img" ]; then
	echo "VM image $out is up to date"
	exit 0
fi

for tool in debootstrap mkfs.ext4; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "$tool is missing (make vm-images installs it)" >&2
		exit 1
	fi
done

# The mirror: the one this machine's own Debian release comes from (its suite, not -security or
# -updates); the same mirror serves the other suites.
mirror=${TOOLHOST_DEBIAN_MIRROR:-}
host_suite=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
if [ -z "$mirror" ]; then
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		mirror=$(awk -v want="$host_suite" '
			function found() { return uri != "" && ok }
			/^[ \t]*$/ { if (found()) { print uri; exit } uri = ""; ok = 0; next }
			tolower($1) == "uris:" { uri = $2 }
			tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == want || (want == "" && $i !~ /-/)) ok = 1 }
			END { if (found()) print uri }' "$f" | head -n 1)
		[ -n "$mirror" ] && break
	done
fi
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
	mirror=$(awk -v want="$host_suite" '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { s = $(i+1); if (s == want || (want == "" && s !~ /-/)) { print $i; exit } } }' /etc/apt/sources.list)
fi
if [ -z "$mirror" ]; then
	echo "no Debian mirror found in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list; set TOOLHOST_DEBIAN_MIRROR" >&2
	exit 1
fi

# unmount_under DIR unmounts whatever is mounted under DIR, deepest first: debootstrap mounts
# /proc and more in its target and can leave them there (a cut-off build, or build/rootfs/proc as
# met on this machine), and neither cp nor mkfs.ext4 -d may read those.
unmount_under() {
	awk -v d="$1" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r | while read -r m; do
		umount -l "$m" || true
	done
}
# remove_tree DIR removes DIR, never crossing into another file system.
remove_tree() {
	unmount_under "$1"
	rm -rf --one-file-system "$1"
}

start=$(date +%s)
mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
tmp=$out.tmp.$$
remove_tree "$tmp"
trap 'remove_tree "$tmp"' EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$tmp"
tree=$tmp/tree
include=$(echo $packages | tr ' ' ',')
echo "building VM image $out: Debian $suite from $mirror"
debootstrap --variant=minbase --include="$include" "$suite" "$tree" "$mirror"
unmount_under "$tree"

# The machine's own files: its disk, its name, and no resolver or name of the build machine.
echo '/dev/vda / ext4 defaults 0 1' >"$tree/etc/fstab"
echo "vm-$suite" >"$tree/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tvm-%s\n::1\tlocalhost\n' "$suite" >"$tree/etc/hosts"
: >"$tree/etc/resolv.conf"
# The test scaffold. No "toolhost" in its name or command line: tests check that no process of
# toolhost is left.
cat >"$tree/etc/systemd/system/test-agent.service" <<'UNIT'
[Unit]
Description=The test agent on the read-only share disk
Requires=dev-vdb.device
After=local-fs.target dev-vdb.device

[Service]
Type=simple
ExecStartPre=/bin/mkdir -p /mnt/share
ExecStartPre=/bin/sh -c 'mountpoint -q /mnt/share || mount -o ro,noload /dev/vdb /mnt/share'
ExecStart=/mnt/share/agent
Restart=no
OOMScoreAdjust=-1000

[Install]
WantedBy=multi-user.target
UNIT
mkdir -p "$tree/etc/systemd/system/multi-user.target.wants"
ln -sf /etc/systemd/system/test-agent.service "$tree/etc/systemd/system/multi-user.target.wants/test-agent.service"

# The sandboxes' rootfs and session rootfs, where `toolhost rootfs` would have built them (the VM
# has no network). Only each rootfs's own file system: not a /proc mounted in it (the mount
# points stay, empty).
mkdir -p "$tree/var/lib/toolhost"
cp -a --one-file-system "$rootfs" "$tree/var/lib/toolhost/rootfs"
cp -a --one-file-system "$session_rootfs" "$tree/var/lib/toolhost/rootfs-sessions"

# Trim what nobody reads in the VM (the folders stay: packages install into them).
rm -rf "$tree"/var/cache/apt/* "$tree"/var/lib/apt/lists/* "$tree"/var/log/*.log \
	"$tree"/usr/share/doc/* "$tree"/usr/share/man/* "$tree"/usr/share/info/* "$tree"/usr/share/locale/* \
	"$tree"/var/cache/debconf/*-old "$tree"/debootstrap

kernel=$(ls "$tree"/boot/vmlinuz-* 2>/dev/null | sort -V | tail -n 1)
initrd=$(ls "$tree"/boot/initrd.img-* 2>/dev/null | sort -V | tail -n 1)
if [ -z "$kernel" ] || [ -z "$initrd" ]; then
	echo "the image has no kernel or initrd in /boot: $(ls "$tree/boot")" >&2
	exit 1
fi
cp "$kernel" "$tmp/vmlinuz"
cp "$initrd" "$tmp/initrd.img"
echo "$(basename "$kernel")" >"$tmp/kernel-version"

unmount_under "$tree"
mkfs.ext4 -q -L root -d "$tree" "$tmp/disk.img" 6G
used=$(du -sxh "$tree" | cut -f1)
remove_tree "$tree"
echo "$want" >"$tmp/stamp"

if [ -e "$out" ]; then
	remove_tree "$out.old"
	mv "$out" "$out.old"
fi
mv "$tmp" "$out"
trap - EXIT INT TERM HUP
remove_tree "$out.old"
echo "VM image $out built in $(($(date +%s) - start)) s ($used of files, $(basename "$kernel"))"
