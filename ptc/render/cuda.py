"""The CUDA renderer for single-role plans (multistage and sequential; sm80 and later).

Python decides everything — where each value lives, the shared-memory layout, which
helper each step calls — and builds a `KernelContext`; `templates/cuda/kernel.cu.j2` only
prints it. Device code lives in small headers beside the template, named by what moves
where: global_to_shared.cuh (cp.async), shared_to_global.cuh, mma_sync.cuh (ldmatrix +
mma.sync), ptc_types.cuh.

Storage: loaded tiles live in ring buffers in shared memory (`stages` slots, rows padded
by 16 bytes so ldmatrix rows spread over the banks); every other tile value lives in
shared memory too, one array per name, and each statement is one pass of the block's
threads over its elements, followed by a barrier. Tensor-core work reads operands with
ldmatrix and accumulates in registers for the whole K extent of the step.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..devices import Device
from ..sched.plan import LoopBlock, Plan, Step
from ..sema import typed as T
from ..stask.graph import STaskGraph
from ..stask.propagate import DTYPE_BYTES, extent_of
from .cexpr import CTYPES, ExprRenderer, store_value
from .smem import plan_storage, program_order

SUPPORTED_STYLES = ("multistage", "sequential")
# an accumulator stays in registers over a loop when its fragments take at most this many
MAX_ACCUMULATOR_REGISTERS = 128


class RenderError(Exception):
    """This plan cannot be rendered by this backend (the message says why)."""


@dataclass(frozen=True)
class Array:
    name: str          # C name
    dtype: str
    shape: tuple[int, ...]
    ld: int            # elements between rows (2-D) — padded
    slots: int
    offset: int = 0    # bytes into dynamic shared memory

    @property
    def ctype(self) -> str:
        return CTYPES[self.dtype]

    @property
    def slot_elems(self) -> int:
        if len(self.shape) == 2:
            return self.shape[0] * self.ld
        return self.shape[0] if self.shape else 1

    @property
    def bytes(self) -> int:
        return _align(self.slot_elems * self.slots * DTYPE_BYTES[self.dtype], 16)


@dataclass(frozen=True)
class Param:
    ctype: str
    name: str


@dataclass(frozen=True)
class KernelContext:
    kernel: str
    func: str
    summary: tuple[str, ...]
    constants: tuple[tuple[str, int], ...]
    params: tuple[Param, ...]
    tensor_args: tuple[tuple[str, str, int], ...]   # (C name, C type, index into tensors[])
    scalar_args: tuple[tuple[str, str, int], ...]   # (C name, C type, index into scalars[])
    dim_args: tuple[tuple[str, int, int | None], ...]  # (C name, index into dims[], static)
    grid: tuple[tuple[str, str], ...]               # (C index name, count expression)
    threads: int
    smem_bytes: int
    arrays: tuple[Array, ...]
    body: tuple[str, ...]


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def _pad(cols: int, dtype: str) -> int:
    """Row length in elements: 16 bytes more than needed, so ldmatrix rows hit other banks."""
    per16 = 16 // DTYPE_BYTES[dtype]
    return _align(cols, per16) + per16


class CudaRenderer:
    def __init__(self, kernel: T.TypedKernel, plan: Plan, graph: STaskGraph, device: Device):
        if plan.style not in SUPPORTED_STYLES or len(plan.roles) != 1:
            raise RenderError(f"the CUDA renderer takes single-role plans "
                              f"({', '.join(SUPPORTED_STYLES)}); this one is {plan.style}")
        if len(kernel.body) != 1:
            # the plan and graph are those of one grid: the others would be dropped silently
            raise RenderError(f"kernel {kernel.name} has {len(kernel.body)} parallel grids; "
                              f"the CUDA renderer takes one")
        self.k, self.plan, self.g, self.device = kernel, plan, graph, device
        self.role = plan.roles[0]
        self.threads = self.role.warps * device.resources.warp_size
        self.warps = self.role.warps
        self.tasks = {t.name: t for t in graph.tasks}
        self.buffer_of_value = {b.value: b for b in plan.buffers}
        self.arrays: dict[str, Array] = {}
        self.lines: list[str] = []
        self.depth = 1
        self.scratch = 0
        self.exprs = ExprRenderer(self._read, self._scalar, self._extent)
        self.ahead: dict[str, int] = {}    # loop -> prefetch distance
        self.in_registers: dict[str, str] = {}   # mma task -> its register accumulator

    # ---- names -------------------------------------------------------------------------
    def _extent(self, e: T.Extent) -> int:
        return extent_of(self.k, self.g.tiles, e)

    def _scalar(self, name: str) -> str:
        if name in self.g.tiles:
            return f"T_{name}"
        if any(d.name == name for d in self.k.dims):
            return f"d_{name}"
        if any(p.name == name for p in self.k.inputs):
            return f"p_{name}"
        return f"i_{name}"  # grid and loop indices

    @staticmethod
    def value_name(name: str) -> str:
        return f"t_{name[1:]}" if name.startswith("%") else f"v_{name}"

    def _read(self, name: str, idx: list[str]) -> str:
        arr, slot = self._array_of(name)
        return f"{arr.name}[{slot}{self._linear(arr, idx)}]"

    def _array_of(self, name: str) -> tuple[Array, str]:
        if name in self.buffer_of_value:
            b = self.buffer_of_value[name]
            arr = self.arrays[b.name]
            return arr, f"{self._slot(b)} * {arr.slot_elems} + " if arr.slots > 1 else ""
        return self.arrays[self.value_name(name)], ""

    def _linear(self, arr: Array, idx: list[str]) -> str:
        if len(arr.shape) == 2:
            return f"({idx[0]}) * {arr.ld} + ({idx[1]})"
        if len(arr.shape) == 1:
            return f"({idx[0]})"
        return "0"

    def _slot(self, b) -> str:
        task = self.tasks[b.producer]
        return f"ring_{b.name}_slot" if task.region else "0"

    # ---- storage -----------------------------------------------------------------------
    def _layout(self) -> None:
        """Ring buffers first, each its own; then tile values, sharing bytes where their
        live ranges allow (ptc.render.smem)."""
        offset = 0
        placed: dict[str, Array] = {}
        for b in self.plan.buffers:
            shape = tuple(b.shape)
            if len(shape) > 2:
                raise RenderError(f"buffer {b.name} has {len(shape)} dims; tiles have at most 2")
            arr = Array(b.name, b.dtype, shape, _pad(shape[-1], b.dtype) if len(shape) == 2 else 0,
                        b.stages, offset)
            placed[b.name] = arr
            offset += arr.bytes
        for t in self.g.tasks:
            for s in t.stmts:
                if isinstance(s, T.Let) and s.name not in self.buffer_of_value:
                    self._value_array(self.value_name(s.name), s.value.type)
        values = {n: a for n, a in self.arrays.items() if n not in placed}
        order, loops = program_order(self.role, self.tasks)
        named = []
        for pos, st in order:
            if st.name in self.buffer_of_value:
                continue
            for r in _reductions(st.value):   # scratch arrays live just for their statement
                if id(r) in self.reductions:
                    named.append((pos, T.Let(self.reductions[id(r)], T.Const(0, r.type), st.span)))
            named.append((pos, T.Let(self.value_name(st.name),
                                     _rename(st.value, self.value_name), st.span)))
        named.sort(key=lambda x: x[0])
        cls, offsets, total = plan_storage(
            named, loops, None, {n: a.bytes for n, a in values.items()},
            {n: a.dtype for n, a in values.items()}, {n: a.shape for n, a in values.items()})
        for n, a in values.items():
            placed[n] = Array(a.name, a.dtype, a.shape, a.ld, a.slots, offset + offsets[cls[n]])
        self.arrays = placed
        self.smem = _align(offset + total, 16)
        limit = self.device.resources.shared_memory_bytes
        if self.smem > limit:
            raise RenderError(f"the tiles of this plan need {self.smem // 1024} KB of shared "
                              f"memory, over the {limit // 1024} KB a block may use")

    def _value_array(self, name: str, ty: T.TileType) -> Array:
        if name not in self.arrays:
            shape = tuple(self._extent(e) for e in ty.shape)
            if len(shape) > 2:
                raise RenderError(f"{name} has {len(shape)} dims; tiles have at most 2")
            ld = _pad(shape[-1], ty.dtype) if len(shape) == 2 else 0
            self.arrays[name] = Array(name, ty.dtype, shape, ld, 1)
        return self.arrays[name]

    # ---- code --------------------------------------------------------------------------
    def emit(self, line: str = "") -> None:
        self.lines.append("  " * self.depth + line if line else "")

    def sync(self) -> None:
        if not self.lines or self.lines[-1].strip() != "__syncthreads();":
            self.emit("__syncthreads();")

    def render(self) -> KernelContext:
        self._prepare_scratch()
        self._layout()
        self._grid_indices()
        self._ring_counters()
        self._items(self.role.body)
        return self._context()

    def _prepare_scratch(self) -> None:
        """Reductions nested in simt statements get arrays of their own."""
        self.reductions: dict[int, str] = {}
        for t in self.g.tasks:
            if t.kind != "simt":
                continue
            for s in t.stmts:
                for r in _reductions(s.value if isinstance(s, T.Let) else s.value):
                    name = f"r_{len(self.reductions)}"
                    self.reductions[id(r)] = name
                    self._value_array(name, r.type)

    def _grid_indices(self) -> None:
        self.emit("long long block = blockIdx.x;")
        for a in reversed(self.g.grid.axes):
            count = self._grid_count(a)
            self.emit(f"const long long i_{a.var} = block % ({count}); block /= ({count});")

    def _grid_count(self, a: T.GridAxis) -> str:
        if a.size is None:
            return f"d_{a.dim}"
        return f"ptc::tiles(d_{a.dim}, {self._extent(a.size)})"

    def _ring_counters(self) -> None:
        for b in self.plan.buffers:
            if self.tasks[b.producer].region:
                self.emit(f"long long ring_{b.name} = 0;  // writes so far (slot = count % {b.stages})")

    def _items(self, items) -> None:
        for it in items:
            if isinstance(it, LoopBlock):
                self._loop(it)
            else:
                self._step(it, None)

    def _loop(self, block: LoopBlock) -> None:
        region = next(r for r in self.g.loop_regions() if r.name == block.var)
        loop = region.loop
        size = self._extent(loop.axis.size)
        extent = f"d_{loop.axis.dim}"
        if loop.until is not None:
            bound = self.exprs.render(loop.until, [])
            extent = f"min({extent}, (long long)({bound}))"
        trips = f"trips_{block.var}"
        self.emit(f"// for {block.var}: {loop.axis.size} of {loop.axis.dim}"
                  + (" (until ...)" if loop.until is not None else ""))
        self.emit(f"const long long {trips} = ptc::tiles({extent}, {size});")
        steps = [s for s in block.body if isinstance(s, Step)]
        ahead = max((s.offset for s in steps), default=0)
        loads = {s.task: s.offset for s in steps if self.tasks.get(s.task) is not None
                 and self.tasks[s.task].op == "load"}
        if ahead and set(loads.values()) != {ahead}:
            # cp.async groups complete in order and one group is one iteration's prefetch:
            # the waits are only right when every load of the loop runs equally far ahead
            raise RenderError(f"loop {block.var} issues its loads at different distances ahead "
                              f"({', '.join(f'{t} +{o}' for t, o in loads.items())}); the CUDA "
                              f"renderer takes one prefetch distance per loop")
        self.ahead[block.var] = ahead
        held = self._register_accumulators(block)
        for t, x, arr, (m, n) in held:
            self.emit(f"ptc::Accumulator<{m}, {n}, WARPS> acc_{x};  // {t}: in registers over the loop")
            self.emit(f"ptc::accumulator_shared<{m}, {n}, WARPS, false>(acc_{x}, {arr.name}, {arr.ld});")
        it = f"it_{block.var}"
        self.emit(f"for (long long {it} = {-ahead}; {it} < {trips}; ++{it}) {{")
        self.depth += 1
        prefetch = [s for s in steps if s.offset > 0]
        for s in prefetch:
            self.emit(f"{{  // {s.task}, {s.offset} iteration(s) ahead")
            self.depth += 1
            self.emit(f"const long long i_{block.var} = {it} + {s.offset};")
            self.emit(f"if (i_{block.var} < {trips}) {{")
            self.depth += 1
            self._step(s, block.var, commit=False)
            self.depth -= 1
            self.emit("}")
            self.depth -= 1
            self.emit("}")
        if prefetch:
            self.emit("ptc::cp_async_commit();  // one group per iteration, empty at the tail")
        self.emit(f"if ({it} >= 0) {{")
        self.depth += 1
        self.emit(f"const long long i_{block.var} = {it};")
        for b in self.plan.buffers:
            if self.tasks[b.producer].region == block.var:
                self.emit(f"const long long ring_{b.name}_slot = (ring_{b.name} + i_{block.var}) % {b.stages};")
        for item in block.body:
            if isinstance(item, LoopBlock):
                self._loop(item)
            elif item.offset == 0:
                self._step(item, block.var)
        self.sync()  # every read of this iteration's slots is done before they are refilled
        self.depth -= 1
        self.emit("}")
        self.depth -= 1
        self.emit("}")
        for b in self.plan.buffers:
            if self.tasks[b.producer].region == block.var:
                self.emit(f"ring_{b.name} += {trips};")
        for t, x, arr, (m, n) in held:
            self.emit(f"ptc::accumulator_shared<{m}, {n}, WARPS, true>(acc_{x}, {arr.name}, {arr.ld});")
            self.in_registers.pop(t)
        if held:
            self.sync()

    def _register_accumulators(self, block: LoopBlock) -> list:
        """mma steps of this loop that accumulate into a value nothing else in the loop
        touches: their accumulator stays in mma fragments for the whole loop."""
        inside = {t.name for t in self.g.tasks if block.var in _loop_path(self.g, t.region)}
        held = []
        for step in block.body:
            if not isinstance(step, Step) or step.offset or step.task not in self.tasks:
                continue
            t = self.tasks[step.task]
            spec = self._mma_spec(t)
            if spec is None or not spec["tensor_core"] or spec["addend"] != t.stmts[0].name:
                continue
            x = t.stmts[0].name
            others = [o for o in inside if o != t.name
                      and (x in self.tasks[o].uses or x in self.tasks[o].defines)]
            fragments = spec["m"] // 16 * spec["n"] // 8 // self.warps + 1
            if others or fragments * 4 > MAX_ACCUMULATOR_REGISTERS:
                continue
            arr = self.arrays[self.value_name(x)]
            self.in_registers[t.name] = f"acc_{self.value_name(x)}"
            held.append((t.name, self.value_name(x), arr, (spec["m"], spec["n"])))
        return held

    def _step(self, step: Step, loop: str | None, commit: bool = True) -> None:
        if step.waits:
            self._wait(step.waits, loop)
        if step.task == "sync":
            return
        t = self.tasks[step.task]
        self.emit(f"// {t.name} on {step.unit}")
        if t.op == "load":
            self._load(t, step, loop)
            if commit:
                self.emit("ptc::cp_async_commit();")
        elif t.op in ("store", "atomic_add"):
            self._store(t)
        elif t.kind == "mma":
            self._mma(t)
        else:
            self._simt(t)

    def _wait(self, barriers, loop: str | None) -> None:
        """cp.async groups complete in order: wait until at most `pending` are in flight,
        where a group is one iteration's prefetch (or one load outside the pipeline)."""
        pending = []
        for barrier in barriers:
            b = self.plan.buffer(self.plan.barrier(barrier).buffer)
            producer = self.tasks[b.producer]
            pending.append(self.ahead.get(producer.region, 0) if producer.region == loop else 0)
        self.emit(f"ptc::cp_async_wait<{min(pending)}>();  // {', '.join(barriers)}")
        self.sync()

    # ---- tasks -------------------------------------------------------------------------
    def _tensor_tile(self, tensor: str, index) -> dict:
        """Base pointer, rows and columns of a tile of `tensor` in global memory."""
        p = self.k.tensor(tensor)
        dims = [str(d) if isinstance(d, int) else f"d_{d}" for d in p.dims]
        strides = []
        for j in range(len(dims)):
            rest = dims[j + 1:]
            strides.append(" * ".join(rest) if rest else "1")
        offset, valid, axes = [], [], []
        for item, dim, stride in zip(index, dims, strides):
            if isinstance(item, T.Point):
                v = self.exprs.render(item.index, [])
                offset.append(f"({v}) * ({stride})")
                valid.append(f"({v}) >= 0 && ({v}) < {dim}")
            elif isinstance(item, T.TileSlice):
                size = self._extent(item.size)
                axes.append((f"i_{item.var} * {size}", dim, stride, size))
            else:
                axes.append(("0", dim, stride, self._extent(item.extent)))
        if len(axes) > 2:
            raise RenderError(f"a tile of {tensor} spans {len(axes)} dims; at most 2 are supported")
        while len(axes) < 2:
            axes.insert(0, ("0", "1", "0", 1))
        (r0, nr, rs, rows), (c0, nc, cs, cols) = axes
        if valid:
            nr = f"(({' && '.join(valid)}) ? {nr} : 0)"
        base = f"{_param_name(tensor)}" + (f" + {' + '.join(offset)}" if offset else "")
        return dict(base=base, row0=r0, nrows=nr, rstride=rs, col0=c0, ncols=nc, cstride=cs,
                    rows=rows, cols=cols)

    def _load(self, t, step: Step, loop: str | None) -> None:
        (s,) = t.stmts
        b = self.buffer_of_value[s.name]
        arr = self.arrays[b.name]
        tile = self._tensor_tile(s.value.tensor, s.value.index)
        slot = ""
        if arr.slots > 1 or self.tasks[b.producer].region:
            slot = f" + ((ring_{b.name} + i_{loop}) % {b.stages}) * {arr.slot_elems}"
        ld = arr.ld if len(arr.shape) == 2 else max(tile["cols"], 1)
        self.emit(f"ptc::global_to_shared<{arr.ctype}, {tile['rows']}, {tile['cols']}, {ld}, THREADS>("
                  f"{arr.name}{slot}, {tile['base']}, {tile['row0']}, {tile['nrows']}, "
                  f"{tile['rstride']}, {tile['col0']}, {tile['ncols']}, {tile['cstride']}, "
                  f"{_pad_literal(s.value.pad)});")

    def _store(self, t) -> None:
        (s,) = t.stmts
        src = self.arrays[self.value_name(s.value.name)]
        tile = self._tensor_tile(s.tensor, s.index)
        ld = src.ld if len(src.shape) == 2 else max(tile["cols"], 1)
        atomic = "true" if s.atomic else "false"
        self.emit(f"ptc::shared_to_global<{src.ctype}, {tile['rows']}, {tile['cols']}, {ld}, "
                  f"THREADS, {atomic}>({tile['base']}, {src.name}, {tile['row0']}, "
                  f"{tile['nrows']}, {tile['rstride']}, {tile['col0']}, {tile['ncols']}, "
                  f"{tile['cstride']});")
        self.sync()

    def _operand(self, e) -> tuple[str, int, bool]:
        """(pointer, leading dim, transposed) of an mma operand held in shared memory."""
        transposed = isinstance(e, T.Transpose)
        var = e.arg if transposed else e
        arr, slot = self._array_of(var.name)
        ld = arr.ld if len(arr.shape) == 2 else arr.shape[-1]
        ptr = f"{arr.name} + {slot.rstrip(' +')}" if slot else arr.name
        return ptr, ld, transposed

    def _mma_spec(self, t) -> dict | None:
        """How an mma task runs: operands, extents, and whether tensor cores take it."""
        if t.kind != "mma":
            return None
        (s,) = t.stmts
        v = s.value
        addend, mm = (v.args if isinstance(v, T.Elementwise) else (None, v))
        a_ptr, lda, a_t = self._operand(mm.lhs)
        b_ptr, ldb, b_t = self._operand(mm.rhs)
        m, kk = (self._extent(x) for x in mm.lhs.type.shape)   # a transposed operand's type
        n = self._extent(mm.rhs.type.shape[1])                   # is already the transpose
        dtype = mm.lhs.type.dtype
        tensor_core = (dtype in ("f16", "bf16") and m % 16 == 0 and n % 8 == 0
                       and kk % 16 == 0 and lda % 8 == 0 and ldb % 8 == 0)
        return dict(a=a_ptr, lda=lda, a_t=a_t, b=b_ptr, ldb=ldb, b_t=b_t, m=m, n=n, k=kk,
                    dtype=dtype, tensor_core=tensor_core,
                    addend=addend.name if addend is not None else None)

    def _mma(self, t) -> None:
        (s,) = t.stmts
        spec = self._mma_spec(t)
        ctype = CTYPES[spec["dtype"]]
        flags = f"{'true' if spec['a_t'] else 'false'}, {'true' if spec['b_t'] else 'false'}"
        dims = f"{spec['m']}, {spec['n']}, {spec['k']}"
        operands = f"{spec['a']}, {spec['lda']}, {spec['b']}, {spec['ldb']}"
        if t.name in self.in_registers:
            self.emit(f"ptc::mma_accumulate<{ctype}, {dims}, {flags}, WARPS>("
                      f"{self.in_registers[t.name]}, {operands});")
            return
        out = self._value_array(self.value_name(s.name), s.value.type)
        add_ptr, add_ld = "nullptr", 0
        if spec["addend"] is not None:
            add_arr, _ = self._array_of(spec["addend"])
            add_ptr, add_ld = add_arr.name, add_arr.ld
        helper = ("mma_tile", "WARPS") if spec["tensor_core"] else ("matmul_simt", "THREADS")
        self.emit(f"ptc::{helper[0]}<{ctype}, {dims}, {flags}, {helper[1]}>({out.name}, "
                  f"{out.ld}, {add_ptr}, {add_ld}, {operands});")
        self.sync()

    def _simt(self, t) -> None:
        for s in t.stmts:
            for r in _reductions(s.value):
                self._reduce(r)
            self._elementwise(self.value_name(s.name), s.value)

    def _elementwise(self, target: str, e: T.TExpr) -> None:
        arr = self.arrays[target]
        shape = [self._extent(x) for x in e.type.shape]
        n = math.prod(shape)
        idx = _unflatten("e", shape)
        value = self._render_with_reductions(e, [name for name, _ in idx])
        self.emit(f"for (int e = threadIdx.x; e < {n}; e += THREADS) {{")
        self.depth += 1
        for name, expr in idx:
            self.emit(f"const int {name} = {expr};")
        self.emit(f"{arr.name}[{self._linear(arr, [i for i, _ in idx])}] = "
                  f"{store_value(value, e.type.dtype)};")
        self.depth -= 1
        self.emit("}")
        self.sync()

    def _render_with_reductions(self, e, idx: list[str]) -> str:
        """Render e for element `idx`, reading nested reductions from their arrays."""
        saved = self.exprs.render

        def render(node, idx):
            if isinstance(node, T.Reduce):
                arr = self.arrays[self.reductions[id(node)]]
                value = f"{arr.name}[{self._linear(arr, idx)}]"
                return f"ptc::f32({value})" if node.type.dtype in ("f32", "f16", "bf16") else value
            return saved(node, idx)

        self.exprs.render = render
        try:
            return render(e, idx)
        finally:
            self.exprs.render = saved

    def _reduce(self, r: T.Reduce) -> None:
        target = self.arrays[self.reductions[id(r)]]
        in_shape = [self._extent(x) for x in r.arg.type.shape]
        out_shape = in_shape[:r.axis] + in_shape[r.axis + 1:]
        n = math.prod(out_shape)
        idx = _unflatten("e", out_shape)
        names = [i for i, _ in idx]
        src = names[:r.axis] + ["j"] + names[r.axis:]
        value = self._render_with_reductions(r.arg, src)
        float_acc = r.type.dtype in ("f32", "f16", "bf16")
        init = {"sum": "0", "max": "-INFINITY", "min": "INFINITY"}[r.op] if float_acc else \
            {"sum": "0", "max": "LLONG_MIN", "min": "LLONG_MAX"}[r.op]
        combine = {"sum": "acc += x;", "max": "acc = fmaxf(acc, x);" if float_acc else "acc = x > acc ? x : acc;",
                   "min": "acc = fminf(acc, x);" if float_acc else "acc = x < acc ? x : acc;"}[r.op]
        acc_t = "float" if float_acc else "long long"
        self.emit(f"for (int e = threadIdx.x; e < {max(n, 1)}; e += THREADS) {{  // {r.op} over axis {r.axis}")
        self.depth += 1
        for name, expr in idx:
            self.emit(f"const int {name} = {expr};")
        self.emit(f"{acc_t} acc = {init};")
        self.emit(f"for (int j = 0; j < {in_shape[r.axis]}; ++j) {{")
        self.depth += 1
        # sum of a half-precision tile accumulates the f32 values; max/min keep them
        self.emit(f"const {acc_t} x = {value};")
        self.emit(combine)
        self.depth -= 1
        self.emit("}")
        result = "acc"
        if r.type.dtype in ("f16", "bf16"):
            result = f"ptc::round_{r.type.dtype}(acc)"
        self.emit(f"{target.name}[{self._linear(target, names)}] = {store_value(result, r.type.dtype)};")
        self.depth -= 1
        self.emit("}")
        self.sync()

    # ---- the context ---------------------------------------------------------------------
    def _context(self) -> KernelContext:
        k = self.k
        params, tensors, scalars, dims = [], [], [], []
        tensor_list = [p for p in k.inputs if isinstance(p, T.TensorParam)] + list(k.outputs)
        for i, p in enumerate(tensor_list):
            const = "const " if not p.is_output else ""
            params.append(Param(f"{const}{CTYPES[p.dtype]}* __restrict__", _param_name(p.name)))
            tensors.append((_param_name(p.name), f"{const}{CTYPES[p.dtype]}*", i))
        for i, p in enumerate(q for q in k.inputs if isinstance(q, T.ScalarParam)):
            params.append(Param(_scalar_ctype(p.dtype), f"p_{p.name}"))
            scalars.append((f"p_{p.name}", _scalar_ctype(p.dtype), i))
        for i, d in enumerate(k.dims):
            params.append(Param("long long", f"d_{d.name}"))
            dims.append((f"d_{d.name}", i, d.static))
        constants = [(f"T_{n}", v) for n, v in self.g.tiles.items()]
        constants += [("THREADS", self.threads), ("WARPS", self.warps),
                      ("SMEM_BYTES", max(self.smem, 16))]
        grid = tuple((f"i_{a.var}", self._grid_count(a)) for a in self.g.grid.axes)
        return KernelContext(k.name, f"ptc_{k.name}_kernel", _summary(self.plan, self.g),
                             tuple(constants), tuple(params), tuple(tensors), tuple(scalars),
                             tuple(dims), grid, self.threads, max(self.smem, 16),
                             tuple(self.arrays.values()), tuple(self.lines))


