"""Coverage of the lowering's decision space, by construction (issue 20; docs/testing.md).

    forms = forms_of(lowered, device)            # the instruction forms a lowered kernel uses
    table = universe(device)                     # every form the target can produce: Form ->
                                                 #   None (reachable) or why it never is
    results = run_catalogue(CATALOGUE)           # each case emulated against the interpreter
    rows = coverage(results)                     # per target and form: the case covering it

`forms.py` reads forms off the lowered IR, `universe.py` enumerates them from the device
descriptions, ptc.lower.atoms and the renderers' declared capabilities (with the one table of
unreachable combinations and why), `cases.py` holds the catalogue of small kernels x tiles x
plan choices x shapes that exercises every reachable form, and runs them. `ptc coverage`
prints the table; tests/test_coverage.py fails on a reachable form no passing case covers.
"""
from .forms import Form, forms_of
from .universe import reachable, universe

__all__ = ["Form", "forms_of", "universe", "reachable"]
