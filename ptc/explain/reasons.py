"""Why the winner won: its bottleneck, then one comparison per respect (stages, consumer
warpgroups, warps, style, pipelining, tiles, launch) with the nearest other candidate."""
from __future__ import annotations

import math
from typing import Callable

from ..devices.model import UnitKind
from ..lower.atoms import rate_dtype, reads_fnuz
from ..sched.plan import Style
from ..sched.search import Candidate, SearchResult
from ..stask.graph import TaskKind
from .compare import Context, bound_phrase, busy, busy_clause, peers, rejected_peers
from .model import Reason
from .tile_reasons import tiles_reasons
from .wording import choice_text, percent, plural, slower


def why(result: SearchResult) -> tuple[Reason, ...]:
    """Why the winner won: its bottleneck, then one comparison per respect in which a
    nearby candidate differs (or why that candidate could not be built)."""
    ctx = Context(result)
    out: list[Reason] = [_bound_reason(ctx)]
    for rule in RULES:
        out.extend(rule(ctx))
    return tuple(out)


def _bound_reason(ctx: Context) -> Reason:
    w = ctx.best
    est = w.estimate
    others = ", ".join(f"{u} {percent(b)}" for u, b in est.unit_busy if u != est.bound)
    if est.bound == "dram":
        device = ctx.result.device
        pct = est.bytes / est.seconds / device.peak_dram_bytes_per_s()
        text = (f"bound by DRAM bandwidth: it moves {est.bytes / 1e6:.1f} MB at "
                f"{percent(pct)} of the peak; units: {others or 'idle'}")
    else:
        text = f"bound by {est.bound}: busy {percent(busy(w, est.bound))} of the time"
        if others:
            text += f"; {others}"
    return Reason("bound", text)


def _stages_reasons(ctx: Context) -> list[Reason]:
    w = ctx.best
    s = w.choice.stages
    if w.choice.style in (Style.SEQUENTIAL, Style.INTERLEAVED):
        return []
    out = []
    ranked = peers(ctx.result, {"stages"})
    fewer = [c for c in ranked if c.choice.stages < s]
    if fewer:
        o = max(fewer, key=lambda c: (c.choice.stages, -c.estimate.seconds))
        r = ctx.ratio(o)
        u = ctx.unit
        if r > 1.0005:
            idle = busy_clause(o, w, u, "idle")
            text = (f"{plural(s, 'stage')}: with {o.choice.stages} "
                    + (f"{idle} and " if idle else "") + f"the plan takes {slower(r)}")
        else:
            text = (f"{plural(s, 'stage')}: {o.choice.stages} stages take {slower(r)}; "
                    f"the tie is broken by the ranking order")
        out.append(Reason("stages", text, ctx.label(o), r))
    more = [c for c in ranked if c.choice.stages > s]
    if more:
        o = min(more, key=lambda c: (c.choice.stages, c.estimate.seconds))
        r = ctx.ratio(o)
        extra = o.plan.launch.dynamic_smem - w.plan.launch.dynamic_smem
        text = f"{plural(s, 'stage')}: {o.choice.stages} stages take {slower(r)}"
        clause = busy_clause(o, w, ctx.unit)
        if clause:
            text += f": {clause}"
        if extra > 0:
            text += f"; they need {extra // 1024} KB more {ctx.terms.shared}"
        out.append(Reason("stages", text, ctx.label(o), r))
    else:
        unfit = [x for x in rejected_peers(ctx.result, {"stages"}) if x.choice.stages > s]
        if unfit:
            x = min(unfit, key=lambda x: x.choice.stages)
            out.append(Reason("stages", f"{plural(s, 'stage')}: {x.choice.stages} stages are not "
                                        f"possible: {x.reason}", x.choice.describe(ctx.terms)))
    return out


