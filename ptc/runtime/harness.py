"""harness.cu / harness.hip and signature.cc: the host side of a built kernel.

The harness is rendered from `templates/host/harness.j2` through the backend's own template
(harness.cu.j2 and harness.hip.j2 in ptc/targets/cuda/templates and ptc/targets/hip/
templates), which names its runtime's API (cudaMalloc, hipMalloc, ...). It gives a C ABI (ptc_malloc, ptc_memcpy_*, ptc_memset,
ptc_run_once, ptc_time, ...) for ctypes, and a `main` that runs the kernel on .npy files
(see the template's head comment). It is the same text for every kernel: what it needs to
know of one (its tensors, scalars, dims) are the tables of signature.cc
(templates/host/signature.cc.j2, declared in ptc_signature.h), a file of data. So the
harness, nvcc's and hipcc's slowest compile of a build, is compiled once per machine and
compiler (ptc.runtime.object_cache), and each kernel adds a compile of its tables.

Python builds a plain context here; the templates only print it.
"""
from __future__ import annotations

import functools
from pathlib import Path

from ..version import __version__
from .signature import Signature

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
DTYPE_ENUM = {"f16": "F16", "bf16": "BF16", "f32": "F32", "i32": "I32", "bool": "BOOL",
              "i8": "I8", "u8": "U8", "f8e4m3": "F8E4M3", "f8e5m2": "F8E5M2"}


@functools.lru_cache(maxsize=None)
def environment(folders: tuple[Path, ...] = ()):
    """Templates from a backend's template folders (none: only the shared ones), then the
    shared ones of templates/host."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(f) for f in folders] + [str(TEMPLATES / "host")]),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True, autoescape=False)


def c_string(text: str) -> str:
    """`text` for the inside of a C string literal."""
    return "".join(ch if 32 <= ord(ch) < 127 and ch not in '"\\?' else f"\\{ord(ch):03o}"
                   for ch in text)


SIGNATURE_SOURCE = "signature.cc"


def signature_context(sig: Signature) -> dict:
    dim_index = {d.name: i for i, d in enumerate(sig.dims)}
    tensors = []
    for t in sig.tensors:
        tensors.append({
            "name": t.name,
            "dtype_enum": DTYPE_ENUM[t.dtype],
            "rank": len(t.dims),
            "dim_indices": [dim_index[d] if isinstance(d, str) else -1 for d in t.dims] or [0],
            "fixed": [d if isinstance(d, int) else 0 for d in t.dims] or [0],
            "output": "true" if t.is_output else "false",
        })
    return {
        "kernel": sig.kernel,
        "generator": f"ptc {__version__}",
        "signature": c_string(str(sig)),
        "tensors": tensors,
        "num_tensor_inputs": len(sig.tensor_inputs),
        "scalars": [{"name": s.name, "dtype_enum": DTYPE_ENUM[s.dtype]} for s in sig.scalars],
        "dims": [{"name": d.name, "default": -1 if d.default is None else d.default,
                  "static": -1 if d.static is None else d.static} for d in sig.dims],
        "multiples": [{"dim": dim_index[dim], "size": size,
                       "why": c_string(f"{line}` with {tile}={size} in this build")}
                      for dim, tile, size, line in sig.multiples],
    }


def render_harness(backend: str = "cuda") -> str:
    """The harness of `backend`'s toolchain: the same text for every kernel."""
    from .. import targets
    from .toolchains import toolchain

    chain = toolchain(backend)
    folders = targets.backend(backend).template_folders()
    template = environment(folders).get_template(chain.harness_template)
    return template.render(generator=f"ptc {__version__}")


def render_signature(sig: Signature) -> str:
    """signature.cc: the tables of `sig` that the harness reads (ptc_signature.h)."""
    return environment().get_template("signature.cc.j2").render(signature_context(sig))
