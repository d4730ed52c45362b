#!/usr/bin/env bash
# Installs the HIP compilers ptc builds gfx90a / gfx942 with (docs/hip.md, "Toolchains"):
# Debian's hipcc (HIP 5.2 headers and runtime, clang 15) and clang 19 (gfx942), with the
# tools clang 19 runs underneath: clang-offload-bundler-19 (clang-tools-19, only a
# *recommended* package of clang-19), ld.lld-19 (lld-19) and the llvm tools (llvm-19).
# `make test` and `make samples` run this first.
#
# What counts is not which packages are installed but whether the compilers build: after
# installing (or finding everything installed) it builds a tiny kernel with every compiler
# and target the tests use -- hipcc for gfx90a, clang++-19 for gfx90a and gfx942 -- to an
# object, to device assembly, and links the object into a shared library, the three
# products of a ptc build. A failed step names the executable that is missing and the
# package that provides it. A passing probe is remembered (by the compilers' paths and
# times) in $PTC_CACHE_DIR or ~/.cache/ptc, so a second run costs nothing.
#
# Where it cannot install (no apt-get, not root and no passwordless sudo) it says why and
# exits 0 -- the HIP build tests then skip -- except under CI (CI set): exit 1. A probe that
# fails after installing always exits 1.
#
#   bash tools/hip_toolchain.sh           # install what is missing, then probe
#   bash tools/hip_toolchain.sh --check   # probe only, install nothing
set -u
PACKAGES=(hipcc clang-19 clang-tools-19 lld-19 llvm-19)
# executable -> the Debian package that provides it (what a failed probe points at)
declare -A PROVIDER=(
  [hipcc]=hipcc [clang++-19]=clang-19 [clang-19]=clang-19 [clang]=clang-19
  [clang-offload-bundler]=clang-tools-19 [clang-offload-bundler-19]=clang-tools-19
  [ld.lld]=lld-19 [ld.lld-19]=lld-19 [lld]=lld-19 [llvm-objcopy]=llvm-19
  [llvm-link]=llvm-19 [llvm-mc]=llvm-19 [hip/hip_runtime.h]=libamdhip64-dev
)
CHECK_ONLY=0
[ "${1:-}" = "--check" ] && CHECK_ONLY=1

say() { echo "hip toolchain: $*" >&2; }

give_up() {
  say "not installed: $1 (the HIP build tests will skip)"
  [ -n "${CI:-}" ] && exit 1
  exit 0
}

# ---- the probe: every compiler x target the tests use, to .o, .s and .so -----------------
# (builtins only, as ptc's kernels: clang builds -nogpulib, without the device library)
PROBE_SOURCE='#include <hip/hip_runtime.h>
__global__ void probe(float* x) { x[__builtin_amdgcn_workitem_id_x()] *= 2.0f; }
extern "C" int probe_launch(float* x) {
  hipLaunchKernelGGL(probe, dim3(1), dim3(64), 0, 0, x);
  return 0;
}'
PROBES=("hipcc gfx90a" "clang++-19 gfx90a" "clang++-19 gfx942")
STAMP_DIR="${PTC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ptc}"
STAMP="$STAMP_DIR/hip-toolchain.ok"

# What the probe's result depends on: each tool's path and modification time.
fingerprint() {
  local tool path
  for tool in hipcc clang++-19 clang-offload-bundler-19 ld.lld-19 llvm-objcopy-19; do
    path=$(command -v "$tool" 2>/dev/null) || { echo "$tool missing"; continue; }
    echo "$tool $(stat -L -c '%n %Y %s' "$path")"
  done
}

