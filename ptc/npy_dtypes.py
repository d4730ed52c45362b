"""Which stored dtypes an input array may have for a tensor parameter, and how each is read.

One rule for `ptc run --inputs` (here) and for the build harness's `ptc_run DIR`
(`convert_input` in templates/host/harness.j2, tested against this table): an array
holds the parameter's own dtype, except that bf16 -- which NumPy lacks -- may be stored as
raw bits (`<u2`, or ml_dtypes' `V2` that np.save writes) or as f32, rounded to nearest even.
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
    "bool": {"|b1": "as is"},
}


def accepted_text(dtype: str) -> str:
    """`bf16 takes <u2 (raw bits), <V2 (raw bits), ...` for an error's hint."""
    forms = ", ".join(f"{d} ({how})" if how != "as is" else d
                      for d, how in ACCEPTED[dtype].items())
    return f"{dtype} takes {forms}"


def to_param_dtype(array, dtype: str):
    """The array as the interpreter holds a `dtype` tensor, or ValueError saying why not."""
    import ml_dtypes
    import numpy as np

    descr = array.dtype.str
    if array.dtype == ml_dtypes.bfloat16:
        descr = "<V2"               # ml_dtypes' own array: the same bits np.save writes
    how = ACCEPTED[dtype].get(descr)
    if how is None:
        raise ValueError(f"holds {descr!r}, but the parameter is {dtype}")
    if how == "raw bits":
        return np.ascontiguousarray(array).view(ml_dtypes.bfloat16)
    if how == "rounded to nearest even":
        return array.astype(ml_dtypes.bfloat16)
    return array
