#!/usr/bin/env bash
# Builds every probe with every compiler setup ptc meets, device code only, and prints:
# per (setup, target, probe) whether it built (and whether that was expected), the MFMA
# mnemonics in the ISA, then the resource readout of the clang-19 builds.
#   bash tools/hip_probe/run.sh [OUT_DIR]               (default /tmp/hip_probe)
# Needs Debian's `hipcc` (HIP 5.2, clang 15) and `clang-19 lld-19` (docs/hip.md).
#   HIP_INCLUDE=/path/include bash run.sh   also builds against newer HIP headers
#   ROCM=/opt/rocm bash run.sh              only the ROCm hipcc setup (a machine with ROCm)
# Exit status 0 when every build came out as expected.
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-/tmp/hip_probe}"
mkdir -p "$OUT"
PROBES=(basics mfma xlane lds mainloop)
export HIP_PLATFORM=amd        # nvcc is on the PATH: without this, hipcc runs nvcc

COMMON="-std=c++17 -O3 --cuda-device-only --no-gpu-bundle-output -save-temps"
DEVLIBS=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode      # Debian's ROCm 5.2 device libraries
# setup | compiler and flags (--offload-arch=T is appended) | targets ("!T": must fail)
SETUPS=()
if [ -n "${ROCM:-}" ]; then
  SETUPS+=("rocm|$ROCM/bin/hipcc $COMMON|gfx90a gfx942")
else
  SETUPS+=(
    "hipcc5.2|hipcc $COMMON|gfx90a gfx940 !gfx942"
    "clang19+hip5.2|clang++-19 -x hip $COMMON --rocm-device-lib-path=$DEVLIBS|gfx90a gfx940 !gfx942"
    "clang19+hip5.2-nogpulib|clang++-19 -x hip $COMMON -nogpulib|gfx90a gfx942"
    "clang19-bare|clang++-19 -x hip $COMMON -nogpuinc -nogpulib|gfx90a gfx942"
    "clang15-bare|clang++-15 -x hip $COMMON -nogpuinc -nogpulib|gfx90a gfx940"
  )
  [ -n "${HIP_INCLUDE:-}" ] && SETUPS+=(
    "clang19+hipnew-nogpulib|clang++-19 -x hip $COMMON -isystem $HIP_INCLUDE -nogpulib|gfx90a gfx942")
fi

ok=0; expected_fail=0; bad=0
printf "%-24s %-7s %-9s %-6s %s\n" setup target probe build "mfma in the ISA"
for s in "${SETUPS[@]}"; do
  IFS='|' read -r name cmd targets <<<"$s"
  for t in $targets; do
    must_fail=no; [ "${t#!}" != "$t" ] && { must_fail=yes; t="${t#!}"; }
    dir="$OUT/$name/$t"; mkdir -p "$dir"
    for p in "${PROBES[@]}"; do
      log="$dir/$p.log"
      if (cd "$dir" && $cmd --offload-arch="$t" -c "$HERE/$p.hip" -o "$p.o") >"$log" 2>&1
      then r=ok; else r=fail; fi
      asm=$(ls "$dir/$p"-hip-amdgcn-amd-amdhsa-*.s 2>/dev/null)
      mfma=$( [ -n "$asm" ] && grep -ho "v_mfma_[a-z0-9_]*" $asm | sort -u | tr '\n' ' ')
      note=""
      if [ $r = ok ] && [ $must_fail = no ]; then
        ok=$((ok + 1))
        case $p in mfma|mainloop) [ -z "$mfma" ] && { note="NO MFMA"; bad=$((bad + 1)); } ;; esac
      elif [ $r = fail ] && [ $must_fail = yes ]; then
        expected_fail=$((expected_fail + 1)); r="fail*"
      else
        bad=$((bad + 1)); note="UNEXPECTED"
      fi
      printf "%-24s %-7s %-9s %-6s %s%s\n" "$name" "$t" "$p" "$r" "$mfma" "$note"
      [ $r != ok ] && grep -m1 "error" "$log" | cut -c1-150 | sed 's/^/      /'
    done
  done
done
echo "($ok built, $expected_fail failed as expected (*), $bad unexpected)"

echo
echo "== resource usage, clang-19 without HIP headers or device library (readout.py)"
for t in gfx90a gfx942; do
  ls "$OUT"/clang19-bare/$t/*-hip-amdgcn-amd-amdhsa-$t.s >/dev/null 2>&1 &&
    "${PYTHON:-$HERE/../../.venv/bin/python}" "$HERE/readout.py" "$OUT"/clang19-bare/$t/*-hip-amdgcn-amd-amdhsa-$t.s
done
[ $bad -eq 0 ]
