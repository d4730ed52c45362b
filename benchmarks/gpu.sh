#!/usr/bin/env bash
# Every GPU check of ptc in one run (issue 11), on a machine with an NVIDIA GPU and no network:
#
#   bash benchmarks/gpu.sh            # all of it, in at most 9 minutes   (make gpu)
#   bash benchmarks/gpu.sh --quick    # the short version, at most 3 minutes (make gpu QUICK=1)
#   bash benchmarks/gpu.sh --dry-run  # say what each step would run; needs no GPU
#
# Steps (each with a time limit; a step that fails does not stop the others):
#   setup      install what ptc needs and the image lacks (lark, ...) from the wheel folder
#              (.gpu-wheels/, filled by `make gpu-wheels` where there is network) into a
#              folder of its own; ptc itself is imported from this working tree
#   facts      the GPU, driver, clocks, toolchain and package versions -> env.json
#   pytest     pytest -m gpu: every sample built, run and compared with the reference
#   sanitize   compute-sanitizer memcheck, racecheck and synccheck on every sample's
#              harness at its SMOKE shape (pytest and sanitize run side by side)
#   bench      benchmarks/run.py: ptc against cuBLAS, SDPA (FA2 / cuDNN) and Triton at
#              DESIGN.md section 6's shapes, with the model's estimate of every plan
#   layers     benchmarks/layers.py: the LLaMA-3 layer and the Mamba2 block of examples/ from
#              ptc kernels against torch eager and torch.compile, forward (and the layer's
#              forward+backward); not in --quick
#   tune       ptc tune on gemm 8192^3 and flash attention d128 (their measured plans are
#              more rows for the calibration); not in --quick
#   calibrate  ptc calibrate: the sm90 cost-model figures fitted to what was measured
#   report     benchmarks/report.py: results.md and results.csv from all of the above
#
# Everything goes to one folder, benchmarks/results/DATE-GPU/ (or --out DIR): logs/,
# steps.tsv, env.json, pytest.xml, sanitizer.json, bench.json, layers.json, tune-*.json,
# ptc-tuning.json, calibration.json, sm90.calibrated.yaml, results.md, results.csv.
# --tar FILE also packs that folder into FILE (the device tool brings back 8 files at most).
# Exit status: 0 when every step passed, 1 when one failed, 2 for a usage error.
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}
WHEELS=${PTC_GPU_WHEELS:-$ROOT/.gpu-wheels}
SITE=${PTC_GPU_SITE:-/tmp/ptc-gpu-site}
CACHE=${PTC_GPU_CACHE:-/tmp/ptc-gpu-cache}
QUICK=0 DRY=0 OUT="" TAR="" ONLY=""
ALL_STEPS="setup facts pytest sanitize bench layers tune calibrate report"

usage() {
  cat <<EOF
usage: bash benchmarks/gpu.sh [--quick] [--dry-run] [--out DIR] [--tar FILE] [--steps LIST]
  --quick       the short run (at most 3 minutes): fewer workloads, sm90, no tune
  --dry-run     print what every step would run, run nothing that needs a GPU
  --out DIR     the results folder (default: benchmarks/results/DATE-GPU)
  --tar FILE    also pack the results folder into FILE (.tar.gz)
  --steps LIST  only these steps, comma-separated, of: ${ALL_STEPS// /,}
environment: PYTHON (default python3), PTC_GPU_WHEELS (default .gpu-wheels),
  PTC_GPU_SITE (default /tmp/ptc-gpu-site), PTC_GPU_CACHE (default /tmp/ptc-gpu-cache)
EOF
}

bad_usage() { echo "gpu.sh: $1" >&2; usage >&2; exit 2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --dry-run) DRY=1 ;;
    --out) [ $# -ge 2 ] || bad_usage "--out needs a folder"; OUT=$2; shift ;;
    --out=*) OUT=${1#--out=} ;;
    --tar) [ $# -ge 2 ] || bad_usage "--tar needs a file"; TAR=$2; shift ;;
    --tar=*) TAR=${1#--tar=} ;;
    --steps) [ $# -ge 2 ] || bad_usage "--steps needs a list"; ONLY=$2; shift ;;
    --steps=*) ONLY=${1#--steps=} ;;
    -h|--help) usage; exit 0 ;;
    *) bad_usage "unknown argument: $1" ;;
  esac
  shift
