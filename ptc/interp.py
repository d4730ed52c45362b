"""The reference interpreter: runs a typed kernel with NumPy, tile by tile, as the semantic
oracle for every later stage.

It walks the parallel grid in row-major order and each tile loop in order, for any valid
tile sizes. Loads outside a tensor read the pad value (zero by default); stores and atomic
adds outside an output are dropped. Every operation's result is rounded to its dtype
(f16 and bf16 round to nearest even, as the hardware does); half-precision matmuls and sums
accumulate in f32.
"""
from __future__ import annotations

import itertools
import math
from typing import Mapping, Sequence

import ml_dtypes
import numpy as np

from . import ops
from .diagnostics import CompileError, Diagnostic
from .dims import DimBinder
from .sema import typed as T
from .sema.dtypes import FP8, FP8_MAX, INT_RANGES
from .sema.tiles import pinned_tiles

NUMPY_DTYPES = {
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32),
    "i32": np.dtype(np.int32),
    "i8": np.dtype(np.int8),
    "u8": np.dtype(np.uint8),
    "f8e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
    "f8e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "bool": np.dtype(np.bool_),
    "tf32": np.dtype(np.float32),   # an mma operand format, held in f32 (to_tf32)
}
_F32 = np.dtype(np.float32)
# the NumPy dtypes of floats (ml_dtypes' have kind "V")
FLOAT_ARRAYS = frozenset(NUMPY_DTYPES[d] for d in ("f16", "bf16", "f32", "f8e4m3", "f8e5m2"))


def to_tf32(x) -> np.ndarray:
    """f32 values rounded to TF32 (10 mantissa bits; to nearest, ties away from zero, as
    cvt.rna.tf32.f32), held in f32. Infinities and NaNs pass unchanged."""
    bits = np.asarray(x, _F32).view(np.uint32)
    finite = (bits & 0x7F800000) != 0x7F800000
    rounded = ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).astype(np.uint32)
    return np.where(finite, rounded, bits).astype(np.uint32).view(_F32)


