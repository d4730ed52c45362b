"""A lowered kernel's source file, as the CUDA and HIP renderers fill their templates:
the kernel parameters and launch arguments (KernelSource), and per grid its function body,
constants and layout structs (GridSource, printed by GridPrinter over the renderer's body
printer). Subclasses (CSourceRenderer) name their body printer and what they add."""
from __future__ import annotations

from dataclasses import dataclass

from ..devices import Device
from ..lower import LoweredKernel, ir
from ..sched.plan import Plan
from ..sema import typed as T
from ..sema.dtypes import DTYPE_BYTES
from ..sema.tiles import dim_multiples
from .c_body import CBodyPrinter
from .layouts import c_storage, layout_struct


@dataclass(frozen=True)
class Param:
    ctype: str
    name: str


@dataclass(frozen=True)
class GridSource:
    """One grid's kernel: a __global__ function and its launch."""

    func: str
    namespace: str                                  # "" for a one-grid kernel
    title: str                                      # "grid 2 of 2: parallel i: BM of M"
    constants: tuple[tuple[str, int], ...]
    layouts: tuple[str, ...]
    grid: tuple[tuple[str, str], ...]               # (grid index, count expression)
    aligned: tuple[str, ...]                        # launch-time conditions of ALIGNED
    body: tuple[str, ...]
    maps: tuple[str, ...] = ()                      # TMA tensor map parameters
    map_setup: tuple[str, ...] = ()                 # ptc_launch lines that encode them


@dataclass(frozen=True)
class KernelSource:
    """The kernel file: every grid's kernel, launched in order by one ptc_launch."""

    kernel: str
    summary: tuple[str, ...]
    params: tuple[Param, ...]
    tensor_args: tuple[tuple[str, str, int], ...]   # (C name, C type, index into tensors[])
    scalar_args: tuple[tuple[str, str, int], ...]   # (C name, C type, index into scalars[])
    dim_args: tuple[tuple[str, int, int | None], ...]  # (C name, index into dims[], static)
    # (C name, size, `tile` line): dims a call must give as multiples of a built tile size
    dim_multiples: tuple[tuple[str, int, str], ...]
    grids: tuple[GridSource, ...]
    includes: tuple[str, ...] = ()                  # headers beyond the ones every kernel has
    defines: tuple[str, ...] = ()                   # macros the device headers read


def scalar_ctype(dtype: str) -> str:
    return {"f32": "float", "f16": "float", "bf16": "float", "i32": "int", "bool": "bool"}[dtype]


def axis_text(a: T.GridAxis) -> str:
    return f"{a.var} of {a.dim}" if a.size is None else f"{a.var}: {a.size} of {a.dim}"


class CSourceRenderer:
    """The context of a kernel template: subclasses set `printer` (a CBodyPrinter class)
    and may add constants, tensor maps and includes."""

    printer: type[CBodyPrinter] = CBodyPrinter

    def __init__(self, lows, kernel: T.TypedKernel, plans, device: Device):
        self.lows, self.kernel, self.plans = tuple(lows), kernel, tuple(plans)
        self.device = device

    def context(self) -> KernelSource:
        k = self.kernel
        ctypes = self.printer.ctypes
        params, tensors, scalars, dims = [], [], [], []
        tensor_list = [q for q in k.inputs if isinstance(q, T.TensorParam)] + list(k.outputs)
        for i, q in enumerate(tensor_list):
            const = "const " if not q.is_output else ""
            params.append(Param(f"{const}{ctypes[q.dtype]}* __restrict__", f"g_{q.name}"))
            tensors.append((f"g_{q.name}", f"{const}{ctypes[q.dtype]}*", i))
        for i, q in enumerate(x for x in k.inputs if isinstance(x, T.ScalarParam)):
            params.append(Param(scalar_ctype(q.dtype), f"p_{q.name}"))
            scalars.append((f"p_{q.name}", scalar_ctype(q.dtype), i))
        for i, d in enumerate(k.dims):
            params.append(Param("long long", f"d_{d.name}"))
            dims.append((f"d_{d.name}", i, d.static))
        index = {name: i for name, _, i in tensors}
        several = len(self.lows) > 1
        grids, summary = [], []
        for n, (low, plan) in enumerate(zip(self.lows, self.plans)):
            title = (f"grid {n + 1} of {len(self.lows)}: parallel "
                     + ", ".join(axis_text(a) for a in k.body[n].axes))
            printer = GridPrinter(self, low, k, plan)
            grids.append(printer.source(f"grid{n}" if several else "", title, index))
            lines = printer.summary()
            summary += [title] + [f"  {x}" for x in lines] if several else list(lines)
        multiples = tuple((f"d_{dim}", size, f"{line} with {tile}={size} in this build")
                          for dim, tile, size, line in
                          dim_multiples(k, [dict(plan.tiles) for plan in self.plans]))
        return KernelSource(k.name, tuple(summary), tuple(params), tuple(tensors),
                            tuple(scalars), tuple(dims), multiples, tuple(grids), self.includes(),
                            self.defines())

    # ---- what a backend adds ---------------------------------------------------------------
    def includes(self) -> tuple[str, ...]:
        return ()

    def defines(self) -> tuple[str, ...]:
        """Macros for the device headers, from what the lowered kernels decided:
        PTC_CVT_FP8, conversions to FP8 by the instruction (LoweredKernel.fp8_cvt)."""
        return ("PTC_CVT_FP8",) if any(low.fp8_cvt for low in self.lows) else ()

    def constants(self, low: LoweredKernel) -> list[tuple[str, int]]:
        """Compile-time constants of a grid beyond the launch's."""
        return []

    def map_setup(self, m: ir.TensorMap, tensor_index: int, scalar_expr) -> list[str]:
        raise NotImplementedError(f"{type(self).__name__} has no tensor maps ({m.name})")