def _count_reason(ctx: Context, aspect: str, noun: str, vary: frozenset = frozenset()
                  ) -> list[Reason]:
    """Consumer warpgroups (warp-specialized) or warps (one role): the nearest other count
    (`vary`: aspects that may differ along with it, as ping-pong does with the count)."""
    w = ctx.best
    mine = getattr(w.choice, aspect)
    vary = {aspect} | vary
    ranked = [c for c in peers(ctx.result, vary) if getattr(c.choice, aspect) != mine]
    if ranked:
        o = min(ranked, key=lambda c: (abs(getattr(c.choice, aspect) - mine), c.estimate.seconds))
        n, r = getattr(o.choice, aspect), ctx.ratio(o)
        if r > 1.0005:
            clause = busy_clause(o, w, ctx.unit)
            text = (f"{plural(mine, noun)}: with {n} the plan takes {slower(r)}"
                    + (f", {clause}" if clause else ""))
        else:
            text = (f"{plural(mine, noun)}: {plural(n, noun)} take {slower(r)}; "
                    f"ties go to the smaller configuration")
        return [Reason(aspect, text, ctx.label(o), r)]
    unfit = [x for x in rejected_peers(ctx.result, vary) if getattr(x.choice, aspect) != mine]
    if unfit:
        x = unfit[0]
        return [Reason(aspect, f"{plural(mine, noun)}: {getattr(x.choice, aspect)} is not "
                               f"possible: {x.reason}", x.choice.describe(ctx.terms))]
    return []


def _consumers_reasons(ctx: Context) -> list[Reason]:
    if ctx.best.choice.style != Style.WARP_SPECIALIZED:
        return []
    return _count_reason(ctx, "consumers", "consumer warpgroup", frozenset({"pingpong"}))


def _switch_reason(ctx: Context, aspect: str, on: tuple[str, str], off: tuple[str, str],
                   how: str, tied: frozenset = frozenset()) -> list[Reason]:
    """A yes/no choice of warp-specialized plans: the same plan the other way, or why that
    could not be built. `on`, `off`: (what it is called, its verb "take(s)"); `how`: what
    the winner gains when the switch is on; `tied`: aspects that change with it (the
    search has no plan that differs in `aspect` alone)."""
    w = ctx.best
    (mine, _), (other, verb) = (on, off) if getattr(w.choice, aspect) else (off, on)
    flipped = lambda c: getattr(c.choice, aspect) != getattr(w.choice, aspect)  # noqa: E731
    ranked = [c for c in peers(ctx.result, {aspect} | tied) if flipped(c)]
    if ranked:
        o, r = ranked[0], ctx.ratio(ranked[0])
        text = f"{mine}: {other} {verb} {slower(r)}"
        if getattr(w.choice, aspect):
            text += f"; {how}"
        clause = busy_clause(o, w, ctx.unit)
        return [Reason(aspect, text + (f", {clause}" if clause else ""),
                       ctx.label(o), r)]
    unfit = [x for x in rejected_peers(ctx.result, {aspect} | tied) if flipped(x)]
    if unfit:
        x = unfit[0]
        return [Reason(aspect, f"{mine}: {other} is not possible: {x.reason}",
                       x.choice.describe(ctx.terms))]
    return []


def _pingpong_reasons(ctx: Context) -> list[Reason]:
    """Two consumers free-running (timed in lockstep) or taking turns (ptc.sched.turns)."""
    w = ctx.best
    if w.choice.style != Style.WARP_SPECIALIZED or w.choice.consumers < 2:
        return []
    # two consumers overlap their loops only in turns (search.choices_for): against a
    # rotated winner, the free-running plan runs its loop in order
    tied = frozenset({"overlap"}) if w.choice.overlap else frozenset()
    return _switch_reason(ctx, "pingpong", ("ping-pong", "takes"),
                          ("free-running consumers", "take"),
                          "one warpgroup's CUDA-core work runs under the other's "
                          "tensor-core steps", tied)


def _overlap_reasons(ctx: Context) -> list[Reason]:
    """The pipelined loop rotated or not (ptc.sched.rotate)."""
    if ctx.best.choice.style != Style.WARP_SPECIALIZED:
        return []
    return _switch_reason(ctx, "overlap", ("intra-warpgroup overlap", "takes"),
                          ("the loop in order", "takes"),
                          "the CUDA-core work of iteration n + 1 runs under the last "
                          "tensor-core step of iteration n")


