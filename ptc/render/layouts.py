"""A register layout (ptc.lower.layout) printed as a C struct of constexpr functions, so the
kernel indexes its register arrays with compile-time constants inside unrolled loops:

    SIZE, SLOTSa           values per thread; slots along axis a
    slotA(r)               the slot along axis a of register r
    reg(s0, s1)            the register at these slots
    offA(s)                the register part of the coordinate along axis a of slot s
    baseA(lane, warp)      the thread part of the coordinate along axis a
    wbaseA(warp)           the warp part alone (an mma's warp tile origin)
    owner(lane, warp)      the first of the threads that hold the same values
"""
from __future__ import annotations

from ..lower import ir
from ..lower.layout import (Layout, register_index_expr, slot_offset_expr,
                             thread_offset_expr)

SIXTEEN_BIT = ("f16", "bf16")


def c_storage(home: ir.RegTile, lay: Layout) -> tuple[str, int, bool]:
    """(C element type, array length, packed 16-bit pairs?) of a register tile."""
    if home.dtype in SIXTEEN_BIT:
        packed = lay.size % 2 == 0
        return "uint32_t", (lay.size // 2 if packed else lay.size), packed
    ctype = {"f32": "float", "tf32": "float", "i32": "int", "i8": "int8_t", "u8": "uint8_t",
             "f8e4m3": "ptc::f8e4m3", "f8e5m2": "ptc::f8e5m2", "bool": "bool"}[home.dtype]
    return ctype, max(lay.size, 1), False


def struct_name(layout: str) -> str:
    return f"L_{layout}"


def slot_of_register_expr(lay: Layout, axis: int, var: str = "r") -> str:
    """C expression of the slot along `axis` of register `var`."""
    radix_of = {}
    radix = 1
    for d in lay.regs:
        radix_of[id(d)] = radix
        radix *= d.size
    parts, weight = [], 1
    for d in lay.axis_digits(axis):
        r = radix_of[id(d)]
        value = var if r == 1 else f"({var} / {r})"
        value = f"({value} % {d.size})" if r * d.size < lay.size else value
        parts.append(value if weight == 1 else f"{value} * {weight}")
        weight *= d.size
    return " + ".join(parts) or "0"


def owner_expr(lay: Layout) -> str:
    """C condition: this thread is the first of those holding the same values."""
    conds = []
    for digits, var in ((lay.lanes, "lane"), (lay.warps, "warp")):
        radix = 1
        for d in digits:
            if not any(d.stride):
                conds.append(f"({var} / {radix}) % {d.size} == 0" if radix > 1
                             else f"{var} % {d.size} == 0")
            radix *= d.size
    return " && ".join(conds) or "true"


def warp_offset_expr(lay: Layout, axis: int) -> str:
    parts, radix = [], 1
    for d in lay.warps:
        if d.stride[axis]:
            value = "warp" if radix == 1 else f"(warp / {radix})"
            value = f"({value} % {d.size})"
            parts.append(f"{value} * {d.stride[axis]}")
        radix *= d.size
    return " + ".join(parts) or "0"


def layout_struct(lay: Layout) -> list[str]:
    name = struct_name(lay.name)
    fn = "static __device__ __forceinline__ constexpr int"
    out = [f"// {lay.name}: {lay.describe()}" + (f"  ({lay.note})" if lay.note else ""),
           f"struct {name} {{",
           f"  static constexpr int SIZE = {lay.size};"]
    axes = range(lay.rank)
    for a in axes:
        out.append(f"  static constexpr int SLOTS{a} = {lay.slots(a)};")
        out.append(f"  {fn} slot{a}(int r) {{ return {slot_of_register_expr(lay, a)}; }}")
        out.append(f"  {fn} off{a}(int s) {{ return {slot_offset_expr(lay, a, 's')}; }}")
        out.append(f"  static __device__ __forceinline__ int base{a}(int lane, int warp) "
                   f"{{ return {thread_offset_expr(lay, a)}; }}")
        out.append(f"  static __device__ __forceinline__ int wbase{a}(int warp) "
                   f"{{ return {warp_offset_expr(lay, a)}; }}")
    slots = tuple(f"s{a}" for a in axes)
    params = ", ".join(f"int {s}" for s in slots)
    out.append(f"  {fn} reg({params}) {{ return {register_index_expr(lay, slots)}; }}")
    out.append("  static __device__ __forceinline__ bool owner(int lane, int warp) "
               f"{{ return {owner_expr(lay)}; }}")
    out.append("};")
    return out
