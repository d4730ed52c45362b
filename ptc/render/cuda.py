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

Modules: this one drives the kernel (grid, loops, steps, waits) and builds the context;
cuda_context (KernelContext, Array, Param, RenderError), cuda_storage (shared-memory
layout), cuda_transfers (loads, stores), cuda_mma (matrix multiplies), cuda_simt
(elementwise statements, reductions).
"""
from __future__ import annotations

from ..devices import Device
from ..sched.plan import LoopBlock, Plan, Step
from ..sema import typed as T
from ..stask.graph import STaskGraph
from ..stask.propagate import extent_of
from .cexpr import CTYPES, ExprRenderer
from .cuda_context import Array, KernelContext, Param, RenderError
from .cuda_mma import MmaMixin
from .cuda_simt import SimtMixin
from .cuda_storage import StorageMixin
from .cuda_transfers import TransferMixin, param_name

SUPPORTED_STYLES = ("multistage", "sequential")


class CudaRenderer(StorageMixin, TransferMixin, MmaMixin, SimtMixin):
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

    # ---- the context ---------------------------------------------------------------------
    def _context(self) -> KernelContext:
        k = self.k
        params, tensors, scalars, dims = [], [], [], []
        tensor_list = [p for p in k.inputs if isinstance(p, T.TensorParam)] + list(k.outputs)
        for i, p in enumerate(tensor_list):
            const = "const " if not p.is_output else ""
            params.append(Param(f"{const}{CTYPES[p.dtype]}* __restrict__", param_name(p.name)))
            tensors.append((param_name(p.name), f"{const}{CTYPES[p.dtype]}*", i))
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


def _scalar_ctype(dtype: str) -> str:
    return {"f32": "float", "f16": "float", "bf16": "float", "i32": "int", "bool": "bool"}[dtype]


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
