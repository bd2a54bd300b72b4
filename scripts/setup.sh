#!/usr/bin/env bash
# Install what sweepfs needs from Debian's packages (only what is missing)
# and build it. Used by demo.sh and test.sh; safe to run again.
#
#   scripts/setup.sh [BUILD_DIR [MESON_OPTIONS...]]
#
# BUILD_DIR defaults to ./build. Needs root (or sudo) only when packages
# are missing. A fuzzing build (-Dfuzz=enabled, with CC=clang) also gets
# clang, its libFuzzer runtime and llvm-symbolizer; a test build
# (-Dtests=enabled) the programs the integration tests run.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
shift || true

packages=(
	build-essential pkg-config meson ninja-build
	libfuse3-dev fuse3 liburing-dev libuv1-dev libsodium-dev libmicrohttpd-dev
	libcurl4-openssl-dev libjson-c-dev
	protobuf-c-compiler libprotobuf-c-dev libcmocka-dev
	libsystemd-dev scdoc
	python3 util-linux procps psmisc
)
for opt in "$@"; do
	case $opt in
	-Dfuzz=enabled)
		packages+=(clang libclang-rt-dev llvm) ;;
	-Dtests=enabled)
		# What the integration tests drive besides the mount: fio
		# (data), strace (system call counts), ip (client machines
		# in network namespaces), chattr (rm_compare), gnuplot
		# (compare-delete's plot), script (progress), man and groff
		# (install), systemd-analyze (units), dpkg-buildpackage and
		# debhelper (package), Prometheus' own text parser (metrics)
		# and tmux (sweepfs top), etcd (a group of masters), openssl
		# (group_auth's TLS certificates).
		packages+=(fio strace iproute2 e2fsprogs gnuplot-nox bsdutils
			man-db groff-base systemd dpkg-dev debhelper
			python3-prometheus-client tmux etcd-server openssl) ;;
	esac
done

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing+=("$p")
done
if ((${#missing[@]})); then
	echo "setup: installing ${missing[*]}"
	sudo=""
	[[ $(id -u) -eq 0 ]] || sudo=sudo
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [[ ! -f $build/build.ninja ]]; then
	meson setup "$build" "$top" "$@"
elif (($#)); then
	meson configure "$build" "$@"
fi
ninja -C "$build"
