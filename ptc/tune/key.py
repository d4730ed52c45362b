"""What a tuning result is keyed by: everything that decides which plan is fastest.

    TuningKey(kernel, source_sha256, dims, device, device_sha256, ptc, nvcc)

- `source_sha256`: the kernel's canonical source (`ptc compile --emit ast`, this kernel
  only), so comments, blank lines and layout do not matter, and another kernel of the same
  file can change freely;
- `dims`: every dim's size at the problem the plans were timed at (the --shape values, then
  the `dims` defaults: the sizes the search ranks plans for);
- `device` and `device_sha256`: the target's name and a hash of its description's figures
  (the parsed YAML, not its text: comments and layout aside);
- `ptc`: ptc's version; `nvcc`: the CUDA compiler's release (e.g. 13.0.88), or "" where
  the reader has no nvcc (then it is not compared; see ptc.tune.db.lookup).
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from dataclasses import dataclass
from typing import Mapping

from ..version import __version__


@dataclass(frozen=True)
class TuningKey:
    kernel: str
    source_sha256: str
    dims: tuple[tuple[str, int], ...]      # sorted by name
    device: str
    device_sha256: str
    ptc: str
    nvcc: str

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "source_sha256": self.source_sha256,
                "dims": dict(self.dims), "device": self.device,
                "device_sha256": self.device_sha256, "ptc": self.ptc, "nvcc": self.nvcc}

    @staticmethod
    def from_json(data: Mapping) -> "TuningKey":
        """Raises KeyError / TypeError / ValueError on a malformed key (the database
        reader turns them into one message)."""
        dims = data["dims"]
        if not isinstance(dims, dict) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in dims.values()):
            raise ValueError("dims must map names to integers")
        fields = {name: data[name] for name in ("kernel", "source_sha256", "device",
                                                "device_sha256", "ptc", "nvcc")}
        for name, value in fields.items():
            if not isinstance(value, str):
                raise ValueError(f"{name} must be a string")
        return TuningKey(dims=tuple(sorted(dims.items())), **fields)

    @property
    def id(self) -> str:
        """The entry's address: a hash of the whole key."""
        text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def dims_text(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.dims)


def source_sha256(kernel_ast) -> str:
    """The hash of one kernel's canonical source (its ast.Kernel)."""
    from ..grammar.printer import print_kernel

    return hashlib.sha256(print_kernel(kernel_ast).encode()).hexdigest()


def device_sha256(device) -> str:
    """The hash of a device description's figures (not of its file's text)."""
    data = dataclasses.asdict(device)
    data.pop("path", None)
    data["features"] = sorted(device.features)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@functools.lru_cache(maxsize=None)
def compiler_release(backend: str, path: str | None = None) -> str:
    """The release of the compiler that builds `backend`'s kernels (nvcc's `13.0.88`; the
    compiler at `path`, else the one its toolchain finds), "" where there is none."""
    from ..runtime.toolchains import toolchain

    return toolchain(backend).release(path)


def make_key(kernel_ast, kernel_name: str, dims: Mapping[str, int], device,
             nvcc: str | None = None) -> TuningKey:
    """The key of `kernel_name` (whose ast.Kernel is `kernel_ast`) at `dims` on `device`;
    `nvcc`: the toolchain release (default: ask the device's toolchain)."""
    return TuningKey(kernel_name, source_sha256(kernel_ast), tuple(sorted(dims.items())),
                     device.name, device_sha256(device), __version__,
                     compiler_release(device.backend) if nvcc is None else nvcc)
