"""Plan verifier, group 1: structure (see ptc.sched.verify).

Every sTask placed exactly once over all roles, in the loops of its region; each unit
exists on the device and fits the task; every barrier / buffer name exists; the plan's
fields agree with the graph; a value crossing roles travels in a buffer.
"""
from __future__ import annotations

from collections import defaultdict
from ..devices import Device
from ..devices.model import SHARED_SPACES, UnitKind
from ..lower.atoms import rate_dtype
from ..stask.graph import STaskGraph, TaskKind
from .plan import SINGLE_ROLE_STYLES, SYNC_UNIT, Plan, Role, Step, Style
from .problems import Problems

# an mma runs on tensor cores, or on CUDA cores when no matrix instruction takes its tile
# (ptc.sched.construct.mma_unit)
UNIT_FITS = {TaskKind.COPY: (UnitKind.COPY,), TaskKind.MMA: (UnitKind.MMA, UnitKind.SIMT),
             TaskKind.SIMT: (UnitKind.SIMT, UnitKind.SFU)}


def loop_paths(graph: STaskGraph) -> dict[str, tuple[str, ...]]:
    """Each task's enclosing loops, outermost first."""
    out: dict[str, tuple[str, ...]] = {}

    def walk(region, path):
        for item in region.items:
            if isinstance(item, str):
                out[item] = path
            else:
                walk(item, path + (item.name,))

    walk(graph.root, ())
    return out


def _step_paths(items, path=()) -> list[tuple[Step, tuple[str, ...]]]:
    out = []
    for it in items:
        if isinstance(it, Step):
            out.append((it, path))
        else:
            out.extend(_step_paths(it.body, path + (it.var,)))
    return out


LAYOUTS = ("swizzle128", "row")
RASTERS = ("row", "column", "swizzle")


def _check_fields(plan: Plan, graph: STaskGraph, tasks, out: Problems) -> None:
    """Fields a hand-edited plan could get wrong that the renderer relies on: each must
    agree with what the graph says or name something that exists."""
    from .primitives import grid_extents

    if plan.style not in tuple(Style):
        out.add(f"style {plan.style!r} is not one of {', '.join(Style)}")
    if plan.stages < 1:
        out.add(f"stages must be at least 1, not {plan.stages}")
    ring = max((b.stages for b in plan.buffers), default=1)
    if plan.stages >= 1 and plan.stages != ring:
        out.add(f"stages is {plan.stages}, but the deepest buffer ring has {ring} slot(s)")
    loops = {r.name for r in graph.loop_regions()}
    if plan.pipelined and plan.pipelined not in loops:
        out.add(f"pipelined names {plan.pipelined!r}, which is not a loop of the kernel "
                f"(loops: {', '.join(sorted(loops)) or 'none'})")
    ahead = sorted({path[-1] for role in plan.roles for step, path in _step_paths(role.body)
                    if step.offset > 0 and path})
    if ahead and ahead != [plan.pipelined]:
        out.add(f"pipelined is {plan.pipelined!r}, but steps run ahead in loop(s) "
                f"{', '.join(ahead)}")
    elif plan.pipelined and not ahead and ring == 1:
        out.add(f"pipelined is {plan.pipelined!r}, but nothing in it runs ahead or is "
                "ring-buffered")
    single = plan.style in SINGLE_ROLE_STYLES
    if single and len(plan.roles) != 1:
        out.add(f"a {plan.style} plan has one role, not {len(plan.roles)}")
    if plan.style == Style.WARP_SPECIALIZED and len(plan.roles) < 2:
        out.add("a warp_specialized plan has a producer role and consumer roles")
    if plan.style == Style.SEQUENTIAL and (ahead or ring > 1):
        out.add("a sequential plan runs nothing ahead and has no buffer rings")
    if plan.launch.raster not in RASTERS:
        out.add(f"launch.raster is {plan.launch.raster!r}; rasters: {', '.join(RASTERS)}")
    if graph.tiles is not None and tuple(plan.launch.grid) != grid_extents(graph):
        out.add(f"launch.grid is {list(plan.launch.grid)}, but the kernel's grid is "
                f"{list(grid_extents(graph))}")
    for b in plan.buffers:
        t = tasks.get(b.producer)
        if b.stages < 1:
            out.add(f"buffer {b.name} needs at least 1 stage, not {b.stages}")
        if b.layout not in LAYOUTS:
            out.add(f"buffer {b.name} has layout {b.layout!r}; layouts: {', '.join(LAYOUTS)}")
        if t is not None and (b.dtype != t.dtype or tuple(b.shape) != tuple(t.shape)):
            out.add(f"buffer {b.name} holds {b.dtype}{list(b.shape)}, but {t.name} writes "
                    f"{t.dtype}{list(t.shape)}")
        if t is not None and b.value not in t.defines:
            out.add(f"buffer {b.name} holds {b.value!r}, which {t.name} does not define")
    for bar in plan.barriers:
        prefix = bar.name.split(":", 1)[0]
        if bar.kind not in ("full", "empty") or prefix != bar.kind:
            out.add(f"barrier {bar.name} has kind {bar.kind!r}; a {prefix}: barrier is "
                    f"kind {prefix!r}")