# The missing executable a compiler's error names, and its package.
diagnose() {
  local log=$1 exe
  exe=$(grep -oE 'Executable "[^"]+" doesn.t exist' "$log" | head -1 | sed -E 's/Executable "([^"]+)".*/\1/')
  [ -z "$exe" ] && exe=$(grep -oE "unable to execute command: [^ ]+" "$log" | head -1 | awk '{print $NF}')
  [ -z "$exe" ] && exe=$(grep -oE "'hip/hip_runtime.h' file not found" "$log" | head -1 | cut -d"'" -f2)
  [ -z "$exe" ] && exe=$(grep -oE '(^|/)(ld\.lld[-0-9]*|lld)[^ ]*: not found' "$log" | head -1 | sed 's/: not found//')
  if [ -n "$exe" ]; then
    local base=${exe##*/}
    echo "missing $base (package ${PROVIDER[$base]:-${PROVIDER[${base%-19}]:-unknown}})"
  else
    grep -m1 -E "error" "$log" || tail -n 1 "$log"
  fi
}

probe_one() {   # compiler arch workdir -> 0, or 1 with a one-line reason on stdout
  local cc=$1 arch=$2 dir=$3 env=() compile link log
  if ! command -v "$cc" >/dev/null; then
    echo "$cc for $arch: $cc is not on PATH (package ${PROVIDER[$cc]})"; return 1
  fi
  if [ "$cc" = hipcc ]; then
    env=(env HIP_PLATFORM=amd); compile=("$cc" -std=c++17 -O3 "--offload-arch=$arch")
    link=("$cc" "--offload-arch=$arch")
  else
    env=(env); compile=("$cc" -x hip -std=c++17 -O3 -nogpulib "--offload-arch=$arch")
    link=("$cc" --hip-link "--offload-arch=$arch")
  fi
  log="$dir/$cc.$arch.log"
  local name="$dir/probe.$cc.$arch"
  if ! "${env[@]}" "${compile[@]}" -fPIC -c "$dir/probe.hip" -o "$name.o" >"$log" 2>&1; then
    echo "$cc for $arch, object: $(diagnose "$log")"; return 1
  fi
  if ! "${env[@]}" "${compile[@]}" --offload-device-only -S "$dir/probe.hip" -o "$name.s" >"$log" 2>&1 ||
     ! grep -q "v_" "$name.s"; then
    echo "$cc for $arch, device assembly: $(diagnose "$log")"; return 1
  fi
  if ! "${env[@]}" "${link[@]}" -shared "$name.o" -o "$name.so" >"$log" 2>&1; then
    echo "$cc for $arch, shared library: $(diagnose "$log")"; return 1
  fi
  return 0
}

probe() {   # 0 when every compiler builds every product; the failures on stderr
  local print=$(fingerprint)
  if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$print" ]; then
    return 0
  fi
  local dir status=0 why p
  dir=$(mktemp -d "${TMPDIR:-/tmp}/ptc-hip-probe.XXXXXX")
  printf '%s\n' "$PROBE_SOURCE" > "$dir/probe.hip"
  for p in "${PROBES[@]}"; do
    # shellcheck disable=SC2086
    why=$(probe_one $p "$dir") || { say "probe failed: $why"; status=1; }
  done
  rm -rf "$dir"
  if [ $status = 0 ]; then
    mkdir -p "$STAMP_DIR" && printf '%s\n' "$print" > "$STAMP"
  else
    rm -f "$STAMP"
  fi
  return $status
}

if [ $CHECK_ONLY = 1 ]; then
  probe && { say "ok: ${PROBES[*]/%/;} each to .o, .s and .so"; exit 0; }
  exit 1
fi
probe 2>/dev/null && exit 0

# ---- install what is missing ------------------------------------------------------------
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
say "apt-get install ${PACKAGES[*]} (a few minutes, ~1 GB; log: $LOG)"
apt() { "${SUDO[@]}" apt-get "$@" >>"$LOG" 2>&1; }
# a fresh image may have no package lists yet: update once if the first try fails
apt install -y -q --no-install-recommends "${PACKAGES[@]}" ||
  { apt update -q && apt install -y -q --no-install-recommends "${PACKAGES[@]}"; } ||
  give_up "apt-get failed (see $LOG)"
if ! probe; then
  say "installed ${PACKAGES[*]}, but the compilers above do not build (see the probe failures)"
  exit 1
fi
say "ok: ${PROBES[*]/%/;} each to .o, .s and .so"
