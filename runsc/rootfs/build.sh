#!/bin/sh
# build.sh builds the root filesystem the python kind's sandboxes run on: a minimal Debian
# (bookworm) with python3 and the Debian packages named on the command line, trimmed of what a
# sandbox never reads. It rebuilds only when this script or the package list changed.
#
#   runsc/rootfs/build.sh OUT_DIR [DEBIAN_PACKAGE...]
#
# The Debian mirror is the machine's own (read from /etc/apt/sources.list.d/*.sources or
# /etc/apt/sources.list); set TOOLHOST_DEBIAN_MIRROR to use another one.
set -eu

if [ "$#" -lt 1 ]; then
	echo "usage: $0 OUT_DIR [DEBIAN_PACKAGE...]" >&2
	exit 2
fi
out=$1
shift
suite=bookworm

if [ "$(id -u)" != 0 ]; then
	echo "building the rootfs needs root (debootstrap); run it as root" >&2
	exit 1
fi

# The packages, sorted and without duplicates, so the same list in another order is the same rootfs.
packages=$(for p in "$@"; do echo "$p"; done | sed '/^$/d' | sort -u | tr '\n' ' ' | sed 's/ $//')
for p in $packages; do
	case $p in
	*[!a-z0-9.+-]*) echo "\"$p\" isn't a Debian package name" >&2; exit 2 ;;
	esac
done

want=$( (cat "$0"; echo "suite=$suite"; echo "packages=$packages") | sha256sum | cut -d' ' -f1)
stamp=$out/.toolhost-rootfs
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$out/usr/bin/python3" ]; then
	echo "rootfs $out is up to date"
	exit 0
fi

if ! command -v debootstrap >/dev/null 2>&1; then
	echo "installing debootstrap"
	apt-get update -q
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap
fi

mirror=${TOOLHOST_DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
	# deb822 files: the URIs of the first stanza whose Suites name our suite (not -security).
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		mirror=$(awk -v suite="$suite" '
			/^[ \t]*$/ { if (uri != "" && ok) { print uri; exit } uri = ""; ok = 0; next }
			tolower($1) == "uris:" { uri = $2 }
			tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == suite) ok = 1 }
			END { if (uri != "" && ok) print uri }' "$f" | head -n 1)
		[ -n "$mirror" ] && break
	done
fi
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
	mirror=$(awk -v suite="$suite" '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { if ($(i+1) == suite) { print $i; exit } } }' /etc/apt/sources.list)
fi
if [ -z "$mirror" ]; then
	echo "no Debian mirror for $suite found in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list; set TOOLHOST_DEBIAN_MIRROR" >&2
	exit 1
fi

include=python3-minimal,python3

mkdir -p "$(dirname "$out")"
tmp=$out.tmp.$$
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT
echo "building rootfs $out from $mirror ($suite, packages: python3 ${packages:-})"
debootstrap --variant=minbase --include="$include" "$suite" "$tmp" "$mirror"
# debootstrap can leave the target's /proc mounted (seen here): nothing of this machine may stay
# in a rootfs, and a later rm -rf or cp -a must not walk into the machine's /proc.
awk -v t="$tmp" '$5 == t || index($5, t "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r |
	while read -r m; do umount -l "$m"; done
# The packages, with apt in the new tree rather than debootstrap --include: debootstrap takes the
# first of a dependency's alternatives even when the list names another (matplotlib's fonttools
# needs "python3-scipy | python3-munkres": naming munkres keeps scipy, pythran and a C++ compiler
# out only with apt), and apt leaves recommended packages out as debootstrap does. The tree's
# sources.list is debootstrap's (the mirror above); the lists go with the trim below.
if [ -n "$packages" ]; then
	chroot "$tmp" apt-get -q update
	# shellcheck disable=SC2086 # one word a package
	DEBIAN_FRONTEND=noninteractive chroot "$tmp" apt-get -q -y --no-install-recommends install $packages
	chroot "$tmp" apt-get clean
	awk -v t="$tmp" '$5 == t || index($5, t "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r |
		while read -r m; do umount -l "$m"; done
fi

# Trim what a sandbox never reads.
rm -rf "$tmp"/var/cache/apt/* "$tmp"/var/lib/apt/lists/* "$tmp"/var/log/* \
	"$tmp"/usr/share/doc "$tmp"/usr/share/man "$tmp"/usr/share/info "$tmp"/usr/share/locale \
	"$tmp"/usr/share/lintian "$tmp"/usr/share/linda "$tmp"/var/cache/debconf/*-old \
	"$tmp"/debootstrap
# Nothing of the build machine: its resolver and name stay out of the sandboxes.
: >"$tmp/etc/resolv.conf"
chmod 0644 "$tmp/etc/resolv.conf"
echo sandbox >"$tmp/etc/hostname"
printf '127.0.0.1\tlocalhost\n::1\tlocalhost\n' >"$tmp/etc/hosts"
# Mount points of the sandbox: the run's writable folder and the runner's folder.
mkdir -p "$tmp"/work "$tmp"/toolhost
echo "$want" >"$tmp/.toolhost-rootfs"

if [ -e "$out" ]; then
	rm -rf "$out.old"
	mv "$out" "$out.old"
fi
mv "$tmp" "$out"
trap - EXIT
rm -rf "$out.old"
echo "rootfs $out built ($(du -sh "$out" | cut -f1))"
