#!/bin/sh
# On the device machine (carry build/gpucheck, from prepare.py): the issue-20 kernels, and
# the TMA-store experiments (one process each: a trap poisons the context).
cd "$(dirname "$0")/../../.."
G=build/gpucheck
nvidia-smi -L
for d in bn8 bn8-old tn-bn8 tn-bn16 tn-bn32 nt-bk16 nt-bk32 nn-bk64; do
  timeout 60 ./$G/$d/ptc_run $G/$d --warmup 1 --iters 3 > /dev/null 2>&1
  echo "$d rc=$?"
  cp $G/$d/C.npy "$OUT/C-$d.npy" 2>/dev/null
done
for c in "48 12" "-8 0" "0 -4" "-40 0" "64 0" "0 16"; do
  timeout 30 ./$G/tma_store $c || echo "tma_store $c rc=$?"
done
