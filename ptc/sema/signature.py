"""Checking a kernel's signature and kernel-level declarations: parameters and their
dtypes, dims, `dims` defaults, `tile` sizes, and which dims must be known at compile time.
"""
from __future__ import annotations

from .. import ast
from ..diagnostics import Span
from . import dtypes as dt
from . import typed as T
from .support import suggest


class SignatureChecker:
    """The signature part of KernelChecker (mixed into it; uses its state)."""

    def _declare(self, name: str, kind: str, span: Span) -> bool:
        if name in self.kernel_names:
            other_kind, other = self.kernel_names[name]
            article = "an" if other_kind[0] in "aeiou" else "a"
            self.error(f"{name!r} is already declared as {article} {other_kind} "
                       f"(line {other.line})",
                       span, "kernel, parameter, dim, tile-size and index names must differ")
            return False
        self.kernel_names[name] = (kind, span)
        return True

    def _dtype(self, name: str, span: Span) -> str | None:
        if name in dt.DTYPES:
            return name
        if name in dt.FUTURE_DTYPES:
            self.error(f"dtype {name} is not supported yet", span,
                       "supported: " + ", ".join(dt.DTYPES))
        else:
            self.error(f"unknown dtype {name!r}", span,
                       suggest(name, dt.DTYPES) or "dtypes: " + ", ".join(dt.DTYPES))
        return None

    def _param(self, p: ast.Param, is_output: bool):
        if isinstance(p.type, ast.ScalarType):
            if is_output:
                self.error(f"output {p.name!r} must be a tensor", p.type.span,
                           f"a single value is a one-element tensor: "
                           f"{p.name}: {p.type.dtype}[1]")
                self.poisoned.add(p.name)
                return None
            dtype = self._dtype(p.type.dtype, p.type.span)
            if dtype in dt.WIDENED:
                wide = dt.WIDENED[dtype]
                self.error(f"a scalar parameter is f16, bf16, f32, i32 or bool, not {dtype}",
                           p.type.span, f"declare it {wide} (`{p.name}: {wide}`); "
                           + ("i8 and u8" if dtype in dt.NARROW_INTS else "f8e4m3 and f8e5m2")
                           + " are storage dtypes of tensors")
                dtype = None
            if not self._declare(p.name, "scalar parameter", p.span) or dtype is None:
                self.poisoned.add(p.name)
                return None
            sp = T.ScalarParam(p.name, dtype)
            self.scalars[p.name] = sp
            return sp
        dtype = self._dtype(p.type.dtype, p.type.dtype_span)
        dims: list[T.Extent] = []
        for d in p.type.dims:
            if isinstance(d.name, int):
                if d.name <= 0:
                    self.error(f"a tensor dim must be positive, not {d.name}", d.span)
                dims.append(d.name)
                continue
            if d.name in dt.DTYPES:
                self.error(f"dim name {d.name!r} is a dtype", d.span, "choose another name")
            if d.name not in self.dims:
                if self._declare(d.name, "dim", d.span):
                    self.dims[d.name] = d.span
            dims.append(d.name)
        ok = self._declare(p.name, "output" if is_output else "parameter", p.span)
        if dtype is None or not ok:
            self.poisoned.add(p.name)
            return None
        tp = T.TensorParam(p.name, dtype, tuple(dims), is_output)
        self.tensors[p.name] = tp
        return tp

    def _param_span(self, name: str) -> Span:
        return self.kernel_names.get(name, ("", self.k.name_span))[1]

    def _dims_decl(self, stmt: ast.DimsDecl) -> None:
        for item in stmt.items:
            if item.name not in self.dims:
                self.error(f"{item.name!r} is not a dim of kernel {self.k.name!r}", item.span,
                           "dims: " + (", ".join(self.dims) or "none") +
                           "; dims come from the parameters' types")
            elif item.name in self.dim_defaults:
                self.error(f"dim {item.name} already has a default size", item.span)
            elif item.value <= 0:
                self.error(f"dim {item.name} must be positive, not {item.value}", item.span)
            else:
                self.dim_defaults[item.name] = item.value

    def _tile_decl(self, stmt: ast.TileDecl) -> None:
        for item in stmt.items:
            if isinstance(item, ast.TileDivides):
                self.divides.append(item)       # checked once every tile size is known
                continue
            bad = [c for c in item.choices if c <= 0]
            if bad:
                self.error(f"tile size {item.name} must be positive, not {bad[0]}",
                           self._number_in(item.span, bad[0], skip=len(item.name)))
                self.poisoned.add(item.name)
                continue
            if len(set(item.choices)) != len(item.choices):
                self.error(f"tile size {item.name} lists a candidate twice", item.span)
                self.poisoned.add(item.name)
                continue
            if self._declare(item.name, "tile size", item.span):
                self.tiles[item.name] = item.choices

    def _tile_divides(self, tiles: dict[str, T.TileSize],
                      dims: tuple[T.DimInfo, ...]) -> tuple[T.TileDivides, ...]:
        """The `tile A divides B` constraints: A a tile size, B a dim, a tile size or a
        positive number; where every size is known here (declared candidates, compile-time
        dims), some candidate must satisfy it."""
        out = []
        known = {d.name: self.shapes.get(d.name, d.default) for d in dims}   # --shape, `dims`
        for item in self.divides:
            if item.tile not in tiles:
                self.error(f"{item.tile!r} is not a tile size of kernel {self.k.name!r}",
                           item.span, "tile sizes: " + (", ".join(tiles) or "none") +
                           "; the left of `divides` is a tile size")
                continue
            if isinstance(item.of, int):
                if item.of <= 0:
                    self.error(f"{item.tile} cannot divide {item.of}", item.span,
                               "divide a positive number")
                    continue
            elif item.of not in tiles and item.of not in self.dims:
                self.error(f"{item.of!r} is neither a dim nor a tile size of kernel "
                           f"{self.k.name!r}", item.span,
                           "dims: " + (", ".join(self.dims) or "none") + "; tile sizes: " +
                           (", ".join(tiles) or "none"))
                continue
            c = T.TileDivides(item.tile, item.of, item.span)
            of = item.of if isinstance(item.of, int) else known.get(item.of)
            if of is not None and not tiles[item.tile].implicit and \
                    not any(of % size == 0 for size in tiles[item.tile].choices):
                listed = ", ".join(map(str, tiles[item.tile].choices))
                self.error(f"no candidate of {item.tile} ({listed}) divides {item.of}"
                           + (f" = {of}" if of != item.of else ""), item.span,
                           f"declare a size that divides {of}, or pass another "
                           f"--shape {item.of}=..." if of != item.of else
                           f"declare a size that divides {of}")
                continue
            out.append(c)
        return tuple(out)

    def _dim_infos(self) -> tuple[T.DimInfo, ...]:
        infos = []
        for name in self.dims:
            value = self.shapes.get(name, self.dim_defaults.get(name))
            static = None
            if name in self.static_needed:
                if value is None and name not in self.poisoned:
                    self.error(
                        f"dim {name} must be known at compile time (it sets a tile extent here)",
                        self.static_needed[name],
                        f"pass --shape {name}=<size>, or declare `dims {name} = <size>`")
                static = value
            infos.append(T.DimInfo(name, self.dim_defaults.get(name), static))
        return tuple(infos)

    def _need_static(self, dim: str, span: Span) -> None:
        self.static_needed.setdefault(dim, span)
