"""Which stored dtypes an input array may have for a tensor parameter, and how each is read.

One rule for `ptc run --inputs` (here) and for the build harness's `ptc_run DIR`
(`convert_input` in templates/host/harness.j2, tested against this table): an array
holds the parameter's own dtype, except that bf16 -- which NumPy lacks -- may be stored as
raw bits (`<u2`, or ml_dtypes' `V2` that np.save writes) or as f32, rounded to nearest even,
and FP8 (f8e4m3, f8e5m2: NumPy lacks them too) as raw bits (`|u1`, or what np.save writes
for an ml_dtypes array: `V1` for float8_e4m3fn -- the file does not say which format, the
parameter does --, `<f1` for float8_e5m2, which np.load itself cannot read back) or as f32,
rounded as `x as f8e4m3` rounds (nearest even, saturating, NaN -> 0x7F).
Anything else is refused: an integer array for a float parameter is ambiguous (bits or
values?) and a wider float would be rounded without being asked.
"""
from __future__ import annotations

# parameter dtype -> {stored descr: how it is read}
ACCEPTED: dict[str, dict[str, str]] = {
    "f16": {"<f2": "as is"},
    "bf16": {"<u2": "raw bits", "<V2": "raw bits", "|V2": "raw bits",
             "<f4": "rounded to nearest even"},
    "f32": {"<f4": "as is"},
    "i32": {"<i4": "as is"},
    "i8": {"|i1": "as is"},
    "u8": {"|u1": "as is"},
    "f8e4m3": {"|u1": "raw bits", "<V1": "raw bits", "|V1": "raw bits",
               "<f4": "rounded as `as f8e4m3` rounds"},
    "f8e5m2": {"|u1": "raw bits", "<V1": "raw bits", "|V1": "raw bits", "<f1": "raw bits",
               "<f4": "rounded as `as f8e5m2` rounds"},
    "bool": {"|b1": "as is"},
}
# the ml_dtypes arrays of the dtypes NumPy lacks
_ML_DTYPES = {"bf16": "bfloat16", "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2"}


def accepted_text(dtype: str) -> str:
    """`bf16 takes <u2 (raw bits), <V2 (raw bits), ...` for an error's hint."""
    forms = ", ".join(f"{d} ({how})" if how != "as is" else d
                      for d, how in ACCEPTED[dtype].items())
    return f"{dtype} takes {forms}"


def to_param_dtype(array, dtype: str):
    """The array as the interpreter holds a `dtype` tensor, or ValueError saying why not."""
    import ml_dtypes
    import numpy as np

    from .interp import NUMPY_DTYPES, to_fp8

    descr = array.dtype.str
    for ours, name in _ML_DTYPES.items():
        if array.dtype == getattr(ml_dtypes, name):   # ml_dtypes' own array: it says which
            if ours != dtype:
                raise ValueError(f"holds ml_dtypes.{name}, but the parameter is {dtype}")
            return array
    how = ACCEPTED[dtype].get(descr)
    if how is None:
        raise ValueError(f"holds {descr!r}, but the parameter is {dtype}")
    if how == "raw bits":
        return np.ascontiguousarray(array).view(NUMPY_DTYPES[dtype])
    if how == "rounded to nearest even":
        return array.astype(ml_dtypes.bfloat16)
    if how.startswith("rounded as"):
        return to_fp8(array, dtype)
    return array