def wrap_i32(x) -> np.ndarray:
    """Integers as i32, modulo 2^32 (two's complement): the tensor cores' s32 sums."""
    return (np.asarray(x, dtype=np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def to_narrow_int(x, dtype: str) -> np.ndarray:
    """Values converted to i8 or u8 as the hardware's cvt.rni.sat does: floats round to
    nearest even, everything saturates to the range, NaN gives 0 (docs/language.md)."""
    lo, hi = INT_RANGES[dtype]
    x = np.asarray(x)
    if is_float_array(x):
        x = x.astype(_F32)
        x = np.where(np.isnan(x), np.float32(0), np.rint(np.clip(x, lo, hi)))
    return np.clip(x.astype(np.int64), lo, hi).astype(NUMPY_DTYPES[dtype])


def is_float_array(x: np.ndarray) -> bool:
    return x.dtype.kind == "f" or x.dtype in FLOAT_ARRAYS


def to_fp8(x, dtype: str) -> np.ndarray:
    """Values converted to f8e4m3 or f8e5m2 as the hardware's cvt.rn.satfinite.{e4m3x2,
    e5m2x2}.f32 does (docs/language.md, "Numerics of conversions"): from f32 (every other
    dtype converts to f32 first, exactly for those that reach the FP8 range), round to
    nearest even; a magnitude beyond the largest finite value, infinities included,
    saturates to it (ml_dtypes alone would give NaN for f8e4m3, inf for f8e5m2); NaN of
    either sign gives the positive NaN 0x7F."""
    x = np.asarray(x)
    f = x.astype(_F32) if x.dtype != _F32 else x
    top = np.float32(FP8_MAX[dtype])
    out = np.clip(f, -top, top).astype(NUMPY_DTYPES[dtype])
    bits = out.view(np.uint8)
    return np.where(np.isnan(f), np.uint8(0x7F), bits).astype(np.uint8).view(NUMPY_DTYPES[dtype])


def _err(message: str, hint: str | None = None) -> CompileError:
    return CompileError(Diagnostic(message, hint=hint))


# ---- binding a call: dims, tiles, inputs ----------------------------------------------
def bind_dims(kernel: T.TypedKernel, inputs: Mapping[str, object],
              shapes: Mapping[str, int]) -> dict[str, int]:
    """Every dim's size: from --shape, then the inputs' shapes, then the `dims` defaults."""
    binder = DimBinder()
    binder.give(shapes, "--shape")
    for p in kernel.inputs:
        if isinstance(p, T.TensorParam) and p.name in inputs:
            binder.bind(p, np.shape(inputs[p.name]))
    return binder.complete(kernel.dims, unknown_hint=lambda d: (
        f"pass --shape {d}=<size>, give an input that has it, or declare `dims {d} = <size>`"))


def bind_tiles(kernel: T.TypedKernel, tiles: Mapping[str, int],
               dims: Mapping[str, int] | None = None) -> dict[str, int]:
    """Every tile size, the given ones first: any positive size (a plan's, built by hand,
    may be one the kernel does not declare; the driver checks what a user pins); the
    others keep the kernel's `tile A divides B` lines at `dims`."""
    return pinned_tiles(kernel, tiles, declared=False, dims=dims)


def coerce(name: str, value, dtype: str) -> np.ndarray:
    """An input as an array of exactly `dtype` (floats round to f16/bf16 as stored)."""
    arr = np.asarray(value)
    target = NUMPY_DTYPES[dtype]
    if arr.dtype == target:
        return arr
    kind = arr.dtype.kind
    if dtype in ("f16", "bf16", "f32"):
        if kind in "fiub" or is_float_array(arr):
            return arr.astype(np.float32).astype(target) if dtype == "bf16" else arr.astype(target)
    elif dtype in FP8 and (kind in "fiu" or is_float_array(arr)):
        return to_fp8(arr, dtype)     # values, rounded as `as` rounds them
    elif dtype in INT_RANGES and kind in "iub":
        lo, hi = INT_RANGES[dtype]
        if arr.size and (arr.max() > hi or arr.min() < lo):
            raise _err(f"input {name} has values outside the {dtype} range ({lo}..{hi})")
        return arr.astype(target)
    elif dtype == "bool" and kind == "b":
        return arr.astype(target)
    raise _err(f"input {name} is {dtype}, but the array given holds {arr.dtype}")


def random_input(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    if dtype == "i32":
        return rng.integers(0, 16, size=shape, dtype=np.int32)
    if dtype in ("i8", "u8"):   # the whole range: sums and products leave 8 bits
        lo, hi = INT_RANGES[dtype]
        return rng.integers(lo, hi + 1, size=shape).astype(NUMPY_DTYPES[dtype])
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype in FP8:    # normal values, spread over the exponents a scaled tensor uses
        return to_fp8(rng.standard_normal(shape, dtype=np.float32) * 4, dtype)
    if not shape:
        return np.asarray(rng.uniform(0.1, 1.0), dtype=np.float32).astype(NUMPY_DTYPES[dtype])
    return rng.standard_normal(shape, dtype=np.float32).astype(NUMPY_DTYPES[dtype])


def prepare(kernel: T.TypedKernel, inputs: Mapping[str, object], *,
            shapes: Mapping[str, int] | None = None, tiles: Mapping[str, int] | None = None,
            seed: int = 0) -> "Machine":
    """Bind a call (dims, tile sizes, inputs -- drawn at random where not given -- and
    zeroed outputs) and return the machine that runs it; `run_kernel` runs every grid."""
    params = {p.name: p for p in kernel.inputs}
    unknown = [n for n in inputs if n not in params]
    if unknown:
        raise _err(f"kernel {kernel.name} has no parameter {unknown[0]}",
                   "parameters: " + ", ".join(params))
    dims = bind_dims(kernel, inputs, shapes or {})
    tile_sizes = bind_tiles(kernel, tiles or {}, dims)
    drawn = random_inputs(kernel, dims, seed, given=inputs)
    arrays: dict[str, np.ndarray] = {}
    scalars: dict[str, np.ndarray] = {}
    for p in kernel.inputs:
        if isinstance(p, T.TensorParam):
            arrays[p.name] = (coerce(p.name, inputs[p.name], p.dtype) if p.name in inputs
                              else drawn[p.name])
        else:
            value = (coerce(p.name, inputs[p.name], p.dtype) if p.name in inputs
                     else drawn[p.name])
            if np.ndim(value) != 0:
                raise _err(f"scalar parameter {p.name} needs a single value, "
                           f"not an array of shape {np.shape(value)}")
            scalars[p.name] = np.asarray(value)
    for p in kernel.outputs:
        shape = p.shape_in(dims)
        arrays[p.name] = np.zeros(shape, NUMPY_DTYPES[p.dtype])
    for name, n in itertools.chain(dims.items(), tile_sizes.items()):
        scalars[name] = np.int32(n)
    return Machine(arrays, scalars, dims, tile_sizes)


def random_inputs(kernel: T.TypedKernel, dims: Mapping[str, int], seed: int = 0,
                  given: Mapping[str, object] = {}) -> dict[str, np.ndarray]:
    """The inputs `ptc run` draws (seeded, in parameter order) for those not `given`."""
    rng = np.random.default_rng(seed)
    out = {}
    for p in kernel.inputs:
        if p.name in given:
            continue
        shape = p.shape_in(dims) if isinstance(p, T.TensorParam) else ()
        out[p.name] = random_input(rng, p.dtype, shape)
    return out


def run_kernel(kernel: T.TypedKernel, inputs: Mapping[str, object], *,
               shapes: Mapping[str, int] | None = None, tiles: Mapping[str, int] | None = None,
               seed: int = 0, grid_tiles: Sequence[Mapping[str, int]] = ()
               ) -> dict[str, np.ndarray]:
    """Every grid of the kernel, in order. `grid_tiles`: per grid, the tile sizes it runs
    at instead of `tiles` (a kernel built grid by grid has a plan, and tiles, per grid;
    a pad that enters a reduction makes the result depend on them)."""
    machine = prepare(kernel, inputs, shapes=shapes, tiles=tiles, seed=seed)
    with np.errstate(all="ignore"):
        for g, grid in enumerate(kernel.body):
            if g < len(grid_tiles):
                machine.tiles = bind_tiles(kernel, {**(tiles or {}), **grid_tiles[g]})
                machine.scalars.update((n, np.int32(v)) for n, v in machine.tiles.items())
            machine.grid(grid)
    return {p.name: machine.arrays[p.name] for p in kernel.outputs}


# ---- execution -----------------------------------------------------------------------
def tile_count(extent: int, size: int) -> int:
    """How many tiles of `size` cover `extent` (the last one may stick out)."""
    return max(0, math.ceil(extent / size))


class Machine:
    """Evaluates typed statements and expressions tile by tile: `arrays` hold the tensors,
    `scalars` the dims, tile sizes, scalar params and grid / loop indices, `env` the local
    variables of the tile being run. The plan simulator (ptc.sched.simulate) reuses it."""

    def __init__(self, arrays, scalars, dims, tiles):
        self.arrays = arrays
        self.scalars = scalars
        self.dims = dims
        self.tiles = tiles
        self.env: dict[str, np.ndarray] = {}

    def extent(self, e: T.Extent) -> int:
        if len(T.extent_factors(e)) > 1:      # the rows of a tile of rank 3 (simulated plans)
            return math.prod(self.extent(f) for f in T.extent_factors(e))
        if isinstance(e, int):
            return e
        return self.tiles[e] if e in self.tiles else self.dims[e]

    def grid_points(self, grid: T.Grid):
        """Walk the grid in row-major order: for each tile, bind its indices and start
        with no local values, then yield."""
        ranges = [range(tile_count(self.dims[a.dim], self.extent(a.size)) if a.size is not None
                        else self.dims[a.dim]) for a in grid.axes]
        for point in itertools.product(*ranges):
            self.env = {}
            for a, idx in zip(grid.axes, point):
                self.scalars[a.var] = np.int32(idx)
            yield point

    # statements
    def grid(self, grid: T.Grid) -> None:
        for _ in self.grid_points(grid):
            self.block(grid.body)

    def block(self, stmts) -> None:
        for s in stmts:
            if isinstance(s, T.Let):
                self.env[s.name] = self.eval(s.value)
            elif isinstance(s, T.Store):
                self.store(s)
            elif isinstance(s, T.Loop):
                self.loop(s)
            else:
                raise AssertionError(s)

    def loop(self, s: T.Loop) -> None:
        extent = self.dims[s.axis.dim]
        if s.until is not None:
            extent = min(extent, int(self.eval(s.until)))
        for idx in range(tile_count(extent, self.extent(s.axis.size))):
            self.scalars[s.axis.var] = np.int32(idx)
            self.block(s.body)

    def _region(self, index, shape):
        """Source (tensor) and destination (tile) slices of the in-bounds part, or None."""
        src, dst, tile_shape = [], [], []
        inside = True     # the tile's whole shape is needed even where nothing is inside
        gathered = any(isinstance(item, T.Gather) for item in index)
        for item, n in zip(index, shape):
            if isinstance(item, T.TileSlice):
                size = self.extent(item.size)
                step = item.stride                 # an offset tile: any start and step
                start = int(self.scalars[item.var]) * size * step
                if item.offset is not None:
                    start += int(self.eval(item.offset))
                # tile elements k with 0 <= start + k * step < n: lo <= k < hi
                lo, hi = max(-(start // step), 0), min(-((start - n) // step), size)
                tile_shape.append(size)
                inside = inside and hi > lo
                src.append(slice(start + lo * step, start + (hi - 1) * step + 1, step))
                dst.append(slice(lo, hi))
            elif isinstance(item, T.WholeDim):
                tile_shape.append(n)
                src.append(slice(0, n))
                dst.append(slice(0, n))
            elif isinstance(item, T.Gather):       # the rows the index tile names
                pos = np.asarray(self.eval(item.index)).astype(np.int64)
                keep = np.nonzero((pos >= 0) & (pos < n))[0]
                tile_shape.append(self.extent(item.size))
                inside = inside and keep.size > 0
                src.append(pos[keep])
                dst.append(keep)
            else:
                i = int(self.eval(item.index))
                inside = inside and 0 <= i < n
                # beside a gathered dim, a point is a unit slice: NumPy keeps the one
                # index array's axis in place (the callers reshape the unit axes away)
                src.append(slice(i, i + 1) if gathered else i)
        return ((tuple(src), tuple(dst)) if inside else None), tile_shape

    def store(self, s: T.Store) -> None:
        out = self.arrays[s.tensor]
        value = self.eval(s.value)
        region, tile_shape = self._region(s.index, out.shape)
        if region is None:
            return
        src, dst = region
        tile = np.broadcast_to(value, tile_shape)[dst].reshape(out[src].shape)
        if s.atomic:
            wide = _F32 if out.dtype != np.int32 else np.int32
            rows = next((a for a in src if isinstance(a, np.ndarray)), None)
            if rows is not None and len(np.unique(rows)) < len(rows):
                # a scatter that names a row twice adds each of its tile rows in turn
                axis = next(k for k, a in enumerate(src) if isinstance(a, np.ndarray))
                for k, row in enumerate(rows):
                    at = src[:axis] + (row,) + src[axis + 1:]
                    part = np.take(tile, k, axis=axis).reshape(out[at].shape)
                    out[at] = (out[at].astype(wide) + part).astype(out.dtype)
                return
            acc = out[src].astype(wide) + tile
            out[src] = acc.astype(out.dtype)
        else:
            out[src] = tile

    # expressions
    def eval(self, e: T.TExpr):
        method = getattr(self, "_" + type(e).__name__)
        return method(e)

    def _Const(self, e: T.Const):
        if e.type.dtype in FP8:     # a float literal is f32 (its value checked in range)
            return np.asarray(e.value, _F32).astype(NUMPY_DTYPES[e.type.dtype])
        return np.asarray(e.value).astype(NUMPY_DTYPES[e.type.dtype])

    def _Var(self, e: T.Var):
        return self.env[e.name]

    def _Scalar(self, e: T.Scalar):
        return self.scalars[e.name]

    def _Load(self, e: T.Load):
        src = self.arrays[e.tensor]
        region, tile_shape = self._region(e.index, src.shape)
        out = np.full(tile_shape, e.pad, dtype=_F32).astype(src.dtype)
        if region is not None:
            s, d = region
            out[d] = src[s].reshape(out[d].shape)
        return out

    def _Elementwise(self, e: T.Elementwise):
        args = [self.eval(a) for a in e.args]
        dtype = NUMPY_DTYPES[e.type.dtype]
        fn = ops.ELEMENTWISE[e.op].numpy
        if e.op == "where":
            return fn(*args).astype(dtype)
        if dtype.kind == "f" or dtype == NUMPY_DTYPES["bf16"]:
            # half-precision ops compute in f32 and round once: exactly the IEEE result
            args = [a.astype(_F32) if a.dtype != np.bool_ else a for a in args]
        return np.asarray(fn(*args)).astype(dtype)

    def _Reduce(self, e: T.Reduce):
        a = self.eval(e.arg)
        dtype = NUMPY_DTYPES[e.type.dtype]
        # a sum accumulates in its result dtype (f32 for halves); max and min keep theirs
        return ops.REDUCTIONS[e.op].numpy(a.astype(dtype), axis=e.axis).astype(dtype)

    def _product(self, a_expr: T.TExpr, b_expr: T.TExpr, dtype: str) -> np.ndarray:
        """a @ b in the product's dtype: f32 sums of exact products, or (i8 operands) the
        exact integer sum wrapped to i32, as the tensor cores' s32 accumulation wraps."""
        a, b = self.eval(a_expr), self.eval(b_expr)
        if dtype == "i32":
            return wrap_i32(np.matmul(a.astype(np.int64), b.astype(np.int64)))
        return np.matmul(a.astype(_F32), b.astype(_F32))

    def _MatMul(self, e: T.MatMul):
        return self._product(e.lhs, e.rhs, e.type.dtype)

    def _MmaAccumulate(self, e: T.MmaAccumulate):
        acc = None if e.acc is None else self.eval(e.acc)
        product = self._product(e.a, e.b, e.type.dtype)
        if acc is None:
            return product
        if e.type.dtype == "i32":
            return wrap_i32(acc.astype(np.int64) + product)
        return (acc.astype(_F32) + product).astype(NUMPY_DTYPES[e.type.dtype])

    def _Transpose(self, e: T.Transpose):
        return np.ascontiguousarray(self.eval(e.arg).T)

    def _Rows(self, e: T.Rows):
        a = self.eval(e.arg)
        return a.reshape(a.shape[0] * a.shape[1], a.shape[2])

    def _Convert(self, e: T.Convert):
        a = self.eval(e.arg)
        if e.type.dtype == "tf32":
            return to_tf32(a)
        if e.type.dtype in ("i8", "u8"):
            a = to_narrow_int(a, e.type.dtype)
        elif e.type.dtype in FP8:
            a = to_fp8(a, e.type.dtype)
        elif a.dtype in FLOAT_ARRAYS and a.dtype != _F32:
            a = a.astype(_F32)  # from the exact f32 value (f16, bf16, FP8: exact in f32)
        dtype = NUMPY_DTYPES[e.type.dtype]
        if dtype == NUMPY_DTYPES["bf16"] and a.dtype != _F32:
            a = a.astype(_F32)  # round once, from the exact f32 value
        a = a.astype(dtype)
        shape = tuple(self.extent(x) for x in e.type.shape)
        if a.shape != shape:    # a store's conversion stretches extent-1 axes to the tile
            a = np.broadcast_to(a, shape).copy()   # (ptc.sema.calls)
        return a

    def _Expand(self, e: T.Expand):
        return np.expand_dims(self.eval(e.arg), e.axes)

    def _Fill(self, e: T.Fill):
        shape = tuple(self.extent(x) for x in e.type.shape)
        return np.full(shape, self.eval(e.value), dtype=NUMPY_DTYPES[e.type.dtype])

    def _IndexVec(self, e: T.IndexVec):
        idx = int(self.scalars[e.var]) if e.var is not None else 0     # arange: from 0
        if e.size is None:
            return np.int32(idx)
        size = self.extent(e.size)
        return (np.arange(size, dtype=np.int32) + idx * size).astype(np.int32)

