"""The canonical text form of a lowered kernel (`ptc compile --emit lowered`)."""
from __future__ import annotations

from ..sema.printer import expr as print_expr
from . import ir
from .atoms import wgmma_k
from .storage import BatchRows


def print_lowered(k: ir.LoweredKernel) -> str:
    lines = [f"lowered {k.kernel} for {k.device} ({k.target_backend}, {k.plan_style})"]
    L = k.launch
    grid = ", ".join(f"{name}: {print_expr(count)}" for name, count in L.grid)
    lines.append(f"  launch grid [{grid}] x {L.threads} threads ({L.warps} warps)"
                 + (", persistent" if L.persistent else ""))
    lines.append(f"  shared memory {L.dynamic_smem} bytes; registers ~{L.registers} per thread; "
                 f"{L.blocks_per_eu} block(s) per EU; min blocks for the register allocator "
                 f"{L.min_blocks} (element-wise variant {L.min_blocks_elementwise}; 0: its "
                 f"own choice)")
    for note in k.notes:
        lines.append(f"  note: {note}")
    if k.arith16:
        lines.append(f"  16-bit + - * computed in 16 bits: {', '.join(k.arith16)} (else in f32, "
                     f"rounded)")
    if k.fp8_cvt:
        lines.append("  conversions to FP8 by the cvt instruction (else ptc's bit manipulation)")
    if k.alignment:
        words = {"dim": "{name} % {n} == 0", "tensor": "{name} {n}-byte aligned",
                 "bytes": "{name} below {n} bytes"}
        conds = ", ".join(words[kind].format(name=name, n=n) for kind, name, n in k.alignment)
        lines.append(f"  vector copies assume: {conds} (else element-wise copies)")
    lines.append("  layouts")
    for lay in k.layouts:
        lines.append(f"    {lay.name}: {lay.describe()}" + (f"  # {lay.note}" if lay.note else ""))
    lines.append("  shared memory")
    for b in sorted(k.buffers, key=lambda b: b.offset):
        shape = f"{b.dtype}{list(b.shape)}" + (f" x {b.slots}" if b.slots > 1 else "")
        layout = "" if b.layout is None else f" {b.layout.name}"
        if len(b.shape) == 1 and b.layout is not None and b.layout.rows > 1:   # rows' vector
            layout = f" as {b.layout.rows}x{b.layout.cols}{layout}"
        lines.append(f"    {b.name}: {shape}{layout} at {b.offset}..{b.end} "
                     f"live {b.live[0]}..{b.live[1]}  # {b.purpose}")
    if k.tensor_maps:
        lines.append("  tensor maps (encoded at launch)")
        for m in k.tensor_maps:
            box = " x ".join(str(b) for b in reversed(m.box))
            lines.append(f"    {m.name}: {m.tensor} {m.dtype}, boxes of {box}, "
                         + (f"{m.swizzle}-byte swizzle" if m.swizzle else "no swizzle"))
    lines.append("  values")
    owner: dict[str, str] = {}       # C name -> the first value stored there
    for name, home in k.values:
        if isinstance(home, ir.RegTile):
            first = owner.setdefault(home.name, name)
            shared = f" (in {first}'s registers)" if first != name else ""
            lines.append(f"    {name}: registers {home.dtype}{list(home.shape)} {home.layout}"
                         + shared)
        elif isinstance(home, ir.InShared):
            lines.append(f"    {name}: shared {home.buffer}"
                         + (f" (slot by {home.loop})" if home.loop else ""))
    lines.append("  units")
    for task, unit in k.units:
        lines.append(f"    {task}: {unit}")
    lines.append("  body")
    lines += _ops(k.body, 2)
    return "\n".join(lines) + "\n"


ITERATION = {"first": "iteration 0 of {0}, if the loop runs",
             "next": "iteration {0} + 1", "last": "the last iteration of {0}, if the loop runs"}


def _ops(ops, depth: int) -> list[str]:
    pad = "  " * depth
    out = []
    for op in ops:
        if isinstance(op, ir.Loop):
            until = f" until {print_expr(op.until)}" if op.until is not None else ""
            stages = f", {op.stages} stages" if op.stages > 1 else ""
            if op.fill:
                out.append(f"{pad}fill {op.var}:")
                out += _ops(op.fill, depth + 1)
            peel = f", the last {op.peel} iteration(s) after it" if op.peel else ""
            out.append(f"{pad}for {op.var}: {op.size} of {op.dim}{until}{stages}{peel}")
            out += _ops(op.body, depth + 1)
            if op.drain:
                out.append(f"{pad}after {op.var}:")
                out += _ops(op.drain, depth + 1)
        elif isinstance(op, ir.Iteration):
            out.append(f"{pad}{ITERATION[op.which].format(op.var)}:")
            out += _ops(op.body, depth + 1)
        elif isinstance(op, ir.InitBarriers):
            out.append(f"{pad}init mbarriers (one thread), then __syncthreads")
            out += [f"{pad}  {b.name}: {b.slots} x {b.arrivals} arrival(s)"
                    + (f" ({b.elementwise_arrivals} element-wise)" if b.elementwise_arrivals
                       else "") + f" at {b.offset}" for b in op.barriers]
        elif isinstance(op, ir.Specialized):
            out.append(f"{pad}warp-specialized, {op.launch_registers} registers per thread at "
                       "launch")
            for r in op.roles:
                last = r.first_warpgroup + r.instances - 1
                groups = f"{r.first_warpgroup}" + (f"-{last}" if last > r.first_warpgroup else "")
                rows = f", {r.rows} rows of {r.split} each" if r.rows else ""
                out.append(f"{pad}  role {r.name}: warpgroup(s) {groups}, {r.registers} "
                           f"registers{rows}")
                out += _ops(r.body, depth + 2)
        elif isinstance(op, ir.TmaLoad):
            out += [pad + print_op(w) + "  (the issuing thread)" for w in op.waits]
            out.append(pad + print_op(op))
        else:
            out.append(pad + print_op(op))
    return out