def _warps_reasons(ctx: Context) -> list[Reason]:
    if ctx.best.choice.style == Style.WARP_SPECIALIZED:
        return []
    return _count_reason(ctx, "warps", ctx.terms.warp)


STYLE_NAMES = {Style.WARP_SPECIALIZED: "warp-specialized", Style.MULTISTAGE: "multistage",
               Style.INTERLEAVED: "interleaved", Style.SEQUENTIAL: "sequential"}


def _same_tiles(ctx: Context, style: Style) -> list[Candidate]:
    return [c for c in ctx.result.ranked[1:]
            if c.tiles == ctx.best.tiles and c.choice.style == style]


def _style_reasons(ctx: Context) -> list[Reason]:
    w = ctx.best
    if w.choice.style == Style.SEQUENTIAL:
        return []
    out = []
    for style in (Style.WARP_SPECIALIZED, Style.MULTISTAGE, Style.INTERLEAVED):
        if style == w.choice.style:
            continue
        same = _same_tiles(ctx, style)
        mine = STYLE_NAMES[w.choice.style]
        if same:
            o = same[0]
            r = ctx.ratio(o)
            text = (f"{mine}: the best {STYLE_NAMES[style]} plan with these tiles "
                    f"({ctx.plan(o)}) takes {slower(r)} and is {bound_phrase(o)}")
            out.append(Reason("style", text, ctx.label(o), r))
            continue
        unfit = [x for x in ctx.result.rejected if x.choice.style == style]
        if unfit:
            x = next((x for x in unfit if x.tiles == w.tiles), unfit[0])
            out.append(Reason("style", f"{mine}: {STYLE_NAMES[style]} is not possible: "
                                       f"{x.reason}", choice_text(x.choice, ctx.terms)))
    return out


def _pipeline(ch, terms) -> str:
    if ch.style == Style.WARP_SPECIALIZED:
        return (f"{ch.stages}-stage warp-specialized pipeline "
                f"({plural(ch.consumers, 'consumer warpgroup')})")
    if ch.style == Style.INTERLEAVED:
        return f"interleaved-load pipeline ({terms.warps(ch.warps)})"
    return f"{ch.stages}-stage multistage pipeline ({terms.warps(ch.warps)})"


def _pipelining_reasons(ctx: Context) -> list[Reason]:
    w = ctx.best
    if w.choice.style == Style.SEQUENTIAL:
        pipelined = [c for c in ctx.result.ranked[1:]
                     if c.tiles == w.tiles and c.choice.style != Style.SEQUENTIAL]
        if pipelined:
            o = pipelined[0]
            return [Reason("pipelining", f"no pipelining: the best pipelined plan with these "
                                         f"tiles ({ctx.plan(o)}) takes {slower(ctx.ratio(o))}",
                           ctx.label(o), ctx.ratio(o))]
        unfit = sorted((x for x in ctx.result.rejected if x.choice.style != Style.SEQUENTIAL),
                       key=lambda x: (x.tiles != w.tiles, x.choice.style != Style.MULTISTAGE,
                                      x.choice.stages, x.choice.warps != w.choice.warps))
        if unfit:
            x = unfit[0]
            these = "with these tiles " if x.tiles == w.tiles else f"({ctx.tiles(x)}) "
            text = (f"no pipelining: a {_pipeline(x.choice, ctx.terms)} {these}"
                    f"is not possible: {x.reason}")
            return [Reason("pipelining", text, x.choice.describe(ctx.terms))]
        return []
    same = _same_tiles(ctx, Style.SEQUENTIAL)
    if not same:
        return []
    o = same[0]
    r = ctx.ratio(o)
    u = ctx.unit
    clause = busy_clause(o, w, u)
    return [Reason("pipelining",
                   f"pipelining: the unpipelined plan ({ctx.plan(o)}) takes {slower(r)}"
                   + (f"; {clause}" if clause else ""),
                   ctx.label(o), r)]


def _launch_reasons(ctx: Context) -> list[Reason]:
    w = ctx.best
    if not w.plan.launch.persistent:
        return []
    waves = w.estimate.waves
    last_wave_empty = 1 - (waves - math.floor(waves))
    saved = (math.ceil(waves) - waves) / math.ceil(waves)
    block = ctx.terms.block
    return [Reason("launch", f"persistent {block}s: {waves:.2f} waves of one {block} per tile "
                             f"would leave the last wave {percent(last_wave_empty)} empty; looping "
                             f"over the tiles in resident {block}s saves up to {percent(saved)}")]


