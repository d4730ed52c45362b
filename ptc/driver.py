"""The pipeline, in one place: each stage is one function; `STAGES` lists them in order.

    source bytes --decode/parse--> ast.Module --check--> typed.Program
        --build/propagate--> STaskGraph --schedule(device)--> Plan (verified)
    --lower--> LoweredKernel --render--> kernel source (.cu)
    and, as the semantic oracle: typed.Program --interpret--> arrays

The search ranks only plans the target's renderer builds, each as the lowering builds it
(`buildable`): the plan `--emit plan` prints is the plan `-o DIR` builds. Building and
running a rendered kernel is ptc.runtime's; docs/architecture.md maps every stage to its
module and its IR.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from . import ast
from .diagnostics import CompileError, Diagnostic
from .dims import DimBinder
from .grammar import decode_source, parse
from .sema import check
from .sema.typed import Program, TypedKernel

STAGES = ("ast", "typed", "stask", "plan", "lowered", "source")


def read_source(path: str | Path) -> tuple[str, str]:
    """(filename, text) of a .pt file; a missing or unreadable file is a diagnostic."""
    filename = str(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise CompileError(Diagnostic(f"{filename}: no such file")) from None
    except IsADirectoryError:
        raise CompileError(Diagnostic(f"{filename} is a directory, not a .pt file")) from None
    except OSError as exc:
        raise CompileError(Diagnostic(f"cannot read {filename}: {exc.strerror}")) from None
    return filename, decode_source(data, filename)


def parse_file(path: str | Path) -> ast.Module:
    filename, text = read_source(path)
    return parse(text, filename)


def check_file(path: str | Path, shapes: Mapping[str, int] | None = None) -> Program:
    return check(parse_file(path), dict(shapes or {}))


def select_kernel(program: Program, name: str | None) -> TypedKernel:
    if name is None:
        if len(program.kernels) == 1:
            return program.kernels[0]
        names = ", ".join(k.name for k in program.kernels) or "none"
        raise CompileError(Diagnostic(
            f"{program.filename} holds {len(program.kernels)} kernels ({names})",
            hint="choose one with --kernel NAME"))
    for k in program.kernels:
        if k.name == name:
            return k
    names = ", ".join(k.name for k in program.kernels) or "none"
    raise CompileError(Diagnostic(f"no kernel named {name!r} in {program.filename}",
                                  hint=f"kernels here: {names}"))


def interpret(path: str | Path, inputs: Mapping[str, np.ndarray] | None = None, *,
              kernel: str | None = None, shapes: Mapping[str, int] | None = None,
              tiles: Mapping[str, int] | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """Run a kernel of a .pt file on the reference interpreter; returns outputs by name.

    Dims not in `shapes` come from the inputs' shapes, then from the kernel's `dims` line.
    Inputs not given are drawn at random (seeded).
    """
    from .interp import run_kernel

    from .sema.tiles import pinned_tiles

    inputs = dict(inputs or {})
    module = parse_file(path)
    shapes = dict(shapes or {})
    program = check(module, {**dims_from_inputs(module, kernel, inputs), **shapes})
    chosen = select_kernel(program, kernel)
    pinned_tiles(chosen, dict(tiles or {}))     # a declared tile size takes its candidates
    # the interpreter binds the inputs' dims again, saying which input a size came from
    return run_kernel(chosen, inputs, shapes=shapes, tiles=tiles or {}, seed=seed)


def dims_from_inputs(module: ast.Module, kernel: str | None,
                     inputs: Mapping[str, object]) -> dict[str, int]:
    """Dim sizes that the given input arrays imply, so that a dim needed at compile time
    can come from the data; conflicts are left for the interpreter to report."""
    binder = DimBinder()
    for k in module.kernels:
        if kernel is not None and k.name != kernel or kernel is None and len(module.kernels) > 1:
            continue
        for p in k.params:
            if p.name in inputs and isinstance(p.type, ast.TensorType):
                dims = tuple(d.name for d in p.type.dims)
                binder.bind((p.name, dims), np.shape(inputs[p.name]), strict=False)
    return binder.sizes


# ---- scheduling (stask, plan) ---------------------------------------------------------
# A kernel with several `parallel` grids is scheduled, lowered and rendered grid by grid
# (ptc.sema.grids: one single-grid kernel each, launched in order); the functions below
# that take a kernel return one result per grid, in order.
def grids(kernel: TypedKernel) -> tuple[TypedKernel, ...]:
    from .sema.grids import grid_kernels

    return grid_kernels(kernel)


def stask_graph(kernel: TypedKernel, tiles: Mapping[str, int] | None = None):
    """The sTask-graph of a one-grid kernel, propagated with `tiles` (defaults: each tile
    size's first candidate)."""
    from .stask import build_graph, propagate

    kernel = _one_grid(kernel)
    return propagate(build_graph(kernel, kernel.body[0]), _tiles_of(kernel, tiles))


def stask_graphs(kernel: TypedKernel, tiles: Mapping[str, int] | None = None) -> tuple:
    """Every grid's sTask-graph."""
    from .stask.propagate import resolve_tiles

    resolve_tiles(kernel, dict(tiles or {}))     # --tile names a tile size of the kernel
    return tuple(stask_graph(g, tiles) for g in grids(kernel))


def _one_grid(kernel: TypedKernel) -> TypedKernel:
    """A one-grid kernel as the back end builds it (grids(): tiles of rank 3 as rows)."""
    if len(kernel.body) != 1:   # a caller's mistake, not the user's: never drop a grid
        raise ValueError(f"kernel {kernel.name} has {len(kernel.body)} grids; take them "
                         "one by one (ptc.driver.grids)")
    return grids(kernel)[0]


def _tiles_of(kernel: TypedKernel, tiles: Mapping[str, int] | None) -> dict[str, int]:
    """The --tile sizes that this (grid's) kernel declares."""
    names = {t.name for t in kernel.tiles}
    return {k: v for k, v in (tiles or {}).items() if k in names}


def problem_dims(kernel: TypedKernel, shapes: Mapping[str, int] | None) -> dict[str, int]:
    """The problem size the cost model times: --shape, then the `dims` defaults."""
    from .interp import bind_dims

    return bind_dims(kernel, {}, dict(shapes or {}))


def schedule(kernel: TypedKernel, target: str, *, shapes: Mapping[str, int] | None = None,
             tiles: Mapping[str, int] | None = None, progress: bool = False):
    """Search the best plan of a one-grid kernel for `target` (a builtin name or a device
    YAML path)."""
    from .devices import get_device
    from .sched.search import SearchRecord, search, search_for_cli
    from .render import capabilities
    from .stage_cache import STAGES, content_key
    from .stask.propagate import resolve_tiles

    kernel = _one_grid(kernel)
    device = get_device(target)
    # what the backend builds is part of the key: a backend outside ptc (a test's, a
    # user's package) is not in ptc's fingerprint
    builds = capabilities(device)
    dims = problem_dims(kernel, shapes)
    fixed = dict(tiles or {})
    # --tile names a tile size of the kernel; some choice keeps its `divides` lines
    resolve_tiles(kernel, fixed, dims=dims)
    run = search_for_cli if progress else search

    ran = []

    def searched() -> SearchRecord:
        key = content_key("candidates", kernel, device, builds)
        made = candidates_made(key)
        known = len(made)
        ran.append(run(kernel, device, dims, fixed_tiles=fixed, made=made,
                       **build_options(device)))
        stored = STAGES.get("candidates", key)
        if len(made) > known or not isinstance(stored, dict):  # new, or not on disk yet
            STAGES.put("candidates", key, {**stored, **made} if isinstance(stored, dict)
                       else made)     # with what another process stored meanwhile
        return SearchRecord.of(ran[0])
    # memoized on disk: the same search is done once per machine (ptc.stage_cache)
    key = content_key("search", kernel, device, builds, dims, fixed)
    record = STAGES.get_or_compute("search", key, searched)
    return ran[0] if ran else record.result(kernel, device)


# The candidates searches made, per kernel and device (ptc.sched.search: `made`): a search
# of the kernel at other dims (an edge shape, the next shape a PyTorch caller brings) only
# times them again. Kept in the stage cache, so that any process's search reuses what an
# earlier one made (a test suite's workers, `ptc compile` after `ptc bench`), and in memory
# for the kernels this process searched last.
CANDIDATES_KEPT = 32
_CANDIDATES: OrderedDict[str, dict] = OrderedDict()


def candidates_made(key: str) -> dict:
    """The candidates made for `key` (a content key of the kernel and the device): this
    process's, else the stage cache's, else none yet."""
    from .stage_cache import STAGES

    made = _CANDIDATES.pop(key, None)
    if made is None:
        stored = STAGES.get("candidates", key)
        made = stored if isinstance(stored, dict) else {}
    _CANDIDATES[key] = made
    while len(_CANDIDATES) > CANDIDATES_KEPT:
        _CANDIDATES.popitem(last=False)
    return made


def forget_candidates() -> None:
    """Drop this process's candidates (the stage cache keeps its own), as a new process
    starts."""
    _CANDIDATES.clear()


def schedule_grids(kernel: TypedKernel, target: str, *,
                   shapes: Mapping[str, int] | None = None,
                   tiles: Mapping[str, int] | None = None, progress: bool = False) -> tuple:
    """The search of every grid, in launch order."""
    from .stask.propagate import resolve_tiles

    resolve_tiles(kernel, dict(tiles or {}))
    return tuple(schedule(g, target, shapes=shapes, tiles=_tiles_of(g, tiles),
                          progress=progress) for g in grids(kernel))


def build_options(device) -> dict:
    """What the search needs to know of the target's renderer (nothing where none exists
    yet: then every plan is ranked, for planning only)."""
    from .render import capabilities

    caps = capabilities(device)
    if caps is None:
        return {}
    return dict(buildable=lambda plan, graph: built_plan(plan, graph, device),
                persistent=caps.persistent, atoms=caps.atoms)


def built_plan(plan, graph, device):
    """The plan as it gets built: refused (Unbuildable) when the renderer or the lowering
    cannot build it, else with the lowered kernel's shared memory and registers."""
    return lowered_plan(plan, graph, device)[1]


def lowered_plan(plan, graph, device) -> tuple:
    """(the lowered kernel, the plan as built) of `plan`, or Unbuildable as `built_plan`
    says: for a caller that renders what it checked, with one lowering."""
    from .lower import LoweringError, lower
    from .render import capabilities
    from .sched.search import Unbuildable

    caps = capabilities(device)
    try:
        low = lower(plan, graph, device, caps)
    except LoweringError as exc:
        raise Unbuildable(str(exc)) from None
    res = device.resources
    limit = min(res.max_registers_per_thread, res.registers // max(low.launch.threads, 1))
    if low.launch.registers > limit:
        raise Unbuildable(f"the lowered kernel needs ~{low.launch.registers} registers per "
                          f"thread, over the limit of {limit}")
    if low.launch.dynamic_smem > res.shared_memory_bytes:
        raise Unbuildable(f"the lowered kernel needs {low.launch.dynamic_smem // 1024} KB of "
                          f"shared memory, over the {res.shared_memory_bytes // 1024} KB a "
                          "block may use")
    return low, finalized(plan, low, device)


def finalized(plan, low, device):
    """`plan` with the launch and registers of its lowered kernel."""
    from dataclasses import replace

    limit = min(device.resources.max_registers_per_thread,
                device.resources.registers // max(low.launch.threads, 1))
    regs = min(limit, low.launch.registers + (-low.launch.registers) % 8)
    from .lower import ir
    from .sched.plan import TaskIssue

    budgets = {role.name: role.registers for op in low.body if isinstance(op, ir.Specialized)
               for role in op.roles}   # warp-specialized: each role's setmaxnreg count
    roles = tuple(replace(r, registers=budgets.get(r.name, regs)) for r in plan.roles)
    issue = tuple(TaskIssue(c.task, c.mma_instructions, c.fragment_loads, c.simt_instructions,
                            c.sfu_instructions, c.shuffles, c.shared_accesses, c.mma_copies,
                            c.copy_bytes)
                  for c in low.costs if c.task in {t for _, s in plan.steps() for t in [s.task]})
    built = {b.plan_buffer: b.layout.name if b.layout is not None else "vector"
             for b in low.buffers if b.plan_buffer}
    buffers = tuple(replace(b, built_layout=built.get(b.name, "")) for b in plan.buffers)
    return replace(plan, roles=roles, issue=issue, buffers=buffers,
                   launch=replace(plan.launch, dynamic_smem=low.launch.dynamic_smem))


def lowered(kernel: TypedKernel, target: str, *, shapes: Mapping[str, int] | None = None,
            tiles: Mapping[str, int] | None = None, schedule_file: str | Path | None = None,
            progress: bool = False, after: str | None = None):
    """(lowered kernels, plans, graphs, device), one of each per grid: the best plans (or
    the pinned ones), lowered; `plans` are the plans as built. With `after`, each kernel's
    ops are those the lowering pass of that name left (ptc.lower.passes)."""
    from .devices import get_device
    from .lower import LoweringError, lower
    from .render import can_render, capabilities

    device = get_device(target)
    if schedule_file is not None:
        pairs = pinned_plans(kernel, target, schedule_file)
    else:
        pairs = tuple((r.best.plan, r.best.graph) for r in schedule_grids(
            kernel, target, shapes=shapes, tiles=tiles, progress=progress))
    lows, plans = [], []
    for (plan, graph), part in zip(pairs, grids(kernel)):
        why = can_render(plan, device)
        if why:
            raise CompileError(Diagnostic(f"cannot build this plan for {device.name}: {why}"))
        try:
            low = lower(plan, graph, device, capabilities(device), after)
        except LoweringError as exc:
            raise CompileError(Diagnostic(f"cannot lower the plan for {device.name}: {exc}")) \
                from None
        plan = finalized(plan, low, device)
        if schedule_file is not None:
            plan = estimated(plan, graph, device, part, shapes)
        lows.append(low)
        plans.append(plan)
    return tuple(lows), tuple(plans), tuple(g for _, g in pairs), device


def estimated(plan, graph, device, kernel: TypedKernel, shapes: Mapping[str, int] | None):
    """`plan` with the cost model's estimate at the problem's dims (a pinned plan's own
    estimate is not trusted: it is recomputed)."""
    from dataclasses import replace

    from .sched.cost import plan_estimate

    return replace(plan, estimate=plan_estimate(plan, graph, device,
                                                problem_dims(kernel, shapes)))


def pinned_as_built(kernel: TypedKernel, target: str, schedule_file: str | Path,
                    shapes: Mapping[str, int] | None = None) -> tuple:
    """The pinned plans (one per grid) as `ptc compile -o` builds them (launch, registers
    and issue counts from their lowering where the target has a renderer), with fresh
    estimates."""
    from .devices import get_device
    from .render import capabilities

    device = get_device(target)
    if capabilities(device) is not None:
        return lowered(kernel, target, shapes=shapes, schedule_file=schedule_file)[1]
    return tuple(estimated(plan, graph, device, part, shapes) for (plan, graph), part
                 in zip(pinned_plans(kernel, target, schedule_file), grids(kernel)))


@dataclass(frozen=True)
class PlanText:
    """Plan JSON that is not a file of its own (a tuning database's entry): it is pinned
    wherever a `--schedule` file is, and `name` stands for the file in messages."""

    name: str
    text: str


def pinned_plans(kernel: TypedKernel, target: str, plan_path: str | Path | PlanText) -> tuple:
    """The plans of a JSON file (`--schedule`), or a PlanText, one per grid, each checked
    against its grid and the device and verified: ((plan, graph), ...)."""
    from .devices import get_device
    from .sched.plan import plans_from_json
    from .sched.verify import verify

    device = get_device(target)
    try:
        filename, text = ((plan_path.name, plan_path.text) if isinstance(plan_path, PlanText)
                          else read_source(plan_path))
    except CompileError as exc:
        # located in the plan file, not in the .pt the CLI shows: name the file in the text
        d = exc.diagnostics[0]
        if not d.span.line:
            raise
        raise CompileError(Diagnostic(f"{plan_path}:{d.span.line}:{d.span.col}: {d.message}",
                                      hint=d.hint)) from None
    plans = plans_from_json(text, filename)
    parts = grids(kernel)
    if len(plans) != len(parts):
        raise CompileError(Diagnostic(
            f"{filename} holds plans for {len(plans)} grid(s), but kernel {kernel.name} has "
            f"{len(parts)}", hint="write the plans with `ptc compile --emit plan`"))
    out = []
    for plan, part in zip(plans, parts):
        if plan.kernel != kernel.name:
            raise CompileError(Diagnostic(f"{filename} is a plan for kernel {plan.kernel!r}, "
                                          f"not {kernel.name!r}",
                                          hint="choose it with --kernel"))
        if plan.device != device.name:
            raise CompileError(Diagnostic(f"{filename} is a plan for {plan.device}, not "
                                          f"{device.name}", hint=f"pass --target {plan.device}"))
        graph = stask_graph(part, plan.tile_sizes)
        verify(plan, graph, device)
        out.append((plan, graph))
    return tuple(out)


# ---- rendering ------------------------------------------------------------------------
def render(kernel: TypedKernel, target: str, *, shapes: Mapping[str, int] | None = None,
           tiles: Mapping[str, int] | None = None, schedule_file: str | Path | None = None,
           progress: bool = False):
    """(source, plans, graphs, device, notes): every grid's best plan (or the pinned ones),
    lowered and rendered into one source; `plans` are the plans as built, in launch order."""
    from .render import RenderError
    from .render import render as render_source

    lows, plans, graphs, device = lowered(kernel, target, shapes=shapes, tiles=tiles,
                                          schedule_file=schedule_file, progress=progress)
    try:
        source = render_source(lows, kernel, plans, device)
    except RenderError as exc:
        raise CompileError(Diagnostic(f"cannot render the plan for {device.name}: {exc}")) \
            from None
    return source, plans, graphs, device, ()