done
for s in ${ONLY//,/ }; do
  case " $ALL_STEPS " in *" $s "*) ;; *) bad_usage "unknown step: $s" ;; esac
done

# ---- the GPU, the folder ---------------------------------------------------------------------
GPU=""
if command -v nvidia-smi >/dev/null 2>&1; then
  GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
fi
if [ -z "$GPU" ]; then
  if [ "$DRY" = 1 ]; then
    GPU="no GPU (dry run)"
  else
    echo "gpu.sh: no NVIDIA GPU here (nvidia-smi finds none); --dry-run shows the steps" >&2
    exit 1
  fi
fi
SLUG=$(printf '%s' "$GPU" | tr -cs 'A-Za-z0-9.' '-' | sed 's/^-*//; s/-*$//')
DATE=$(date +%F)
OUT=${OUT:-$ROOT/benchmarks/results/$DATE-$SLUG}
mkdir -p "$OUT/logs" || exit 1
OUT=$(cd "$OUT" && pwd)
STEPS="$OUT/steps.tsv"
printf 'step\tstatus\tseconds\tlimit\tcommand\n' > "$STEPS"

# Time limits in seconds (pytest and sanitize run side by side): 540 s in all, 175 s quick.
# sanitize, bench and layers start nothing new after their budget, so what they did is kept.
if [ "$QUICK" = 1 ]; then
  LIMITS="setup=10 facts=10 pytest=70 sanitize=70 bench=65 layers=0 tune=0 calibrate=10 report=10"
  BUDGETS="sanitize=55 bench=45"
  QFLAG="--quick"
else
  # measured on an H200 (2026-11-28): bench 61 s, tune 15 s, calibrate 8 s; the layers'
  # first (llama3 forward, with its builds and torch.compile) 52 s, so 45 s of budget ran
  # only that one: the layers get what the others did not use
  LIMITS="setup=30 facts=15 pytest=130 sanitize=130 bench=120 layers=160 tune=50 calibrate=20 report=15"
  BUDGETS="sanitize=110 bench=90 layers=110"
  QFLAG=""
fi
limit_of() { local kv; for kv in $LIMITS; do [ "${kv%%=*}" = "$1" ] && echo "${kv#*=}"; done; }
budget_of() { local kv; for kv in $BUDGETS; do [ "${kv%%=*}" = "$1" ] && echo "${kv#*=}"; done; }
wanted() {
  [ "$(limit_of "$1")" != 0 ] || return 1
  [ -z "$ONLY" ] && return 0
  case ",$ONLY," in *",$1,"*) return 0 ;; esac
  return 1
}

export PYTHONPATH="$ROOT:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export PTC_CACHE_DIR="$CACHE"
export PYTHONUNBUFFERED=1
cd "$ROOT" || exit 1

echo "gpu.sh: $GPU, $( [ "$QUICK" = 1 ] && echo quick || echo full ) run$( [ "$DRY" = 1 ] && echo ', dry run' ) -> $OUT"

# run_step NAME DRYABLE COMMAND...: run COMMAND (a bash command line) within the step's time
# limit, its output in logs/NAME.log, its status in steps.tsv. In a dry run a DRYABLE step
# runs its command with --dry-run added (the Python steps say what they would do); the
# others only say what they would run.
FAILED=0
run_step() {
  local name=$1 dryable=$2 cmd=$3 limit status start seconds
  limit=$(limit_of "$name")
  if ! wanted "$name"; then
    printf '%s\tskipped\t0\t%s\t%s\n' "$name" "$limit" "$cmd" >> "$STEPS"
    return 0
  fi
  if [ "$DRY" = 1 ]; then
    echo "[dry-run] $name (at most ${limit} s): $cmd"
    if [ "$dryable" = 1 ]; then
      bash -c "$cmd --dry-run" 2>&1 | sed 's/^/    /'
      status=$([ "${PIPESTATUS[0]}" = 0 ] && echo dry-run || echo failed)
    else
      status=dry-run
    fi
    printf '%s\t%s\t0\t%s\t%s\n' "$name" "$status" "$limit" "$cmd" >> "$STEPS"
    [ "$status" = failed ] && FAILED=1
    return 0
  fi
  echo "== $name (at most ${limit} s): $cmd"
  start=$(date +%s)
  timeout --kill-after=10 "$limit" bash -c "$cmd" > "$OUT/logs/$name.log" 2>&1
  case $? in
    0) status=ok ;;
    124|137) status=timeout ;;
    *) status=failed ;;
  esac
  seconds=$(( $(date +%s) - start ))
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$status" "$seconds" "$limit" "$cmd" >> "$STEPS"
  echo "== $name: $status in ${seconds} s (log: logs/$name.log)"
  tail -n 3 "$OUT/logs/$name.log" | sed 's/^/   /'
  [ "$status" = ok ] || FAILED=1
}