def print_op(op) -> str:
    if isinstance(op, ir.CopyTile):
        t = op.tile
        nbytes = op.vector * _bytes(t.dtype)
        how = (f"{nbytes}B {op.resource + ' buffer ' if op.resource else ''}loads staged in registers, "
               "landed at the wait" if op.staged
               else f"cp.async {nbytes}B" if op.asynchronous else "element-wise copy")
        ahead = f" +{op.ahead}" if op.ahead else ""
        slot = f"[{op.loop}{ahead}]" if op.loop else ""
        fb = f" (else {op.fallback_vector}-element)" if op.fallback_vector else ""
        return (f"copy {op.buffer}{slot} <- {t.tensor}[{t.rows}x{t.cols}]{_gathered(t)} by "
                f"{how}{fb}{' guarded' if op.guard else ''}"
                f"{', address at trip 0 + a step a trip' if op.hoisted else ''}  # {op.task}")
    if isinstance(op, ir.CommitGroup):
        return "commit"
    if isinstance(op, ir.WaitGroups):
        if op.lands:
            return f"wait: land {', '.join(op.lands)}  # {', '.join(op.buffers)}"
        return f"wait groups <= {op.pending} pending  # {', '.join(op.buffers)}"
    if isinstance(op, ir.Barrier):
        return f"barrier  # {op.why}"
    if isinstance(op, ir.Compute):
        pairs = ", in pairs" if op.pairs else ""
        return f"{op.target} = {print_expr(op.expr)}  # {op.task}{pairs}"
    if isinstance(op, ir.Reduce):
        lanes = f" shuffle xor {list(op.lane_masks)}" if op.lane_masks else ""
        warps = f" across {op.cross_warps} warps via {op.scratch}" if op.scratch else ""
        return (f"{op.target} = {op.op} over axis {op.axis} of {print_expr(op.expr)} "
                f"in {op.source_layout}:{lanes}{warps}  # {op.task}")
    if isinstance(op, ir.SpillTile):
        return f"spill {op.value} to {op.scratch}  # {op.task}: layout conversion"
    if isinstance(op, ir.FillTile):
        how = "transposed " if op.transposed else ""
        return f"{op.target} = fill {how}from {op.scratch}  # {op.task}: layout conversion"
    if isinstance(op, ir.WarpCombine):
        return f"{op.target} = {op.op} of {op.cross_warps} warps' partials in {op.scratch}  # {op.task}"
    if isinstance(op, ir.Mma):
        def operand(o):
            return (f"{o.value} (registers)" if o.in_registers else
                    f"{o.value} (shared{', transposed' if o.transposed else ''})")
        add = f"{op.addend} + " if op.addend else ""
        copies = f", {op.replicas} copies" if op.replicas > 1 else ""
        if op.swapped:      # the instructions multiply the statement's b^T and a^T
            return (f"{op.out} = {add}({operand(op.a)}^T @ {operand(op.b)}^T)^T on "
                    f"{op.atom.describe()} warps {op.wm}x{op.wn}, {op.mi}x{op.ni} atoms/warp, "
                    f"{op.ks} k-steps{copies}, computed transposed  # {op.task}")
        return (f"{op.out} = {add}{operand(op.a)} @ {operand(op.b)} on {op.atom.describe()} "
                f"warps {op.wm}x{op.wn}, {op.mi}x{op.ni} atoms/warp, {op.ks} k-steps{copies}"
                f"  # {op.task}")
    if isinstance(op, ir.SimtMatmul):
        add = f"{op.addend} + " if op.addend else ""
        return f"{op.out} = {add}{print_expr(op.a)} @ {print_expr(op.b)} on CUDA cores  # {op.task}"
    if isinstance(op, ir.LoadFragments):
        return (f"{op.target} = fragments of {op.source} as operand {op.operand}"
                f"{' (transposed)' if op.transposed else ''}")
    if isinstance(op, ir.StoreTile):
        t = op.tile
        return (f"{'atomic add' if op.atomic else 'store'} {t.tensor}[{t.rows}x{t.cols}]"
                f"{_gathered(t)} <- {op.value}  # {op.task}")
    return _specialized_op(op)