def _matmul_unit_reasons(ctx: Context) -> list[Reason]:
    """An mma task placed on CUDA cores, and why the tensor cores do not take it."""
    from ..render import capabilities
    from ..sched.construct import why_on_cuda_cores

    w = ctx.best
    device = ctx.result.device
    caps = capabilities(device)
    out = []
    for role, step in w.plan.steps():
        if step.is_sync:
            continue
        task = w.graph.task(step.task)
        if task.kind == TaskKind.MMA and device.unit(step.unit).kind != UnitKind.MMA:
            why_not = why_on_cuda_cores(w.graph, device, task, role.warps,
                                        caps.atoms if caps is not None else None)
            how = "integer multiply-add" if task.mma_dtype == "i8" else "f32 FMA"
            out.append(Reason("unit", f"{task.name} runs on CUDA cores ({how}): {why_not}"))
        elif task.kind == TaskKind.MMA and task.mma_dtype == "i8":
            wgmma = ""
            if w.choice.style == Style.WARP_SPECIALIZED:
                wgmma = " (wgmma m64nNk32 .s8)"
            elif "wgmma" in device.features:
                wgmma = " (mma.sync m16n8k32 .s8)"
            out.append(Reason("unit", f"{task.name} runs on the integer tensor cores"
                                      f"{wgmma}: i8 products, exact s32 sums that wrap "
                                      "modulo 2^32"))
        elif task.kind == TaskKind.MMA and reads_fnuz(device, task.mma_dtype):
            out.append(Reason("unit", f"{task.name} runs on the FP8 matrix unit at its FP8 rate: "
                                      "its instructions read the FNUZ formats, so each register "
                                      "of four OCP codes is rebiased in registers (-0 and NaN "
                                      "fixed up; a code read as FNUZ is half its value) and the "
                                      "accumulator is kept in quarter units, exact; a k-step "
                                      "whose e5m2 operands hold an infinity (no FNUZ code) is "
                                      "multiplied through f16 instead"))
        elif task.kind == TaskKind.MMA and rate_dtype(device, task.mma_dtype) != task.mma_dtype \
                and w.choice.style != Style.WARP_SPECIALIZED:     # (wgmma takes FP8 itself)
            to = rate_dtype(device, task.mma_dtype)
            wgmma = (" (mma.sync: this plan is not warp-specialized)"
                     if "wgmma" in device.features else "")
            out.append(Reason("unit", f"{task.name} runs on the {to} tensor cores{wgmma}: "
                                      f"{device.name}'s matrix instructions here take no FP8, "
                                      f"so each register of four FP8 bytes is converted to "
                                      f"{to} in registers (exact for every FP8 value) on the "
                                      f"way to the instruction, at {to}'s rate"))
        elif task.kind == TaskKind.MMA and task.mma_dtype == "tf32":
            out.append(Reason("unit", f"{task.name} runs on tensor cores in TF32, as the "
                                      "program asks (`as tf32`): operands rounded to 10 "
                                      "mantissa bits, products summed in f32"))
    return out


def _lowering_reasons(ctx: Context) -> list[Reason]:
    """What the lowering of the winner decided beyond the plan, in its notes (the kernel's
    `note:` lines): products multiplied swapped, the occupancy the register allocator is
    asked for, ..."""
    from ..lower import LoweringError, lower
    from ..render import capabilities

    device = ctx.result.device
    try:
        low = lower(ctx.best.plan, ctx.best.graph, device, capabilities(device))
    except LoweringError:
        return []
    return [Reason("lowering", note) for note in low.notes]


RULES: tuple[Callable[[Context], list[Reason]], ...] = (
    _matmul_unit_reasons, _lowering_reasons, _stages_reasons, _consumers_reasons,
    _pingpong_reasons, _overlap_reasons, _warps_reasons, _style_reasons,
    _pipelining_reasons, tiles_reasons, _launch_reasons)
