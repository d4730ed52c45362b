"""Checking a call against a kernel's signature, before anything touches CUDA: names and
count of the arguments, dtypes, shapes and the dims they imply, contiguity and alignment of
device arrays, scalar values. A problem is an ArgumentError naming the parameter."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ..dims import DimBinder, DimError, describe
from ..interp import NUMPY_DTYPES
from . import arrays as A
from .errors import ArgumentError
from .signature import ScalarArg, Signature, TensorArg

_INT32 = (-2**31, 2**31 - 1)


@dataclass
class BoundTensor:
    param: TensorArg
    shape: tuple[int, ...]
    host: np.ndarray | None = None          # a host array (copied to and from the GPU)
    device: A.DeviceRef | None = None       # a device array (used in place)
    value: Any = None                       # what the caller passed


@dataclass
class BoundCall:
    """A call checked against the signature; nothing allocated yet."""

    tensors: list[BoundTensor]              # ABI order: tensor inputs, then outputs
    given_outputs: set[str]                 # outputs the caller passed with out=
    scalars: list[float]
    dims: dict[str, int]
    on_device: bool                         # some array is a device array: return DeviceArrays
    streams: set[int] = field(default_factory=set)


def bind_call(sig: Signature, shapes: Mapping[str, int], args, named, out) -> BoundCall:
    """Check a call's arguments against `sig`; `shapes` gives dims no array has."""
    values = _match(sig, args, named)
    outs = _match_out(sig, out)
    on_device = any(A.is_device_array(v) for v in list(values.values()) + list(outs.values()))
    binder = DimBinder()
    tensors: list[BoundTensor] = []
    streams: set[int] = set()
    for p in sig.tensors:
        if p.is_output and p.name not in outs:
            tensors.append(BoundTensor(p, ()))
            continue
        value = outs[p.name] if p.is_output else values[p.name]
        bound = _bind_tensor(p, value)
        bound.value = value
        if bound.device is not None and bound.device.stream is not None:
            streams.add(bound.device.stream)
        try:
            binder.bind(p, bound.shape)
        except DimError as exc:
            raise ArgumentError(exc.message, hint=str(sig)) from None
        tensors.append(bound)
    try:
        dims = binder.complete(sig.dims, fallback=shapes, unknown_hint=lambda d: (
            f"no input has it: pass its output with out=, or compile with shapes={{'{d}': SIZE}}"))
    except DimError as exc:
        raise ArgumentError(exc.message, hint=exc.hint) from None
    check_multiples(sig, dims)
    for bound in tensors:
        if bound.param.is_output and bound.host is None and bound.device is None:
            bound.shape = _shape(bound.param, dims)
    scalars = [_bind_scalar(p, values[p.name]) for p in sig.scalars]
    return BoundCall(tensors, set(outs), scalars, dims, on_device, streams)


def check_multiples(sig: Signature, dims: Mapping[str, int]) -> None:
    """The build's `divides` lines (its tile sizes) against a call's dims."""
    for dim, tile, size, line in sig.multiples:
        if dims[dim] % size:
            raise ArgumentError(f"{dim}={dims[dim]} is not a multiple of {tile}={size}: "
                                f"{sig.kernel} declares `{line}`, and this build has "
                                f"{tile}={size}",
                                hint=f"call it with {dim} a multiple of {size}, or compile it "
                                     f"with shapes={{'{dim}': {dims[dim]}}}")


def _match(sig: Signature, args, named) -> dict[str, Any]:
    params = list(sig.inputs)
    if len(args) > len(params):
        raise ArgumentError(f"{sig.kernel} takes {len(params)} inputs "
                            f"({', '.join(p.name for p in params)}), but {len(args)} were "
                            f"given", hint=str(sig))
    values = {p.name: v for p, v in zip(params, args)}
    outputs = {p.name for p in sig.outputs}
    for name, value in named.items():
        if name in values:
            raise ArgumentError(f"{name} is given twice (by position and by name)")
        if name in outputs:
            raise ArgumentError(f"{name} is an output of {sig.kernel}, not an input",
                                hint=f"pass output arrays with out={{'{name}': array}}")
        if name not in {p.name for p in params}:
            raise ArgumentError(f"{sig.kernel} has no input {name}",
                                hint="inputs: " + (", ".join(p.name for p in params) or "none"))
        values[name] = value
    missing = [str(p) for p in params if p.name not in values]
    if missing:
        raise ArgumentError(f"{sig.kernel} is missing {'input' if len(missing) == 1 else 'inputs'} "
                            f"{', '.join(missing)}", hint=str(sig))
    return values

