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

samples: setup
	$(PTC) check $(SAMPLES)
	@for f in $(SAMPLES); do $(PTC) run $$f --small || exit 1; done

test: setup
	$(PY) -m pytest -q

.PHONY: setup samples test
