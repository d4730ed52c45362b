"""`ptc tune`: measure the plans the cost model ranks best on a GPU and keep the fastest in
a tuning database that `ptc compile`, `build`, `bench` and `explain` read (without a GPU).

    key.py         TuningKey: the kernel's canonical source, the dims, the device and the
                   versions of ptc and nvcc that a measurement holds for
    db.py          the database file (ptc-tuning.json): entries, reading, writing, lookup,
                   stale entries and why
    select.py      the trials: the K best-ranked plans and the first choice's tile
                   neighbours the model can hardly tell apart from it
    checkshape.py  the small problem each trial is checked on against the reference
    measure.py     GpuMeasurer: build, check, time with the L2 flushed (needs a GPU)
    tuner.py       run the trials, pick the winner, make its entry
    use.py         choose(): the entry a compilation pins, and the notes it shows

docs/gpu.md describes the file format and the rules.
"""
from .db import (DEFAULT_NAME, FORMAT, Candidate, Entry, Lookup, Measurement, TuningDatabase,
                 TuningError, default_path, dumps, load, loads, lookup, save, stale_reason,
                 with_entry)
from .key import TuningKey, compiler_release, device_sha256, make_key, source_sha256
from .select import Trial, select_trials
from .tuner import Outcome, TuneResult, run_trials
from .use import TuningChoice, choose

__all__ = ["DEFAULT_NAME", "FORMAT", "Candidate", "Entry", "Lookup", "Measurement",
           "TuningDatabase", "TuningError", "default_path", "dumps", "load", "loads",
           "lookup", "save", "stale_reason", "with_entry", "TuningKey", "device_sha256",
           "make_key", "compiler_release", "source_sha256", "Trial", "select_trials", "Outcome",
           "TuneResult", "run_trials", "TuningChoice", "choose"]
