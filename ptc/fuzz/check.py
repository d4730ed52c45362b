"""Differential check of one program: the reference interpreter against the kernel rendered
for each target and run on the CPU emulator, on the same random inputs.

Any difference beyond rounding, any internal error, any program that checks but does not
build, and anything the emulator refuses (an access out of bounds, a barrier not every
thread reaches, ...) is a Finding. `check_program` never raises for what the program does;
only a program that does not check is the caller's mistake (ValueError).

A located "no plan fits" because the plainest plan is over a limit of the device (128 x
128 x 64 f32 staging is over gfx942's 64 KiB of LDS) is what `ptc compile` tells a user
who asks for too much, not a wrong kernel. It is kept as a Refusal, which
`python -m ptc.fuzz` lists for review; at tile sizes the checker pinned, the program is
checked again at the search's own tiles, and what that finds is a finding.
"""
from __future__ import annotations

import functools
import random
import traceback
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..diagnostics import CompileError

TARGETS = ("sm80", "sm90", "gfx90a", "gfx942")
LOW_PRECISION = ("f16", "bf16")


@dataclass(frozen=True)
class Source:
    """A program as text with the dims to run it at (a reproducer of tests/generated/)."""

    name: str
    text: str
    shapes: tuple[tuple[str, int], ...]

    @property
    def shape_dict(self) -> dict[str, int]:
        return dict(self.shapes)


def load_reproducer(path) -> Source:
    """A .pt file with a `# shapes: M=2,N=1` line."""
    from pathlib import Path

    text = Path(path).read_text()
    for line in text.splitlines():
        if line.startswith("# shapes:"):
            pairs = [p.split("=") for p in line.split(":", 1)[1].split(",") if p.strip()]
            return Source(Path(path).stem, text, tuple(sorted((k.strip(), int(v))
                                                              for k, v in pairs)))
    raise ValueError(f"{path} has no '# shapes:' line")


@dataclass(frozen=True)
class Finding:
    target: str
    kind: str            # mismatch | build | internal | emulator | host-build
    message: str         # one line: what differs or what failed
    tiles: tuple[tuple[str, int], ...] = ()

    def line(self) -> str:
        tiles = " ".join(f"{k}={v}" for k, v in self.tiles)
        return f"{self.target}: {self.kind}: {self.message}" + (f" [{tiles}]" if tiles else "")

    def same_bug(self, other: "Finding") -> bool:
        """The same target and kind (what a reduction must keep)."""
        return self.target == other.target and self.kind == other.kind


@dataclass(frozen=True)
class Refusal:
    """No plan fits `target` at `tiles` (the pinned ones; () for the search's), over a
    limit of the device: the error and its hint, for a reviewer to judge (too much asked,
    or a plan the construction should have found)."""

    target: str
    message: str
    tiles: tuple[tuple[str, int], ...]

    def line(self) -> str:
        tiles = " ".join(f"{k}={v}" for k, v in self.tiles) or "the search's tiles"
        return f"{self.target}: refused at {tiles}: {self.message}"


NO_PLAN = "no plan for kernel"     # how the search's located refusal starts (ptc.sched.search)


def over_capacity(exc: CompileError) -> bool:
    """The search found no plan because even the plainest one (sequential) is over a
    limit of the device (shared memory, registers), as its hint says: too much asked,
    not a construct the back end lacks."""
    for d in exc.diagnostics:
        if d.message.startswith(NO_PLAN) and d.hint:
            plain = next((part for part in d.hint.split("; ") if part.startswith("sequential:")),
                         "")
            return " over " in plain
    return False


def typed_kernel(program):
    from ..grammar import parse
    from ..sema import check

    try:
        return check(parse(program.text, f"{program.name}.pt"), program.shape_dict).kernels[0]
    except CompileError as exc:
        raise ValueError(f"the program does not check: {exc}") from None