class GridPrinter:
    """One grid's lowered kernel as C++: its function body, constants and layouts."""

    def __init__(self, renderer: CSourceRenderer, low: LoweredKernel, kernel: T.TypedKernel,
                 plan: Plan):
        self.renderer = renderer
        self.low, self.kernel, self.plan = low, kernel, plan
        self.tiles = dict(plan.tiles)

    def source(self, namespace: str, title: str, index: dict) -> GridSource:
        low, k = self.low, self.kernel
        p = self.renderer.printer(low, k, self.tiles)
        self.grid_indices(p)
        self.declarations(p)
        p.prologue()
        p.ops(low.body)
        constants = [("THREADS", low.launch.threads),
                     ("MIN_BLOCKS", low.launch.min_blocks),
                     ("MIN_BLOCKS_ELEMENTWISE", low.launch.min_blocks_elementwise),
                     ("SMEM_BYTES", low.launch.dynamic_smem)]
        constants += self.renderer.constants(low)
        grid = tuple((name, p.scalar_expr(count)) for name, count in low.launch.grid)
        layouts = []
        for lay in low.layouts:
            layouts += layout_struct(lay)
        aligned = []
        for kind, name, n in low.alignment:
            if kind == "dim":
                aligned.append(f"d_{name} % {n} == 0")
            elif kind == "bytes":
                aligned.append(f"{self.tensor_bytes(name)} <= {n}LL")
            else:
                aligned.append(f"(uintptr_t)tensors[{index['g_' + name]}] % {n} == 0")
        setup: list[str] = []
        for m in low.tensor_maps:
            setup += self.renderer.map_setup(m, index["g_" + m.tensor], p.scalar_expr)
        return GridSource(f"ptc_{k.name}_kernel", namespace, title, tuple(constants),
                          tuple(layouts), grid, tuple(aligned), tuple(p.lines),
                          tuple(m.name for m in low.tensor_maps), tuple(setup))

    def tensor_bytes(self, name: str) -> str:
        """The C expression of tensor `name`'s size in bytes, from its dims."""
        t = next(p for p in self.kernel.inputs + self.kernel.outputs if p.name == name)
        dims = " * ".join(f"d_{d}" if isinstance(d, str) else str(d) for d in t.dims)
        return f"(long long){dims} * {DTYPE_BYTES[t.dtype]}"

    def grid_indices(self, p: CBodyPrinter) -> None:
        p.emit(f"long long block = {p.BLOCK_ID};")
        for name, count in reversed(self.low.launch.grid):
            c = p.scalar_expr(count)
            p.emit(f"const int i_{name} = (int)(block % ({c})); block /= ({c});")

    def declarations(self, p: CBodyPrinter) -> None:
        tiles = [(name, home) for name, home in self.low.values if isinstance(home, ir.RegTile)]
        declared: dict[str, str] = {}
        for name, home in tiles:
            if home.name in declared:       # an addend in its accumulator's registers
                continue
            declared[home.name] = name
            lay = self.low.layout(home.layout)
            ctype, n, packed = c_storage(home, lay)
            what = f"{home.dtype}{list(home.shape)} in {home.layout}" + \
                (", two per register" if packed else "")
            also = [other for other, h in tiles if h.name == home.name and other != name]
            shared = f"; also {', '.join(also)}" if also else ""
            p.emit(f"{ctype} {home.name}[{n}];  // {name}: {what}{shared}")
            words = p.packed_words(home.name)
            if words:
                p.emit(words)

    def summary(self) -> tuple[str, ...]:
        plan, low = self.plan, self.low
        lines = [f"plan: {', '.join(plan.notes) or plan.style}; device {plan.device}",
                 "tiles: " + ", ".join(f"{k}={v}" for k, v in plan.tiles),
                 f"launch: {low.launch.threads} threads, {low.launch.dynamic_smem} bytes of "
                 f"shared memory, ~{low.launch.registers} registers per thread"]
        lines += [f"note: {note}" for note in low.notes]
        for b in sorted(low.buffers, key=lambda b: b.offset):
            lines.append(f"shared {b.name}: {b.dtype}{list(b.shape)}"
                         + (f" x {b.slots}" if b.slots > 1 else "")
                         + f" at {b.offset}..{b.end} ({b.purpose})")
        if plan.estimate:
            e = plan.estimate
            lines.append(f"estimate: {e.seconds * 1e6:.1f} us at the benchmark shape, bound by "
                         f"{e.bound}")
        return tuple(lines)


__all__ = ["CSourceRenderer", "GridPrinter", "GridSource", "KernelSource", "Param",
           "scalar_ctype"]
