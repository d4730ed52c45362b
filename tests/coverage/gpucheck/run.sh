#!/bin/sh
# On the device machine (carry build/covgpu, from prepare.py): each case's ptc_run on each
# of its input folders (one process each), the outputs packed into $OUT/out.tgz.
cd "$(dirname "$0")/../../.."
G=build/covgpu
nvidia-smi -L
for d in $G/*/; do
  for r in $d/run*; do
    timeout 120 ./$d/ptc_run $r --warmup 0 --iters 1 > $r.log 2>&1
    echo "$r rc=$?"; tail -2 $r.log
  done
done
tar czf "$OUT/out.tgz" $G/*/run*/*.npy $G/*/run*.log