def pinned_tiles(program, kernel, seed: int) -> dict[str, int]:
    """Half the time every declared tile size pinned to a random candidate (so that every
    candidate is built sometimes, not only the search's pick), else none."""
    rng = random.Random(seed)
    if rng.random() < 0.5:
        return {}
    return {t.name: rng.choice(t.choices) for t in kernel.tiles}


def tolerance(kernel) -> float:
    """Normwise: |got - want|_inf <= tol * max(1, |want|_inf)."""
    low = any(getattr(p, "dtype", "") in LOW_PRECISION for p in kernel.inputs)
    return 2e-2 if low else 2e-4


def compare(kernel, got: dict, want: dict) -> str | None:
    tol = tolerance(kernel)
    for p in kernel.outputs:
        g = np.asarray(got[p.name], dtype=np.float64)
        w = np.asarray(want[p.name], dtype=np.float64)
        if g.shape != w.shape:
            return f"{p.name}: shape {g.shape}, the interpreter's {w.shape}"
        nan_w, nan_g = np.isnan(w), np.isnan(g)
        if (nan_g & ~nan_w).any():
            where = tuple(int(i) for i in np.argwhere(nan_g & ~nan_w)[0])
            return f"{p.name}: NaN at {where} where the interpreter has {w[where]:.6g}"
        ok = ~nan_w
        inf_w = np.isinf(w) & ok
        if (g[inf_w] != w[inf_w]).any():
            where = tuple(int(i) for i in np.argwhere(inf_w & (g != w))[0])
            return f"{p.name}: {g[where]:.6g} at {where}, the interpreter has {w[where]:.6g}"
        finite = ok & ~inf_w
        if not finite.any():
            continue
        scale = max(1.0, float(np.abs(w[finite]).max()))
        with np.errstate(invalid="ignore"):       # inf - inf where both are inf: not counted
            err = np.abs(g - w)
        err[~finite] = 0
        if float(err.max()) > tol * scale:
            where = tuple(int(i) for i in np.unravel_index(int(err.argmax()), err.shape))
            bad = int((err > tol * scale).sum())
            return (f"{p.name}: {bad} of {w.size} elements differ; at {where} "
                    f"{g[where]:.6g}, the interpreter has {w[where]:.6g} (tolerance "
                    f"{tol:g} x {scale:.3g})")
    return None


@dataclass(frozen=True)
class Rendered:
    """A program's kernel rendered for one target, ready to build and run."""

    target: str
    source: str
    device: object
    built: tuple         # the tile sizes its plans were built with
    grid_tiles: tuple    # per grid: its plan's tile sizes


def render_target(program, kernel, target: str, tiles: dict[str, int],
                  refusals: list | None = None) -> Rendered | Finding | None:
    """`program`'s kernel rendered for `target` at the `tiles` it pins, or the finding that
    stopped it. With `refusals` (a list), a refusal over the device's capacity is appended
    there instead of being a finding, and the search's own tiles are rendered where `tiles`
    were pinned (None: none to render)."""
    from .. import driver

    pinned = tuple(sorted(tiles.items()))
    try:
        source, plans, _, device, _ = driver.render(kernel, target, shapes=program.shape_dict,
                                                    tiles=tiles)
    except CompileError as exc:
        text = str(exc)
        if refusals is not None and over_capacity(exc):
            why = "; ".join(d.message + (f" (hint: {d.hint})" if d.hint else "")
                            for d in exc.diagnostics)
            refusals.append(Refusal(target, " ".join(why.split())[:400], pinned))
            # pinned: what the search picks must still build and match
            return render_target(program, kernel, target, {}, refusals) if tiles else None
        return Finding(target, "build", text.splitlines()[0][:300], pinned)
    except Exception as exc:  # noqa: BLE001 -- any other exception is a bug of ptc's
        return Finding(target, "internal", _internal(exc), pinned)
    built = tuple(sorted({k: v for p in plans for k, v in p.tiles}.items()))
    return Rendered(target, source, device, built, tuple(tuple(sorted(p.tiles)) for p in plans))