def _loop_path(g: STaskGraph, region: str) -> list[str]:
    parents = {r.name: r.parent for r in g.regions()}
    path = []
    while region:
        path.append(region)
        region = parents[region]
    return path


def _param_name(tensor: str) -> str:
    return f"g_{tensor}"


def _scalar_ctype(dtype: str) -> str:
    return {"f32": "float", "f16": "float", "bf16": "float", "i32": "int", "bool": "bool"}[dtype]


def _pad_literal(pad: float) -> str:
    if math.isinf(pad):
        return "-INFINITY" if pad < 0 else "INFINITY"
    return f"{float(pad)!r}f"


def _unflatten(flat: str, shape: list[int]) -> list[tuple[str, str]]:
    """C expressions for the multi-index of flat element `flat` of a row-major shape."""
    out = []
    for j in range(len(shape)):
        inner = math.prod(shape[j + 1:])
        expr = f"{flat} / {inner}" if inner > 1 else flat
        if j > 0:
            expr = f"({expr}) % {shape[j]}"
        out.append((f"e{j}", expr))
    return out


def _rename(e, name_of):
    """The expression with every Var renamed by name_of (for liveness by C array name)."""
    if isinstance(e, T.Var):
        from dataclasses import replace
        return replace(e, name=name_of(e.name))
    return T.map_children(e, lambda c: _rename(c, name_of))


def _reductions(e) -> list[T.Reduce]:
    """Reduce nodes of an expression, innermost first."""
    out: list[T.Reduce] = []
    for c in T.children(e):
        out.extend(_reductions(c))
    if isinstance(e, T.Reduce):
        out.append(e)
    return out


def _summary(plan: Plan, g: STaskGraph) -> tuple[str, ...]:
    lines = [f"plan: {', '.join(plan.notes) or plan.style}; device {plan.device}",
             "tiles: " + ", ".join(f"{k}={v}" for k, v in plan.tiles)]
    for role in plan.roles:
        lines.append(f"role {role.name}: {role.warps} warps, {role.registers} registers/thread")
    for b in plan.buffers:
        lines.append(f"buffer {b.name}: {b.dtype}{list(b.shape)} x {b.stages} stage(s) in {b.space}")
    if plan.estimate:
        e = plan.estimate
        lines.append(f"estimate: {e.seconds * 1e6:.1f} us at the benchmark shape, bound by {e.bound}")
    return tuple(lines)