def _match_out(sig: Signature, out) -> dict[str, Any]:
    if out is None:
        return {}
    names = [p.name for p in sig.outputs]
    if isinstance(out, Mapping):
        for name in out:
            if name not in names:
                raise ArgumentError(f"{sig.kernel} has no output {name}",
                                    hint="outputs: " + ", ".join(names))
        return dict(out)
    if isinstance(out, (list, tuple)):
        if len(out) != len(names):
            raise ArgumentError(f"out= has {len(out)} arrays, but {sig.kernel} has "
                                f"{len(names)} outputs ({', '.join(names)})")
        return dict(zip(names, out))
    if len(names) == 1:
        return {names[0]: out}
    raise ArgumentError(f"{sig.kernel} has {len(names)} outputs; pass out= as a dict "
                        "by name")


# ---- checking one argument ---------------------------------------------------------------
def nbytes_of(shape, dtype: str) -> int:
    return int(np.prod(shape, dtype=np.int64)) * NUMPY_DTYPES[dtype].itemsize


def _shape(p: TensorArg, dims: Mapping[str, int]) -> tuple[int, ...]:
    return p.shape_in(dims)


def _bind_tensor(p: TensorArg, value) -> BoundTensor:
    if A.is_device_array(value):
        try:
            ref = A.device_ref(value)
        except A.ArrayProblem as exc:
            raise ArgumentError(f"{describe(p)} {exc}") from None
        if ref.dtype != p.dtype:
            raise ArgumentError(f"{describe(p)} is {p.dtype}, but the {ref.what} given holds "
                                f"{ref.dtype}", hint="convert it first (nothing is converted "
                                                      "on the GPU)")
        if ref.ptr % A.ALIGNMENT and np.prod(ref.shape) > 0:
            raise ArgumentError(f"{describe(p)}: the {ref.what}'s address 0x{ref.ptr:x} is not "
                                f"{A.ALIGNMENT}-byte aligned", hint="pass a fresh (or cloned) "
                                                                    "array, not an offset view")
        return BoundTensor(p, ref.shape, device=ref)
    return BoundTensor(p, *_host_array(p, value))


def _host_array(p: TensorArg, value) -> tuple[tuple[int, ...], np.ndarray]:
    """(shape, C-contiguous array of exactly p's dtype) for a host value."""
    want = NUMPY_DTYPES[p.dtype]
    if not isinstance(value, np.ndarray) and hasattr(value, "__dlpack_device__"):
        try:
            value = np.from_dlpack(value)        # a CPU tensor of another framework
        except Exception:
            pass
    if not isinstance(value, np.ndarray):
        try:
            value = np.asarray(value)
        except Exception as exc:
            raise ArgumentError(f"{describe(p)} needs an array, not {type(value).__name__} "
                                f"({exc})") from None
        if value.dtype.kind in "biuf" and value.dtype != want:   # a list or a scalar
            from ..interp import coerce

            try:
                value = coerce(p.name, value, p.dtype)
            except Exception as exc:
                raise ArgumentError(f"{describe(p)}: {exc}") from None
    if value.dtype != want:
        if p.dtype == "bf16" and value.dtype == np.float32 and not p.is_output:
            value = value.astype(want)       # rounded to nearest even, as documented
        else:
            hint = ("NumPy has no bf16: pass ml_dtypes.bfloat16 (or float32, rounded)"
                    if p.dtype == "bf16" else
                    f"NumPy has no {p.dtype}: pass an ml_dtypes.{want.name} array"
                    if p.dtype in ("f8e4m3", "f8e5m2") else
                    f"convert it with .astype(np.{want.name})")
            raise ArgumentError(f"{describe(p)} is {p.dtype}, but the array given holds "
                                f"{value.dtype}", hint=hint)
    if p.is_output:
        if not (value.flags.c_contiguous and value.flags.writeable):
            raise ArgumentError(f"{describe(p)}: an out= array must be C-contiguous and writeable")
        return tuple(value.shape), value
    return tuple(value.shape), np.ascontiguousarray(value)


def _bind_scalar(p: ScalarArg, value) -> float:
    if not isinstance(value, (np.ndarray, np.generic)) and callable(getattr(value, "item", None)):
        try:
            value = value.item()            # a 0-d tensor of another framework
        except Exception:
            pass
    if isinstance(value, np.ndarray):
        if value.ndim != 0:
            raise ArgumentError(f"scalar {p} needs a single value, not an array of shape "
                                f"{value.shape}")
        value = value[()]
    if p.dtype == "bool":
        if not isinstance(value, (bool, np.bool_)):
            raise ArgumentError(f"scalar {p} needs True or False, not {value!r}")
        return float(bool(value))
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer,
                                                                      np.floating)):
        raise ArgumentError(f"scalar {p} needs a number, not {value!r}")
    if p.dtype == "i32":
        if not isinstance(value, (int, np.integer)):
            raise ArgumentError(f"scalar {p} needs an integer, not {value!r}")
        if not _INT32[0] <= int(value) <= _INT32[1]:
            raise ArgumentError(f"scalar {p} = {value} is outside the i32 range")
        return float(int(value))
    return float(np.asarray(value, np.float64).astype(NUMPY_DTYPES[p.dtype]))  # as stored