def _gathered(t: ir.GlobalTile) -> str:
    """ `rows gathered by idx` for a tile whose rows' positions are loaded, `rows of 4x32`
    for a tile of rank 3's rows, `rows of 32 for each of 4 heads` and `rows of 4, each for
    32 rows` for the row form's repeated rows (T.RepeatRows)."""
    if isinstance(t.gather, BatchRows) and t.gather.outer_step == 0:
        return f" rows of {t.gather.inner} for each of {t.rows // t.gather.inner} heads"
    if isinstance(t.gather, BatchRows) and t.gather.inner_step == 0:
        return f" rows of {t.rows // t.gather.inner}, each for {t.gather.inner} rows"
    if isinstance(t.gather, BatchRows):
        return f" rows of {t.rows // t.gather.inner}x{t.gather.inner}"
    return "" if t.gather is None else f" rows gathered by {t.gather.tile.tensor}"


def _specialized_op(op) -> str:
    if isinstance(op, ir.TmaLoad):
        slot = f"[{op.loop}]" if op.loop else ""
        return (f"tma {op.buffer}{slot} <- {op.map}, {op.panels} box(es), {op.bytes} bytes, "
                f"completing {op.barrier} (else element-wise copy)  # {op.task}")
    if isinstance(op, ir.ProducerCopy):
        t = op.tile
        slot = f"[{op.loop}]" if op.loop else ""
        return (f"copy {op.buffer}{slot} <- {t.tensor}[{t.rows}x{t.cols}] by the warpgroup's "
                f"threads, then arrive {op.barrier}  # {op.task}")
    if isinstance(op, ir.TmaStore):
        by = (f"stmatrix.x4, {op.stage.stmatrix[0] * op.stage.stmatrix[1]} per warp"
              if op.stage.stmatrix else "st.shared")
        return (f"tma store {op.value} via {op.buffer} (by {by}) -> {op.map}, {op.panels} "
                f"box(es), wait until read (else {print_op(op.fallback)})")
    if isinstance(op, ir.StageOperand):
        by = (f"stmatrix.x4, {op.stmatrix[0] * op.stmatrix[1]} per warp" if op.stmatrix
              else "st.shared of register pairs" if op.pairs else "st.shared")
        return f"stage {op.value} to {op.buffer} by {by}, fence.proxy.async  # {op.task}"
    if isinstance(op, ir.MbarrierWait):
        slot = f"[{op.loop}]" if op.loop else ""
        return f"wait {op.barrier}{slot}" + (" is free" if op.free else "")
    if isinstance(op, ir.MbarrierArrive):
        slot = f"[{op.loop} - {op.lag}]" if op.lag else (f"[{op.loop}]" if op.loop else "")
        return f"arrive {op.barrier}{slot}" + (" (each warp)" if op.per_warp else "")
    if isinstance(op, ir.Wgmma):
        def operand(o):
            if o.in_registers:
                return f"{o.value} (registers)"
            return f"{o.value} (shared{', mn-major' if o.mn_major else ''})"
        add = f"{op.addend} + " if op.addend else ""
        if op.swapped:      # the instruction multiplies the statement's b^T and a^T
            return (f"{op.out} = {add}{operand(op.b)} @ {operand(op.a)} on wgmma "
                    f"m64n{op.n}k{wgmma_k(op.dtype)} as out^T = b^T a^T, {op.mi} atom(s) "
                    f"along n, {op.ks} k-steps  # {op.task}")
        return (f"{op.out} = {add}{operand(op.a)} @ {operand(op.b)} on wgmma "
                f"m64n{op.n}k{wgmma_k(op.dtype)}, "
                f"{op.mi} atom(s) along m, {op.ks} k-steps  # {op.task}")
    if isinstance(op, ir.WgmmaWait):
        pinned = f", then pin {', '.join(op.values)}" if op.values else ""
        return f"wgmma wait <= {op.pending} groups pending{pinned}"
    if isinstance(op, ir.PinAccumulators):
        return f"pin {', '.join(op.values)} in registers"
    if isinstance(op, ir.PlanWait):      # before place_sync (`--after steps`)
        return f"the plan waits for {', '.join(op.buffers)} (place_sync places it)"
    if isinstance(op, ir.NamedBarrier):
        if op.threads == 128 and not op.arrive:
            return f"named barrier (the warpgroup)  # {op.why}"
        which = "the next part" if op.next_instance else "part"
        who = f"warpgroup {op.only}: " if op.only >= 0 else ""
        verb = "bar.arrive" if op.arrive else "bar.sync"
        return f"{who}{verb} {op.base} + {which}, {op.threads} threads  # {op.why}"
    return repr(op)


def _bytes(dtype: str) -> int:
    from ..sema.dtypes import DTYPE_BYTES
    return DTYPE_BYTES[dtype]
