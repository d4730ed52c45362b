"""Device code every backend shares lives once (issue 24, part 3): templates/common holds it
(ptc_numerics.h: the language's integer semantics, FP8 codes and conversions), each backend's
ptc_types header includes it after its own primitives, and every build folder and emulated
build has it beside the backend's headers.

The duplicate finder compares the code lines (comments, preprocessor lines and lone braces
left out) of ptc/targets/cuda/templates and ptc/targets/hip/templates: a run of RUN
identical lines in both is code written twice. What is still duplicated is listed in KNOWN, per pair of files, with why it is
not shared yet; the count is strict, so moving code into templates/common shows as a failure
until the entry shrinks, and a new copy fails at once."""
from __future__ import annotations

from pathlib import Path

import pytest

from ptc import targets
from ptc.device_headers import SHARED, device_headers
from ptc.render import backend_headers
from ptc.runtime.build import device_headers as build_headers

RUN = 4
# (cuda file, hip file): duplicated runs left, and why
KNOWN = {
    ("global_to_shared.cuh", "global_to_shared.h"): (
        3, "copy_gathered_sync's signature: HIP's also copies into a transposed (K8) tile"),
    ("mma_sync.cuh", "mfma.h"): (
        2, "the heads of SharedA / SharedB, whose loads take the atom's registers per "
           "backend (ldmatrix fragments, I::REGS)"),
    ("ptc_types.cuh", "ptc_types.h"): (
        6, "the emulated ld_shared / st_shared, beside each backend's own for the GPU (CUDA's "
           "subtracts the shared window's base, HIP's LDS offsets start at 0)"),
    ("shared_to_register_ldmatrix.cuh", "mfma.h"): (
        1, "the swizzled fragment offset's template head"),
}


def code_lines(path: Path) -> list[str]:
    out = []
    for line in path.read_text().splitlines():
        s = line.strip()
        if s and not s.startswith(("//", "#")) and s not in ("{", "}", "};"):
            out.append(s)
    return out


def duplicated_runs(a: list[str], b: list[str], run: int = RUN) -> int:
    """How many runs of `run` consecutive lines of `b` also occur in `a`."""
    seen = {tuple(a[i:i + run]) for i in range(len(a) - run + 1)}
    return sum(tuple(b[i:i + run]) in seen for i in range(len(b) - run + 1))


def test_the_duplicate_finder_sees_a_copy_and_not_a_difference():
    code = ["int f(int a) {", "int b = a + 1;", "b = b * 2;", "return b;", "int g();"]
    assert duplicated_runs(code, ["// other", *code[:4], "x;"]) == 1
    assert duplicated_runs(code, ["int f(int a) {", "int b = a + 2;", "b = b * 2;",
                                  "return b;"]) == 0


def test_device_code_is_written_once_or_listed_with_why():
    found = {}
    for cuda in sorted(targets.backend("cuda").templates.glob("*.cuh")):
        for hip in sorted(targets.backend("hip").templates.glob("*.h")):
            n = duplicated_runs(code_lines(cuda), code_lines(hip))
            if n:
                found[(cuda.name, hip.name)] = n
    assert found == {pair: n for pair, (n, _) in KNOWN.items()}


def test_no_shared_function_is_defined_again_by_a_backend():
    shared = code_lines(SHARED / "ptc_numerics.h")
    definitions = [line for line in shared if "__forceinline__" in line and "(" in line]
    assert len(definitions) > 20
    for folder, suffix in (("cuda", "*.cuh"), ("hip", "*.h")):
        for header in targets.backend(folder).templates.glob(suffix):
            again = set(definitions) & set(code_lines(header))
            assert not again, f"{header.name} defines again: {sorted(again)[:3]}"


@pytest.mark.parametrize("backend", ["cuda", "hip"])
def test_every_build_has_the_shared_header(backend):
    names = [h.name for h in backend_headers(backend)]
    assert "ptc_numerics.h" in names and len(names) == len(set(names))
    assert [h.name for h in build_headers(backend)] == names == \
        [h.name for h in device_headers(targets.backend(backend).template_folders())]
    types = "ptc_types.cuh" if backend == "cuda" else "ptc_types.h"
    assert '#include "ptc_numerics.h"' in (targets.backend(backend).templates / types).read_text()
