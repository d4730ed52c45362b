# Two entry points, both self-contained on a fresh machine:
#   make samples  -- set up; check every sample, run it on the reference interpreter,
#                    schedule it for every target (plans in out/plans/), build its
#                    CUDA for sm80 and sm90a with nvcc (out/cuda/, out/cuda-sm90/) and
#                    write its HIP for gfx90a and gfx942 (out/hip-gfx90a/, out/hip-gfx942/),
#                    built where a HIP compiler is installed (`make hip-toolchain`)
#   make test     -- set up, install the HIP compilers where they are missing (apt-get; see
#                    tools/hip_toolchain.sh) and run the whole test suite
#   make test-fast -- the tests that run no compiler (the inner loop)
#   make test-torch -- ptc.torch's tier (docs/torch.md); `make torch` installs torch first
# and two for a GPU machine without network (docs/gpu.md):
#   make gpu-wheels -- here, with network: the wheels ptc needs that the GPU image lacks
#   make gpu        -- there: every GPU check in one run (QUICK=1: the 3-minute one)
# Python's bytecode caches stay on (a shell may turn them off): make samples starts ~135
# ptc processes and make test a worker per core, each importing ptc
unexport PYTHONDONTWRITEBYTECODE
VENV   ?= .venv
PY     := $(VENV)/bin/python
PTC    := $(VENV)/bin/ptc
SAMPLES := $(wildcard samples/*.pt)
TARGETS := sm80 sm90 gfx90a gfx942

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

setup: $(VENV)/.installed

# samples/SMOKE: one line per run, `FILE SHAPES TILES` (FILE relative to samples/), e.g.
#   gemm.pt M=200,N=136,K=72 BM=64,BN=64,BK=32
# Blank lines and lines starting with '#' are skipped; TILES may be left out.
# tools/samples.py runs the `ptc` commands (check; run each SMOKE line; every sample's plan
# and build for every target) on every core, a line per finished command.
samples: setup hip-toolchain
	$(PY) tools/samples.py --ptc $(PTC)

# Debian's hipcc and clang-19 build the HIP targets (docs/hip.md); idempotent, quiet
hip-toolchain:
	@bash tools/hip_toolchain.sh

# the whole suite, on every core (pytest-xdist); searches, compiled objects and emulated
# kernels are cached by content (~/.cache/ptc, /tmp/ptc-emulate-*), so a second run is faster
test: setup hip-toolchain
	$(PY) -m pytest -q -n auto

# generated programs against the interpreter on every target (ptc.fuzz), for SECONDS from
# SEED on; new findings are reduced into tests/generated/
SECONDS ?= 600
SEED ?= 0
fuzz: setup
	$(PY) -m ptc.fuzz --seconds $(SECONDS) --seed $(SEED)

# the inner loop: front end, scheduler, lowering, goldens -- no nvcc, hipcc or g++ (a test
# that starts one anyway fails, naming the marker it lacks: tests/conftest.py)
test-fast: setup
	PTC_TEST_NO_COMPILERS=1 $(PY) -m pytest -q -n auto -m "not gpu and not nvcc and not hip and not cxx and not torch"

# ptc kernels inside PyTorch (ptc.torch, issue 23): torch is the optional extra ptc[torch];
# `make torch` installs the release the tier is tested with (a CPU build where pip finds
# one: 865 MB installed, docs/torch.md). The tier skips cleanly without torch.
TORCH_VERSION ?= 2.13.0
torch: setup
	$(PY) -m pip install --quiet 'torch==$(TORCH_VERSION)'

test-torch: setup
	$(PY) -m pytest -q -n auto -m torch tests/test_torch.py tests/test_baselines.py

# ---- on a GPU machine (docs/gpu.md) ---------------------------------------------------------
# The GPU image has Python 3.12 with torch, numpy, click, jinja2, rich, PyYAML, ml-dtypes and
# pytest but no lark and no network: download ptc's requirements (numpy aside: the image's
# torch brings its own) as CPython 3.12 x86-64 wheels into an ignored folder to carry there.
# benchmarks/gpu_env.py installs only those the machine lacks or has too old.
GPU_WHEELS ?= .gpu-wheels
GPU_WHEEL_PACKAGES := lark click jinja2 markupsafe rich markdown-it-py mdurl pygments pyyaml \
                      ml-dtypes
gpu-wheels:
	python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
	  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
	  --platform manylinux2014_x86_64 -d $(GPU_WHEELS) $(GPU_WHEEL_PACKAGES)
	@ls $(GPU_WHEELS)

# bash benchmarks/gpu.sh: pytest -m gpu, compute-sanitizer, benchmarks, tune, calibration and
# the results table in benchmarks/results/DATE-GPU/ (OUT=DIR elsewhere; GPU_FLAGS=... more)
gpu:
	bash benchmarks/gpu.sh $(if $(QUICK),--quick) $(if $(OUT),--out $(OUT)) $(GPU_FLAGS)

.PHONY: setup samples test test-fast test-torch torch fuzz hip-toolchain gpu gpu-wheels