def run_target(program, kernel, inputs: dict, want, rendered: Rendered,
               emulated) -> Finding | None:
    """The finding of `rendered` built for the CPU (`emulated`: its EmulatedKernel, or the
    EmulationError of its build), run on `inputs` against the interpreter: `want(grid_tiles)`
    gives the interpreter's outputs with each grid at the tile sizes its plan was built
    with (a pad value that enters a reduction, `sum(load(X[i, j], pad=-2.0), axis=0)`,
    makes the result depend on them, and the search may pick sizes other than the first
    candidates)."""
    from ..interp import bind_dims
    from ..render.emulate import EmulationError

    target, built = rendered.target, rendered.built
    if isinstance(emulated, EmulationError):
        return Finding(target, "host-build", str(emulated).splitlines()[0][:300], built)
    dims = bind_dims(kernel, {}, program.shape_dict)
    try:
        got = emulated(kernel, inputs, dims)
    except EmulationError as exc:
        return Finding(target, "emulator", str(exc).splitlines()[0][:300], built)
    except Exception as exc:  # noqa: BLE001
        return Finding(target, "internal", _internal(exc), built)
    why = compare(kernel, got, want(rendered.grid_tiles))
    return Finding(target, "mismatch", why, built) if why else None


def _internal(exc: BaseException) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" ({frame.filename.split('ptc/')[-1]}:{frame.lineno})" if frame else ""
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}{where}"


def check_program(program, targets=TARGETS, *, seed: int = 0,
                  refusals: list | None = None) -> list[Finding]:
    """Every finding of `program` on `targets` (empty: it matches everywhere). With
    `refusals` (a list), a "no plan fits" over the device's capacity is a Refusal appended
    there (see the module's docstring); without it, a finding."""
    return check_programs([Check(program, tuple(targets), seed)], refusals=refusals)[0]


@dataclass(frozen=True)
class Check:
    """One program to check: on which targets, with which seed for its inputs."""

    program: object
    targets: tuple[str, ...] = TARGETS
    seed: int = 0


def check_programs(checks: Sequence[Check], *,
                   refusals: list | None = None) -> list[list[Finding]]:
    """The findings of each check, as `check_program`'s; the kernels of all of them compiled
    together, several to a unit per backend (ptc.render.emulate_units): a batch of programs
    costs a fraction of their builds one by one."""
    from ..render.emulate import build_emulated_many

    prepared = [_prepare(c, refusals) for c in checks]
    rendered = [m for p in prepared for m in p.made if isinstance(m, Rendered)]
    built = dict(zip(map(id, rendered), build_emulated_many(
        [r.source for r in rendered], backend=[r.device.backend for r in rendered])))
    out = []
    for p in prepared:
        found = [run_target(p.program, p.kernel, p.inputs, p.want, m, built[id(m)])
                 if isinstance(m, Rendered) else m for m in p.made]
        out.append([f for f in found if f is not None])
    return out


@dataclass(frozen=True)
class _Prepared:
    program: object
    kernel: object
    inputs: dict
    want: Callable
    made: tuple      # per target: Rendered, a Finding, or None (refused)


def _prepare(check: Check, refusals: list | None) -> _Prepared:
    from ..interp import bind_dims, random_inputs, run_kernel

    program = check.program
    kernel = typed_kernel(program)
    dims = bind_dims(kernel, {}, program.shape_dict)
    inputs = random_inputs(kernel, dims, seed=check.seed)
    tiles = pinned_tiles(program, kernel, check.seed)

    @functools.lru_cache(maxsize=None)
    def want(grid_tiles: tuple[tuple[tuple[str, int], ...], ...]) -> dict:
        return run_kernel(kernel, inputs, shapes=dims, tiles=tiles,
                          grid_tiles=[dict(t) for t in grid_tiles])

    made = tuple(render_target(program, kernel, target, tiles, refusals)
                 for target in check.targets)
    return _Prepared(program, kernel, inputs, want, made)