def _declared(plan: Plan, out: Problems) -> tuple[dict, dict]:
    """The plan's barriers and buffers by name; a name declared twice (a role's too) is a
    problem."""
    barriers = {}
    for b in plan.barriers:
        if b.name in barriers:
            out.add(f"barrier {b.name} is declared twice")
        barriers[b.name] = b
    buffers = {}
    for b in plan.buffers:
        if b.name in buffers:
            out.add(f"buffer {b.name} is declared twice")
        buffers[b.name] = b
    roles = [r.name for r in plan.roles]
    for name in set(roles):
        if roles.count(name) > 1:
            out.add(f"role {name} is declared twice")
    return barriers, buffers


def _check_sync_step(step: Step, role: Role, out: Problems) -> None:
    """A sync step only waits and arrives: on the barrier unit, at the role's iteration."""
    if step.unit != SYNC_UNIT:
        out.add(f"a sync step in {role.name} must be on unit {SYNC_UNIT!r}, "
                f"not {step.unit!r}")
    if step.offset:
        out.add(f"a sync step in {role.name} has offset {step.offset}; "
                "barrier operations run at the role's own iteration")


def _check_unit(step: Step, role: Role, task, device: Device, out: Problems) -> None:
    """The step's unit exists on the device, is of a kind that runs the task, and (an mma
    on tensor cores) multiplies its dtype."""
    try:
        unit = device.unit(step.unit)
    except KeyError:
        out.add(f"{step.task} in {role.name} runs on unit {step.unit!r}, which "
                f"{device.name} does not have")
        return
    if unit.kind not in UNIT_FITS[task.kind]:
        out.add(f"{step.task} is a {task.kind} task but runs on {unit.name}, a "
                f"{unit.kind} unit")
    elif task.kind == TaskKind.MMA and unit.kind == UnitKind.MMA:
        dtype = task.mma_dtype       # or, FP8 widened (sm80, gfx90a), f16
        if dtype not in unit.throughput and \
                rate_dtype(device, dtype) not in unit.throughput:
            out.add(f"{step.task} multiplies {dtype}, which {unit.name} does not")


def _check_task_step(step: Step, path: tuple[str, ...], role: Role, task,
                     task_path: tuple[str, ...], device: Device, out: Problems) -> None:
    """A step running an sTask: its offset, the loops it sits in, its unit."""
    if step.offset < 0 or (step.offset and not path):
        out.add(f"{step.task} in {role.name} has offset {step.offset}: offsets are "
                "non-negative and only apply inside a loop")
    if path != task_path:
        where = " / ".join(task_path) or "no loop"
        out.add(f"{step.task} sits in loops ({' / '.join(path) or 'none'}) of "
                f"{role.name}, but its sTask belongs to {where}")
    _check_unit(step, role, task, device, out)


def _check_roles(plan: Plan, graph: STaskGraph, device: Device, tasks, barriers,
                 out: Problems) -> tuple[dict[str, list[str]], dict[str, set[str]]]:
    """Every role and step; returns where each sTask is placed (task -> roles) and who
    uses each barrier (barrier -> roles)."""
    paths = loop_paths(graph)
    placed: dict[str, list[str]] = defaultdict(list)
    users: dict[str, set[str]] = defaultdict(set)      # barrier -> roles that use it
    for role in plan.roles:
        if role.warps < 1 or role.instances < 1 or role.registers < 1:
            out.add(f"role {role.name} needs at least one warp, one instance and one register "
                    f"(it has warps={role.warps}, instances={role.instances}, "
                    f"registers={role.registers})")
        for step, path in _step_paths(role.body):
            for name in step.waits + step.arrives:
                users[name].add(role.name)
                if name not in barriers:
                    out.add(f"{step.task} in {role.name} uses barrier {name}, which the plan "
                            f"does not declare")
            if step.is_sync:
                _check_sync_step(step, role, out)
                continue
            task = tasks.get(step.task)
            if task is None:
                out.add(f"role {role.name} runs {step.task}, which is not an sTask of "
                        f"{graph.kernel.name}")
                continue
            placed[step.task].append(role.name)
            _check_task_step(step, path, role, task, paths[step.task], device, out)
    return placed, users


