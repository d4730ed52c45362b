"""Binding a call's dim sizes: the one place that reads dims off array shapes.

A `DimBinder` collects sizes in order of authority -- sizes the caller fixes (`--shape`,
compile-time sizes), then each tensor's array shape (rank, literal extents and agreement
with what is already known are checked), then, in `complete`, a fallback mapping and the
`dims` defaults, with every size positive and equal to its compile-time value where the
program fixed one. The reference interpreter (`ptc.interp.bind_dims`), the runtime's call
binding (`ptc.runtime.binding`), `ptc run --inputs` (`ptc.cli.run`) and the driver's reading
of compile-time dims from inputs (`ptc.driver.dims_from_inputs`) all bind through it; the
C harness (targets/cuda/templates/harness.cu.j2) repeats the same rules for `ptc_run`.
"""
from __future__ import annotations

from typing import Callable, Iterable, Mapping

from .diagnostics import CompileError, Diagnostic
from .sema.typed import DimInfo, Extent, TensorParam


class DimError(CompileError):
    """A size that does not fit the signature (an unlocated diagnostic)."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(Diagnostic(message, hint=hint))
        self.message = message
        self.hint = hint


def describe(p: TensorParam) -> str:
    """`input A (A: f16[M, K])`: a tensor parameter as the binding errors name it."""
    return f"{'output' if p.is_output else 'input'} {p.name} ({p})"


class DimBinder:
    def __init__(self) -> None:
        self.sizes: dict[str, int] = {}
        self.sources: dict[str, str] = {}   # where each size came from, for the errors

    def give(self, sizes: Mapping[str, int], source: str | Mapping[str, str]) -> None:
        """Sizes the caller fixes; every array bound later must agree with them."""
        for name, n in sizes.items():
            self.sizes[name] = int(n)
            self.sources[name] = source if isinstance(source, str) else source[name]

    def bind(self, p: TensorParam | tuple[str, tuple[Extent, ...]], shape,
             strict: bool = True) -> None:
        """Read the sizes of p's dims off `shape` (the shape of the array given for it).
        p may be a (name, dims) pair where no typed parameter exists yet. With `strict`
        False, whatever does not fit is skipped, to be reported by a later, strict binding."""
        name, dims = (p.name, p.dims) if isinstance(p, TensorParam) else p
        what = describe(p) if isinstance(p, TensorParam) else name
        shape = tuple(int(n) for n in shape)
        if len(shape) != len(dims):
            if not strict:
                return
            n = len(shape)
            raise DimError(f"{what} has {len(dims)} dims, but the array given has shape "
                           f"{shape} ({n} dim{'' if n == 1 else 's'})")
        for axis, (extent, n) in enumerate(zip(dims, shape)):
            if isinstance(extent, int):
                if n != extent and strict:
                    raise DimError(f"{what} needs {extent} along axis {axis}, but the array "
                                   f"given has shape {shape}")
                continue
            if extent in self.sizes and self.sizes[extent] != n:
                if not strict:
                    continue
                raise DimError(f"{what} has shape {shape}, so {extent} = {n}, but {extent} "
                               f"= {self.sizes[extent]} from {self.sources[extent]}")
            self.sizes.setdefault(extent, n)
            self.sources.setdefault(extent, name)

    def complete(self, dims: Iterable[DimInfo], fallback: Mapping[str, int] = {},
                 unknown_hint: Callable[[str], str] | None = None) -> dict[str, int]:
        """Every dim's size: bound, else from `fallback`, else its `dims` default (else an
        error, hinted by unknown_hint(dim)); each positive and equal to its compile-time
        size where it has one."""
        for d in dims:
            if d.name not in self.sizes:
                if d.name in fallback:
                    self.give({d.name: fallback[d.name]}, "the compile-time shapes")
                elif d.default is not None:
                    self.give({d.name: d.default}, "its default")
                else:
                    raise DimError(f"the size of dim {d.name} is unknown",
                                   unknown_hint(d.name) if unknown_hint else None)
            n, source = self.sizes[d.name], self.sources[d.name]
            if n <= 0:
                raise DimError(f"dim {d.name} must be positive, not {n} (from {source})")
            if d.static is not None and n != d.static:
                raise DimError(f"dim {d.name} was fixed to {d.static} at compile time, but "
                               f"this call has {d.name} = {n} (from {source})")
        return dict(self.sizes)
