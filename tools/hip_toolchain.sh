#!/usr/bin/env bash
# Installs the HIP compilers ptc builds gfx90a / gfx942 with (docs/hip.md, "Toolchains"):
# Debian's hipcc (HIP 5.2 headers and runtime, clang 15) and clang 19 (gfx942; lld and the
# llvm tools beside it). `make test` runs this first, so that the README's test command
# builds HIP on a fresh Debian machine too.
#
# Idempotent and quiet: nothing happens when the packages are installed. It needs apt-get
# and root (or passwordless sudo). Where it cannot install, it says why and exits 0 -- the
# HIP build tests then skip -- except under CI (CI set), where they must run: exit 1.
set -u
PACKAGES=(hipcc clang-19 lld-19 llvm-19)

give_up() {
  echo "hip toolchain: not installed: $1 (the HIP build tests will skip)" >&2
  [ -n "${CI:-}" ] && exit 1
  exit 0
}

installed() {
  command -v dpkg-query >/dev/null || return 1
  local status
  status=$(dpkg-query -W -f='${Status}\n' "${PACKAGES[@]}" 2>/dev/null | grep -c " installed$")
  [ "$status" -eq "${#PACKAGES[@]}" ]
}

installed && exit 0
command -v apt-get >/dev/null || give_up "no apt-get on this machine (install ${PACKAGES[*]}, or ROCm)"
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
  else
    give_up "not root and no passwordless sudo: run \`sudo apt-get install -y --no-install-recommends ${PACKAGES[*]}\`"
  fi
fi
export DEBIAN_FRONTEND=noninteractive
LOG=$(mktemp "${TMPDIR:-/tmp}/ptc-hip-toolchain.XXXXXX.log")
echo "hip toolchain: apt-get install ${PACKAGES[*]} (a few minutes, ~1 GB; log: $LOG)" >&2
apt() { "${SUDO[@]}" apt-get "$@" >>"$LOG" 2>&1; }
# a fresh image may have no package lists yet: update once if the first try fails
apt install -y -q --no-install-recommends "${PACKAGES[@]}" ||
  { apt update -q && apt install -y -q --no-install-recommends "${PACKAGES[@]}"; } ||
  give_up "apt-get failed (see $LOG)"
installed || give_up "apt-get ran, but ${PACKAGES[*]} are not all installed (see $LOG)"
