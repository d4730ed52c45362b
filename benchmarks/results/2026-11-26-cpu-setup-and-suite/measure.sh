#!/bin/bash
# issue 19: the README's commands from a fresh clone on a machine without the HIP packages
set -u
LOG=/tmp/measure.log   # copied here as measure.log
exec > >(tee -a $LOG) 2>&1
echo "== $(date -u) start; $(nproc) cores; load $(cat /proc/loadavg)"
apt-get remove -y -q hipcc clang-19 clang-tools-19 lld-19 llvm-19 >/tmp/apt-remove.log 2>&1; echo "apt-get remove: $?"
for x in hipcc clang++-19 clang-offload-bundler-19 ld.lld-19 llvm-objdump-19; do printf '%s: %s\n' $x "$(command -v $x || echo absent)"; done
rm -rf ~/.cache/ptc /tmp/ptc-emulate-0 /tmp/fresh
git clone -q /work/main /tmp/fresh && cd /tmp/fresh && git log --oneline -1
t() { local s=$(date +%s.%N); "$@"; local rc=$?; echo "== $* : exit $rc, $(echo "$(date +%s.%N) - $s" | bc) s"; }
t make samples > /tmp/m-samples.log 2>&1; tail -5 /tmp/m-samples.log
find ~/.cache/ptc -mindepth 1 -maxdepth 1 ! -name hip-toolchain.ok -exec rm -rf {} +; rm -rf /tmp/ptc-emulate-0   # keep the HIP stamp
ls ~/.cache/ptc
t make test > /tmp/m-test-cold.log 2>&1; tail -3 /tmp/m-test-cold.log
t make test > /tmp/m-test-warm.log 2>&1; tail -3 /tmp/m-test-warm.log
t make test-fast > /tmp/m-test-fast.log 2>&1; tail -3 /tmp/m-test-fast.log
.venv/bin/python -m pytest --collect-only -q 2>/dev/null | tail -1
echo "== $(date -u) end"
