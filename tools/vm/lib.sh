# shellcheck shell=bash
# Shared settings of the tt-arbiter VM harness. Sourced, not run.
#
# Everything heavy (the Debian 13 build root, the kernel source, the test
# kernels) lives in $TT_CACHE, outside the clone, under directories whose
# names are hashes of what produced them. Changing a package list or a
# config fragment changes the key, so it is rebuilt; nothing else is.

set -euo pipefail

TT_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TT_CACHE=${TT_CACHE:-/var/cache/tt-arbiter}
TT_SUITE=trixie
TT_KERNEL_SERIES=7.3
TT_LLVM=-19

# Packages of the build root. Part of the build root's cache key.
TT_BUILDROOT_PACKAGES="clang-19 lld-19 llvm-19 rustc rust-src bindgen \
rust-clippy rustfmt gcc gcc-multilib libc6-dev-i386 g++ make flex bison bc \
libelf-dev libssl-dev cpio kmod python3 xz-utils ca-certificates dwarves openssl \
busybox-static"
# From trixie-backports: QEMU 11.1, whose vfio-user-pci client device
# attaches the emulated cards (Debian 13's own QEMU 10.0 has none).
TT_BUILDROOT_BACKPORTS="qemu-system-x86"

tt_log() { printf '[tt] %s\n' "$*" >&2; }
tt_die() { printf '[tt] error: %s\n' "$*" >&2; exit 1; }

tt_hash() { sha256sum | cut -c1-16; }

# The shell command line (for the VM's /bin/sh -c) that runs a command
# given as words: one word is a command line already (it may use the VM's
# variables, pipes and lists); several are a program and its arguments,
# each quoted so that it reaches the program as given. (Joining the words
# with spaces, as ssh does, turned `sh -c 'echo A; echo B'` into
# `sh -c echo A; echo B`: an empty line, and output that was never asked
# for.)
tt_command_line() {
	if [ "$#" -le 1 ]; then
		printf '%s' "${1:-}"
		return
	fi
	local word sep=
	for word in "$@"; do
		printf "%s'%s'" "$sep" "${word//\'/\'\\\'\'}"
		sep=' '
	done
}

tt_buildroot_key() {
	printf '%s\n%s\n%s\n' "$TT_SUITE" "$TT_BUILDROOT_PACKAGES" "$TT_BUILDROOT_BACKPORTS" | tt_hash
}

TT_ROOT="$TT_CACHE/buildroot-$(tt_buildroot_key)"

# Runs a command inside the build root, with the clone and the cache
# bind-mounted at the same paths as outside.
tt_chroot() {
	tt_mounts
	chroot "$TT_ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" "$@"
}

tt_mounts() {
	local m
	mountpoint -q "$TT_ROOT/proc" || mount -t proc proc "$TT_ROOT/proc"
	mountpoint -q "$TT_ROOT/dev" || mount --bind /dev "$TT_ROOT/dev"
	for m in "$TT_TOP" "$TT_CACHE"; do
		mkdir -p "$TT_ROOT$m"
		# A mount left by an earlier clone at the same path may show a
		# directory that was deleted since: bind the current one.
		if mountpoint -q "$TT_ROOT$m" &&
			[ "$(stat -c %d:%i "$m")" != "$(stat -c %d:%i "$TT_ROOT$m" 2>/dev/null)" ]; then
			umount -l "$TT_ROOT$m"
		fi
		mountpoint -q "$TT_ROOT$m" || mount --bind "$m" "$TT_ROOT$m"
	done
}

# True when process $1 ended within $2 seconds (it is still to be reaped).
tt_wait_timeout() {
	local i
	for ((i = 0; i < $2; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 1
	done
	! kill -0 "$1" 2>/dev/null
}

# The Debian archive this machine's apt uses (its debian sources file), so
# no host name is written into the scripts.
tt_archive_url() {
	local url
	url=$(grep -hs '^URIs:' /etc/apt/sources.list.d/debian.sources | head -n1 | awk '{print $2}')
	[ -n "$url" ] || url=$(grep -hs '^deb ' /etc/apt/sources.list | grep -v security | head -n1 | awk '{print $2}')
	[ -n "$url" ] || tt_die "cannot find the Debian archive URL in apt's sources"
	printf '%s\n' "$url"
}

# Makes DIR a minimal Debian $TT_SUITE root from this machine's archive,
# with $TT_SUITE-backports in its sources, and installs packages in it:
# each argument after LOG is the argument list of one
# `apt-get install --no-install-recommends` (split on spaces), run in
# order. debootstrap's output goes to LOG.debootstrap, apt's to LOG.
tt_debian_root() {
	local dir=$1 log=$2 url args
	shift 2
	url=$(tt_archive_url)
	debootstrap --variant=minbase "$TT_SUITE" "$dir" "$url" >"$log.debootstrap" 2>&1 ||
		{ tail -n 30 "$log.debootstrap"; tt_die "debootstrap failed"; }
	cat >"$dir/etc/apt/sources.list" <<SRC
deb $url $TT_SUITE main
deb $url $TT_SUITE-backports main
SRC
	mount -t proc proc "$dir/proc"
	# shellcheck disable=SC2064 # $dir is fixed now
	trap "umount -l '$dir/proc' 2>/dev/null || true" EXIT
	chroot "$dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin apt-get update -qq
	: >"$log"
	for args in "$@"; do
		# shellcheck disable=SC2086 # a list of apt-get arguments
		chroot "$dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq --no-install-recommends $args >>"$log" 2>&1 ||
			{ tail -n 30 "$log"; tt_die "apt-get install $args failed (log: $log)"; }
	done
	chroot "$dir" apt-get clean
	umount -l "$dir/proc"
	trap - EXIT
}

tt_require_root() {
	[ "$(id -u)" = 0 ] || tt_die "the harness needs root (debootstrap, chroot, mounts); run it as root"
}