def _check_placement(graph: STaskGraph, placed: dict[str, list[str]], out: Problems) -> None:
    """Every sTask placed exactly once."""
    for t in graph.tasks:
        where = placed.get(t.name, [])
        if not where:
            out.add(f"sTask {t.name} is not placed on any role")
        elif len(where) > 1:
            out.add(f"sTask {t.name} is placed {len(where)} times (in {', '.join(where)})")


def _check_buffers(plan: Plan, tasks, device: Device, out: Problems) -> None:
    """Each buffer's producer, value and consumers exist; it lives in the device's shared
    space."""
    for b in plan.buffers:
        if b.producer not in tasks:
            out.add(f"buffer {b.name} is written by {b.producer}, which is not an sTask")
        elif b.value and b.value not in tasks[b.producer].defines:
            out.add(f"buffer {b.name} holds {b.value}, which {b.producer} does not define")
        for c in b.consumers:
            if c not in tasks:
                out.add(f"buffer {b.name} is read by {c}, which is not an sTask")
        if b.stages < 1:
            out.add(f"buffer {b.name} has {b.stages} stages")
        if b.space not in SHARED_SPACES:
            out.add(f"buffer {b.name} is in {b.space!r}; buffers live in "
                    + " or ".join(SHARED_SPACES))
        elif b.space != device.shared_space:
            out.add(f"buffer {b.name} is in {b.space}, which {device.name} does not have")


def _check_barriers(plan: Plan, buffers, out: Problems) -> None:
    """Each barrier guards a declared buffer, has a known kind and sane counts."""
    for b in plan.barriers:
        if b.buffer not in buffers:
            out.add(f"barrier {b.name} guards buffer {b.buffer}, which the plan does not "
                    "declare")
        if b.kind not in ("full", "empty"):
            out.add(f"barrier {b.name} has kind {b.kind!r} (expected full or empty)")
        if b.arrivals < 1 or b.initial < 0:
            out.add(f"barrier {b.name} needs arrivals >= 1 and initial >= 0 (it has "
                    f"arrivals={b.arrivals}, initial={b.initial})")


def _check_barrier_users(plan: Plan, device: Device, users: dict[str, set[str]],
                         out: Problems) -> None:
    """Without mbarriers, a barrier can only order the steps of one single-instance role."""
    if "mbarrier" not in device.features:
        instances = {r.name: r.instances for r in plan.roles}
        for name, rs in sorted(users.items()):
            if len(rs) > 1 or any(instances[r] > 1 for r in rs):
                out.add(f"barrier {name} synchronises {' and '.join(sorted(rs))}, but "
                        f"{device.name} has no mbarriers to do that with")


def _check_crossings(plan: Plan, graph: STaskGraph, placed: dict[str, list[str]],
                     out: Problems) -> None:
    """A value that crosses roles must travel in a buffer."""
    role_of = {t: rs[0] for t, rs in placed.items() if len(rs) == 1}
    for e in graph.edges:
        rs, rd = role_of.get(e.src), role_of.get(e.dst)
        if rs and rd and rs != rd and plan.buffer_for(e.src, e.dst, e.value) is None:
            out.add(f"{e.dst} in {rd} reads {e.value} from {e.src} in {rs}, but no buffer "
                    "carries it between the roles")


def check_structure(plan: Plan, graph: STaskGraph, device: Device, out: Problems) -> bool:
    """Group 1 of the verifier (see the module's docstring); True when it adds no problem."""
    n0 = len(out.items)
    tasks = {t.name: t for t in graph.tasks}
    barriers, buffers = _declared(plan, out)
    if plan.device != device.name:
        out.add(f"the plan was made for {plan.device}, not {device.name}")
    _check_fields(plan, graph, tasks, out)
    if graph.tiles is not None and dict(plan.tiles) != dict(graph.tiles):
        out.add(f"the plan's tiles {dict(plan.tiles)} are not the graph's {dict(graph.tiles)}")
    placed, users = _check_roles(plan, graph, device, tasks, barriers, out)
    _check_placement(graph, placed, out)
    _check_buffers(plan, tasks, device, out)
    _check_barriers(plan, buffers, out)
    _check_barrier_users(plan, device, users, out)
    _check_crossings(plan, graph, placed, out)
    return len(out.items) == n0