q() { printf '%q' "$1"; }   # one shell word

# ---- the steps -------------------------------------------------------------------------------
run_step setup 1 "$(q "$PY") benchmarks/gpu_env.py install --wheels $(q "$WHEELS") --site $(q "$SITE")"
run_step facts 0 "$(q "$PY") benchmarks/gpu_env.py facts -o $(q "$OUT/env.json") && nvidia-smi -q > $(q "$OUT/logs/nvidia-smi.txt")"

XDIST=""
if [ "$DRY" = 0 ] && "$PY" -c "import xdist" >/dev/null 2>&1; then XDIST="-n 8"; fi
PYTEST="$(q "$PY") -m pytest -m gpu -q -p no:cacheprovider -o addopts= --junitxml=$(q "$OUT/pytest.xml") $XDIST tests/"
[ "$QUICK" = 1 ] && PYTEST="$PYTEST -k 'not sm80'"
SANITIZE="$(q "$PY") benchmarks/sanitize.py --out $(q "$OUT") --work $(q "$CACHE/sanitize") --timeout 60 --budget $(budget_of sanitize)"
[ "$QUICK" = 1 ] && SANITIZE="$SANITIZE --targets sm90 --variants bench-plan"
if [ "$DRY" = 1 ]; then
  run_step pytest 0 "$PYTEST"
  run_step sanitize 1 "$SANITIZE"
else        # both check correctness and share the GPU well: side by side
  run_step pytest 0 "$PYTEST" &
  run_step sanitize 1 "$SANITIZE"
  wait
  awk -F'\t' 'NR > 1 && ($2 == "failed" || $2 == "timeout") { bad = 1 } END { exit !bad }' \
    "$STEPS" && FAILED=1
fi

run_step bench 1 "$(q "$PY") benchmarks/run.py $QFLAG --out $(q "$OUT") --budget $(budget_of bench)"
run_step layers 1 "$(q "$PY") benchmarks/layers.py --device cuda --repeat 5 --budget $(budget_of layers) --json $(q "$OUT/layers.json")"

TUNE="$(q "$PY") -m ptc.cli tune samples/gemm.pt -t sm90 --shape M=8192,N=8192,K=8192 --top 2 --iters 30 --tuning $(q "$OUT/ptc-tuning.json") --record $(q "$OUT/tune-gemm.json")"
TUNE="$TUNE; a=\$?; $(q "$PY") -m ptc.cli tune samples/flash_attn.pt -t sm90 --shape B=2,H=16,S=8192,T=8192,D=128 --top 2 --no-neighbours --iters 30 --tuning $(q "$OUT/ptc-tuning.json") --record $(q "$OUT/tune-flash_attn.json"); [ \$a = 0 ] && [ \$? = 0 ]"
run_step tune 0 "$TUNE"

run_step calibrate 0 "$(q "$PY") -m ptc.cli calibrate $(q "$OUT/bench.json") \$(ls $(q "$OUT")/tune-*.json 2>/dev/null) -t sm90 -o $(q "$OUT/sm90.calibrated.yaml") --json > $(q "$OUT/calibration.json")"

run_step report 1 "$(q "$PY") benchmarks/report.py $(q "$OUT")"

# ---- the end ---------------------------------------------------------------------------------
if [ "$DRY" = 0 ] && [ -f "$OUT/summary.txt" ]; then
  cat "$OUT/summary.txt"
fi
if [ -n "$TAR" ]; then
  if [ "$DRY" = 1 ]; then
    echo "[dry-run] would pack $OUT into $TAR"
  else
    tar -czf "$TAR" -C "$(dirname "$OUT")" "$(basename "$OUT")" && echo "gpu.sh: packed $OUT into $TAR"
  fi
fi
echo "gpu.sh: $( [ "$FAILED" = 0 ] && echo 'every step passed' || echo 'a step failed (see steps.tsv and logs/)' ); results in $OUT"
exit $FAILED
