# Two entry points, both self-contained on a fresh machine:
#   make samples  -- set up, check every sample and run it on the reference interpreter
#   make test     -- set up and run the whole test suite
VENV   ?= .venv
PY     := $(VENV)/bin/python
PTC    := $(VENV)/bin/ptc
SAMPLES := $(wildcard samples/*.pt)

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

setup: $(VENV)/.installed

# samples/SMOKE: one line per run, `FILE SHAPES TILES` (FILE relative to samples/), e.g.
#   gemm.pt M=200,N=136,K=72 BM=64,BN=64,BK=32
# Blank lines and lines starting with '#' are skipped; TILES may be left out.
samples: setup
	$(PTC) check $(SAMPLES)
	@test -f samples/SMOKE || { echo "make: samples/SMOKE is missing" >&2; exit 1; }
	@while read -r file shapes tiles rest || [ -n "$$file" ]; do \
	  case "$$file" in ''|'#'*) continue;; esac; \
	  set -- samples/$$file $${shapes:+--shape $$shapes} $${tiles:+--tile $$tiles}; \
	  echo "$(PTC) run $$*"; \
	  $(PTC) run "$$@" || exit 1; \
	done < samples/SMOKE

test: setup
	$(PY) -m pytest -q

.PHONY: setup samples test
