"""The catalogue of coverage cases, and running them on the CPU emulator against the
reference interpreter (docs/testing.md, "Coverage of the decision space").

A `Case` is a kernel (a .pt file of the repository) x a target x pinned tile sizes x a
plan choice (ptc.sched.construct.Choice: grids without a tile loop take the sequential
plan with the same warps) x one or more shapes. It is lowered and rendered as `ptc
compile` would, built once for the emulator (cached on disk by content), and run at each
shape against ptc.interp; the forms a run exercises are those of the variant its shape
takes (ptc.coverage.forms_of with the dims). `CATALOGUE` is chosen so that every form
`ptc.coverage.universe` calls reachable is exercised by a case that passes.

    results = run_catalogue(CATALOGUE)
    rows = coverage(results)       # per target and form: the cases that cover it
"""
from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from ..sched.construct import Choice
from ..sched.plan import Style
from .forms import Form, forms_of

ROOT = Path(__file__).resolve().parent.parent.parent

# plan choices, as the search spells them (ptc.sched.search.choices_for)
SEQ4 = Choice(Style.SEQUENTIAL, 1, warps=4)
SEQ8 = Choice(Style.SEQUENTIAL, 1, warps=8)
MS2 = Choice(Style.MULTISTAGE, 2, warps=4)
MS3 = Choice(Style.MULTISTAGE, 3, warps=4)
MS4 = Choice(Style.MULTISTAGE, 4, warps=4)
MS2W8 = Choice(Style.MULTISTAGE, 2, warps=8)
MS3W8 = Choice(Style.MULTISTAGE, 3, warps=8)
MS4W8 = Choice(Style.MULTISTAGE, 4, warps=8)
IL4 = Choice(Style.INTERLEAVED, 1, warps=4)
IL8 = Choice(Style.INTERLEAVED, 1, warps=8)
WS = Choice(Style.WARP_SPECIALIZED, 2, 1)
WS3 = Choice(Style.WARP_SPECIALIZED, 3, 1)
WS2C = Choice(Style.WARP_SPECIALIZED, 2, 2)
WSPP = Choice(Style.WARP_SPECIALIZED, 2, 2, pingpong=True)
WSOV = Choice(Style.WARP_SPECIALIZED, 2, 1, overlap=True)
WSPPOV = Choice(Style.WARP_SPECIALIZED, 2, 2, pingpong=True, overlap=True)

# relative L2 error allowed against the interpreter, by output dtype: the same roundings,
# sums in another order (16-bit outputs round those differences once more)
TOLERANCE = {"f32": 1e-4, "f16": 1e-2, "bf16": 1e-2, "i32": 0.0, "bool": 0.0}


def _dims(text: str) -> tuple[tuple[str, int], ...]:
    """"M=64 N=128" -> (("M", 64), ("N", 128))."""
    out = []
    for item in text.split():
        name, _, value = item.partition("=")
        out.append((name, int(value)))
    return tuple(out)


@dataclass(frozen=True)
class Case:
    name: str                                   # unique, for people: the table names it
    path: str                                   # the .pt file, from the repository's root
    kernel: str
    target: str
    tiles: tuple[tuple[str, int], ...]
    choice: Choice
    shapes: tuple[tuple[tuple[str, int], ...], ...]   # one run each; the first is checked
    # inputs: N(0, scale) for floats, integers in [-scale, scale] for i32 (default 1, 8),
    # every value for i8 and u8
    scales: tuple[tuple[str, float], ...] = ()
    scalars: tuple[tuple[str, float], ...] = ()       # scalar parameters (default 0.5)

    def describe(self) -> str:
        tiles = " ".join(f"{k}={v}" for k, v in self.tiles)
        return f"{self.path}:{self.kernel} {self.target} [{tiles}] {self.choice.describe()}"

    def to_json(self) -> dict:
        return {"name": self.name, "path": self.path, "kernel": self.kernel,
                "target": self.target, "tiles": dict(self.tiles),
                "plan": self.choice.describe(), "shapes": [dict(s) for s in self.shapes]}


def case(name: str, path: str, kernel: str, target: str, tiles: str, choice: Choice,
         *shapes: str, scales: Mapping[str, float] | None = None,
         scalars: Mapping[str, float] | None = None) -> Case:
    return Case(name, path, kernel, target, _dims(tiles), choice,
                tuple(_dims(s) for s in shapes), tuple((scales or {}).items()),
                tuple((scalars or {}).items()))


@dataclass(frozen=True)
class Run:
    """One launch of a case's build at one shape."""

    dims: tuple[tuple[str, int], ...]
    forms: frozenset[Form]
    errors: tuple[tuple[str, float], ...]       # output -> relative L2 error
    passed: bool
    problem: str = ""                           # why it did not pass (an exception)


@dataclass(frozen=True)
class Result:
    case: Case
    runs: tuple[Run, ...]
    problem: str = ""           # why the case did not build (lowering, render, compile)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.problem and all(r.passed for r in self.runs)

    def forms(self, passed_only: bool = True) -> frozenset[Form]:
        return frozenset(f for r in self.runs if r.passed or not passed_only for f in r.forms)


# ---- building and running a case ---------------------------------------------------------
@dataclass(frozen=True)
class Built:
    kernel: object
    device: object
    lows: tuple          # per grid: the lowered kernel
    plans: tuple         # per grid: the plan as built (its launch from the lowering)
    source: str


def lowered(c: Case) -> Built:
    """Check, plan (the case's choice, its tiles), lower and render `c` for its target."""
    from ..devices import get_device
    from ..driver import check_file, grids, lowered_plan
    from ..render import render
    from ..sched.construct import construct, pipelined_loop
    from ..stask import build_graph, propagate

    device = get_device(c.target)
    program = check_file(ROOT / c.path, dict(c.shapes[0]))
    kernel = next((k for k in program.kernels if k.name == c.kernel), None)
    if kernel is None:
        raise LookupError(f"{c.path} has no kernel {c.kernel}")
    tiles = dict(c.tiles)
    lows, plans = [], []
    for part in grids(kernel):
        names = {t.name for t in part.tiles}
        graph = propagate(build_graph(part, part.body[0]),
                          {k: v for k, v in tiles.items() if k in names})
        choice = c.choice if pipelined_loop(graph) else \
            Choice(Style.SEQUENTIAL, 1, warps=c.choice.warps)
        plan = construct(graph, device, choice)
        low, built = lowered_plan(plan, graph, device)   # refused as the search would
        plans.append(built)
        lows.append(low)
    return Built(kernel, device, tuple(lows), tuple(plans), render(lows, kernel, plans, device))


def inputs_of(c: Case, kernel, dims: Mapping[str, int], seed: int = 1) -> dict:
    import ml_dtypes

    from ..interp import NUMPY_DTYPES
    from ..sema import typed as T

    rng = np.random.default_rng(seed)
    scales = dict(c.scales)
    out: dict = {}
    for p in kernel.inputs:
        if isinstance(p, T.ScalarParam):
            out[p.name] = np.float32(dict(c.scalars).get(p.name, 0.5))
            continue
        shape = p.shape_in(dims)
        if p.dtype == "i32":
            bound = int(scales.get(p.name, 8))
            out[p.name] = rng.integers(-bound, bound + 1, shape).astype(np.int32)
        elif p.dtype in ("i8", "u8"):       # every value of the dtype
            lo, hi = (-128, 127) if p.dtype == "i8" else (0, 255)
            out[p.name] = rng.integers(lo, hi + 1, shape).astype(NUMPY_DTYPES[p.dtype])
        elif p.dtype == "bool":
            out[p.name] = rng.random(shape) < 0.5
        else:
            dtype = ml_dtypes.bfloat16 if p.dtype == "bf16" else NUMPY_DTYPES[p.dtype]
            out[p.name] = (rng.standard_normal(shape) * scales.get(p.name, 1.0)).astype(dtype)
    return out


def rel_error(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    diff = np.linalg.norm(got - want)
    return float(diff / np.linalg.norm(want)) if np.linalg.norm(want) else float(diff)


def run_case(c: Case, log: Callable[[str], None] | None = None) -> Result:
    """Build `c` and run it at each of its shapes against the interpreter."""
    return run_catalogue([c], log)[0]


def _lowered_and_built(cases: Sequence[Case]) -> list:
    """Per case: (Built, its EmulatedKernel, seconds) or the exception that stopped it. The
    kernels of one device are compiled together (build_emulated_many)."""
    from ..render.emulate import build_emulated_many

    out: list = []
    for c in cases:
        start = time.monotonic()
        try:
            out.append((lowered(c), time.monotonic() - start))
        except Exception as exc:   # noqa: BLE001 -- a case that does not lower is a finding
            out.append(exc)
    at = [i for i, made in enumerate(out) if isinstance(made, tuple)]
    start = time.monotonic()
    kernels = build_emulated_many([out[i][0].source for i in at],
                                  backend=[out[i][0].device for i in at])
    share = (time.monotonic() - start) / max(len(at), 1)
    for i, kernel in zip(at, kernels):
        built, seconds = out[i]
        out[i] = kernel if isinstance(kernel, Exception) else (built, kernel, seconds + share)
    return out


def _runs(c: Case, built: Built, emulated) -> tuple[Run, ...]:
    """`c`'s emulated kernel run at each of its shapes against the interpreter."""
    from ..interp import run_kernel

    runs = []
    outputs = {p.name: p.dtype for p in built.kernel.outputs}
    for shape in c.shapes:
        dims = dict(shape)
        forms = frozenset().union(*(forms_of(low, built.device, dims) for low in built.lows))
        try:
            inputs = inputs_of(c, built.kernel, dims)
            got = emulated(built.kernel, inputs, {d.name: dims[d.name] for d in built.kernel.dims})
            want = run_kernel(built.kernel, inputs, shapes=dims, tiles=dict(c.tiles))
            errors = tuple((n, rel_error(got[n], w)) for n, w in want.items())
            passed = all(e <= TOLERANCE[outputs[n]] for n, e in errors)
            runs.append(Run(shape, forms, errors, passed,
                            "" if passed else "differs from the interpreter"))
        except Exception as exc:   # noqa: BLE001 -- an emulator error is a finding
            runs.append(Run(shape, forms, (), False, _problem(exc)))
    return tuple(runs)


def lowered_result(c: Case) -> Result:
    """`c` lowered and rendered only, not built or run: its runs hold the forms each shape
    would exercise, counted as passed (`ptc coverage --lower-only`)."""
    start = time.monotonic()
    try:
        built = lowered(c)
    except Exception as exc:   # noqa: BLE001 -- a case that does not lower is a finding
        return Result(c, (), _problem(exc), time.monotonic() - start)
    runs = tuple(Run(shape, frozenset().union(*(forms_of(low, built.device, dict(shape))
                                                 for low in built.lows)), (), True)
                 for shape in c.shapes)
    return Result(c, runs, "", time.monotonic() - start)


def _problem(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    if not first:
        first = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return f"{type(exc).__name__}: {first}"[:500]


def run_catalogue(cases: Iterable[Case] | None = None,
                  log: Callable[[str], None] | None = None) -> list[Result]:
    """Each case built (a target's kernels together) and run against the interpreter; a
    case that does not lower or build is a finding, in its Result's problem."""
    cases = list(CATALOGUE if cases is None else cases)
    results = []
    for c, made in zip(cases, _lowered_and_built(cases)):
        if isinstance(made, Exception):
            results.append(Result(c, (), _problem(made), 0.0))
            continue
        built, emulated, seconds = made
        start = time.monotonic()
        result = Result(c, _runs(c, built, emulated), "", seconds + time.monotonic() - start)
        if log is not None:
            log(f"{'ok  ' if result.passed else 'FAIL'} {c.name} ({result.seconds:.1f} s)")
        results.append(result)
    return results


# ---- the coverage table ---------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    form: Form
    unreachable: str | None       # why the lowering never produces it (None: reachable)
    passed: tuple[Case, ...]      # cases whose passing runs exercise it
    failed: tuple[Case, ...] = field(default=())   # cases whose failing runs do

    @property
    def covered(self) -> bool:
        return bool(self.passed)


def coverage(results: Iterable[Result], targets: Iterable[str] | None = None) -> list[Row]:
    """Every form of each target's universe with the cases that exercise it."""
    from ..devices import get_device
    from .universe import universe

    seen = [(r.case, r.forms(True), r.forms(False)) for r in results]
    names = list(targets) if targets is not None else \
        list(dict.fromkeys(c.target for c, _, _ in seen))
    rows = []
    for target in names:
        for f, why in universe(get_device(target)).items():
            passed = tuple(c for c, ok, _ in seen if f in ok)
            failed = tuple(c for c, ok, every in seen if f in every and f not in ok)
            rows.append(Row(f, why, passed, failed))
    return rows


def uncovered(rows: Iterable[Row]) -> list[Row]:
    """Reachable forms that no passing case exercises."""
    return [r for r in rows if r.unreachable is None and not r.covered]


# ---- the catalogue --------------------------------------------------------------------------
GEMM = "samples/gemm.pt"
OPERANDS = "tests/sm90/gemm_operands.pt"
FLASH = "samples/flash_attn.pt"
COV = "tests/coverage/"
IGEMM = COV + "igemm.pt"
FP8GEMM = COV + "fp8gemm.pt"


def _portable(t: str) -> tuple[Case, ...]:
    """The cases every target runs alike (the same tiles and plan)."""
    return (
        case(f"named_column.{t}.seq4", "tests/generated/issue20-named-column.pt", "r04", t,
             "BM=16 BN=64", SEQ4, "M=37 N=70"),
        case(f"atomics.{t}.seq8", COV + "atomics.pt", "atomics", t, "BM=16 BN=64", SEQ8,
             "M=40 N=72", scales={"I": 1 << 25}),
        case(f"odd_strides.{t}.ms2", COV + "odd_strides.pt", "odd_strides", t,
             "BM=64 BN=32 BK=32", MS2, "M=80 N1=98 N2=100"),
    )


def _single_role(t: str) -> tuple[Case, ...]:
    """The cases of a CUDA target's single-role plans (sm80, and sm90's non-specialized)."""
    return (
        case(f"gemm.{t}.ms3", GEMM, "gemm", t, "BM=64 BN=64 BK=32", MS3,
             "M=128 N=128 K=64", "M=70 N=72 K=33"),
        case(f"gemm_nn.{t}.ms2", OPERANDS, "gemm_nn", t, "BM=64 BN=24 BK=48", MS2,
             "M=128 N=48 K=96", "M=70 N=30 K=100"),
        case(f"gemm_nt.{t}.seq4", OPERANDS, "gemm_nt", t, "BM=64 BN=24 BK=48", SEQ4,
             "M=128 N=48 K=96"),
        case(f"gemm_nt.{t}.ms4", OPERANDS, "gemm_nt", t, "BM=64 BN=24 BK=64", MS4,
             "M=64 N=48 K=128"),
        case(f"gemm_nt.{t}.ms2w8", OPERANDS, "gemm_nt", t, "BM=128 BN=24 BK=32", MS2W8,
             "M=128 N=48 K=64"),
        case(f"gemm_tn.{t}.ms4", OPERANDS, "gemm_tn", t, "BM=48 BN=32 BK=48", MS4,
             "M=96 N=64 K=96"),
        case(f"flash_attn.{t}.il4", FLASH, "flash_attn", t, "BM=32 BN=128", IL4,
             "B=1 H=2 S=64 T=130 D=64"),
        case(f"linear_attn_state.{t}.il8", "tests/kernels/linear_attn_state.pt",
             "linear_attn_state", t, "BD=32 BE=32 BT=128", IL8, "B=1 H=2 T=200 D=64 E=64"),
    ) + _portable(t) + (
        case(f"hoisted.{t}.ms4w8", COV + "hoisted.pt", "hoisted", t, "BM=64 BE=64 BF=64",
             MS4W8, "M=100 D=64 E=64 F=64"),
        case(f"gemm_tf32.{t}.ms3w8", "tests/kernels/gemm_tf32.pt", "gemm_tf32", t,
             "BM=64 BN=64 BK=32", MS3W8, "M=96 N=80 K=64"),
        case(f"w4a16.{t}.ms2w8", "tests/kernels/w4a16.pt", "w4a16", t, "BM=64 BN=64 BK=32",
             MS2W8, "P=8 M=64 N=64 KP=64", scales={"W": 1 << 30, "A": 0.1}),
        case(f"gemm_f32.{t}.seq8", "tests/kernels/gemm_f32.pt", "gemm_f32", t,
             "BM=64 BN=64 BK=16", SEQ8, "M=70 N=64 K=40"),
        # B computed two 16-bit values a register at a time (ptc.lower.pairs): every piece,
        # in f16 and bf16
        case(f"pairs16.{t}.ms2", COV + "pairs16.pt", "pairs16", t, "BM=64 BN=64 BK=32",
             MS2, "M=64 N=64 K=64", "M=70 N=50 K=40", scales={"W": 1 << 30, "X": 1 << 30}),
        case(f"pairs16_bf16.{t}.ms2", COV + "pairs16.pt", "pairs16_bf16", t,
             "BM=64 BN=64 BK=32", MS2, "M=64 N=64 K=64", "M=70 N=50 K=40",
             scales={"W": 1 << 30, "X": 1 << 30}),
        # i8 on mma.sync m16n8k32: operands with k along their rows byte by byte (rows of
        # 96 and 48 bytes, then swizzled ones), operands quantized in registers
        case(f"igemm_tn.{t}.ms2", IGEMM, "igemm_tn", t, "BM=96 BN=48 BK=32", MS2,
             "M=96 N=96 K=64", "M=70 N=50 K=40"),
        case(f"igemm_tn.{t}.seq4", IGEMM, "igemm_tn", t, "BM=64 BN=64 BK=64", SEQ4,
             "M=64 N=64 K=128"),
        case(f"igemm_regs.{t}.ms2", IGEMM, "igemm_regs", t, "BM=64 BN=64 BK=32", MS2,
             "M=64 N=64 K=64"),
        # FP8 on mma.sync m16n8k32's byte fragments, widened to f16 (e4m3 x e5m2 both
        # ways): byte reads and ldmatrix, operands quantized in registers
        case(f"fp8_nn.{t}.ms2", FP8GEMM, "fp8_nn", t, "BM=64 BN=64 BK=32", MS2,
             "M=64 N=64 K=64", "M=70 N=50 K=40"),
        case(f"fp8_nt.{t}.ms2", FP8GEMM, "fp8_nt", t, "BM=64 BN=64 BK=64", MS2,
             "M=64 N=64 K=128"),
        case(f"fp8_regs.{t}.seq4", FP8GEMM, "fp8_regs", t, "BM=64 BN=64 BK=32", SEQ4,
             "M=64 N=64 K=64"),
    )


def _mfma(t: str) -> tuple[Case, ...]:
    """The cases of a HIP target (gfx90a, gfx942: one renderer, the same forms)."""
    return _mfma_float(t) + _mfma_i8(t) + _mfma_fp8(t) + _mfma_narrow(t)


def _mfma_narrow(t: str) -> tuple[Case, ...]:
    """8 rows or 8 columns on a 16 x 16 MFMA (atoms.narrowed), every input dtype: tiles of
    8 along m or n (the lowering may compute a product transposed, so each axis of the
    instruction comes from one of the two)."""
    out = []
    for name, path, kernel, k in (("f16", OPERANDS, "gemm_nn", 32), ("bf16", FLASH, None, 0),
                                  ("i8", IGEMM, "igemm_nt", 64), ("e4m3", FP8GEMM, "fp8_nn", 64),
                                  ("e5m2", FP8GEMM, "fp8_nt", 64)):
        if kernel is None:     # bf16: flash attention's 8 query rows
            out.append(case(f"narrow_{name}.{t}.rows", path, "flash_attn", t, "BM=8 BN=32",
                            SEQ4, "B=1 H=2 S=24 T=70 D=64"))
            out.append(case(f"narrow_{name}.{t}.cols", path, "flash_attn", t, "BM=64 BN=8",
                            SEQ4, "B=1 H=1 S=64 T=40 D=64"))
            continue
        out.append(case(f"narrow_{name}.{t}.rows", path, kernel, t, f"BM=8 BN=64 BK={k}",
                        SEQ4, f"M=24 N=64 K={2 * k}", f"M=13 N=50 K={k + 8}"))
        out.append(case(f"narrow_{name}.{t}.cols", path, kernel, t, f"BM=64 BN=8 BK={k}",
                        SEQ4, f"M=64 N=24 K={2 * k}", f"M=50 N=13 K={k + 8}"))
    return tuple(out)


def _mfma_float(t: str) -> tuple[Case, ...]:
    """A HIP target's cases of 16- and 32-bit float kernels."""
    return (
        case(f"gemm.{t}.ms2", GEMM, "gemm", t, "BM=64 BN=64 BK=32", MS2,
             "M=128 N=128 K=64", "M=70 N=72 K=33"),
        case(f"gemm_nn.{t}.ms2w8", OPERANDS, "gemm_nn", t, "BM=64 BN=64 BK=16", MS2W8,
             "M=128 N=128 K=64"),
        case(f"gemm_nn.{t}.seq4", OPERANDS, "gemm_nn", t, "BM=64 BN=48 BK=48", SEQ4,
             "M=128 N=96 K=96"),
        case(f"gemm_tn.{t}.ms2", OPERANDS, "gemm_tn", t, "BM=96 BN=32 BK=48", MS2,
             "M=96 N=64 K=96"),
        case(f"gemm_tn.{t}.seq4", OPERANDS, "gemm_tn", t, "BM=96 BN=96 BK=48", SEQ4,
             "M=96 N=96 K=96"),
        case(f"gemm_nt.{t}.seq8", OPERANDS, "gemm_nt", t, "BM=64 BN=64 BK=48", SEQ8,
             "M=128 N=64 K=96"),
        case(f"gemm_silu.{t}.ms2", "tests/kernels/gemm_silu.pt", "gemm_silu", t,
             "BM=128 BN=128 BK=32", MS2, "M=128 N=130 K=64"),
        case(f"gemm_silu.{t}.ms2w8", "tests/kernels/gemm_silu.pt", "gemm_silu", t,
             "BM=64 BN=64 BK=32", MS2W8, "M=128 N=130 K=64"),
        case(f"flash_attn.{t}.il4", FLASH, "flash_attn", t, "BM=128 BN=32", IL4,
             "B=1 H=2 S=128 T=100 D=64"),
        case(f"flash_attn.{t}.seq4", FLASH, "flash_attn", t, "BM=32 BN=32", SEQ4,
             "B=1 H=1 S=64 T=100 D=64"),
        case(f"padmask_attn.{t}.il4", "tests/kernels/padmask_attn.pt", "padmask_attn", t,
             "BM=128 BN=128", IL4, "B=1 H=1 S=200 D=64"),
        case(f"padmask_attn.{t}.il8", "tests/kernels/padmask_attn.pt", "padmask_attn", t,
             "BM=128 BN=128", IL8, "B=1 H=1 S=200 D=64"),
        case(f"mamba2_chunk_scan.{t}.il4", "samples/mamba2_chunk_scan.pt",
             "mamba2_chunk_scan", t, "BM=128 BP=32 BS=32", IL4,
             "B=1 NC=1 L=128 H=2 G=1 P=32 N=32"),
        case(f"mamba2_chunk_scan.{t}.seq8", "samples/mamba2_chunk_scan.pt",
             "mamba2_chunk_scan", t, "BM=128 BP=32 BS=32", SEQ8,
             "B=1 NC=1 L=128 H=2 G=1 P=32 N=32"),
        case(f"linear_attn_state.{t}.il4", "tests/kernels/linear_attn_state.pt",
             "linear_attn_state", t, "BD=32 BE=32 BT=128", IL4, "B=1 H=2 T=200 D=64 E=64"),
    ) + _portable(t) + (
        case(f"hoisted.{t}.ms2", COV + "hoisted.pt", "hoisted", t, "BM=64 BE=64 BF=64",
             MS2, "M=100 D=64 E=64 F=64"),
        case(f"hoisted.{t}.ms2w8", COV + "hoisted.pt", "hoisted", t, "BM=64 BE=64 BF=64",
             MS2W8, "M=100 D=64 E=64 F=64"),
        case(f"gemm_f32.{t}.seq8", "tests/kernels/gemm_f32.pt", "gemm_f32", t,
             "BM=64 BN=64 BK=16", SEQ8, "M=70 N=64 K=40"),
        # B computed two f16 values a register at a time (ptc.lower.pairs): every piece
        case(f"pairs16.{t}.ms2", COV + "pairs16.pt", "pairs16", t, "BM=64 BN=64 BK=32",
             MS2, "M=64 N=64 K=64", "M=70 N=50 K=40", scales={"W": 1 << 30, "X": 1 << 30}),
    )


def _mfma_i8(t: str) -> tuple[Case, ...]:
    """A HIP target's cases of i8 products."""
    return (
        # i8 MFMA (gfx90a: 4 bytes a lane, gfx942: 8): 32x32 atoms, operands k-contiguous
        # and not; BN 32 and 16 (BM 256, 128) computed transposed (a lane's A reads fewer
        # fragments); 16x16 atoms at 96 x 96 with rows of 96 bytes; operands in registers
        case(f"igemm_nn.{t}.ms2", IGEMM, "igemm_nn", t, "BM=64 BN=64 BK=32", MS2,
             "M=128 N=128 K=64", "M=70 N=72 K=40"),
        case(f"igemm_nn.{t}.ms2.swapped", IGEMM, "igemm_nn", t, "BM=256 BN=32 BK=32", MS2,
             "M=256 N=64 K=64"),
        case(f"igemm_nn.{t}.ms2.swapped16", IGEMM, "igemm_nn", t, "BM=128 BN=16 BK=32", MS2,
             "M=128 N=32 K=64"),
        case(f"igemm_tn.{t}.ms2", IGEMM, "igemm_tn", t, "BM=96 BN=96 BK=32", MS2,
             "M=96 N=96 K=64"),
        case(f"igemm_nt.{t}.ms2", IGEMM, "igemm_nt", t, "BM=96 BN=96 BK=96", MS2,
             "M=96 N=96 K=192"),
        case(f"igemm_regs.{t}.seq4", IGEMM, "igemm_regs", t, "BM=64 BN=64 BK=32", SEQ4,
             "M=64 N=64 K=64"),
        case(f"igemm_regs.{t}.seq4.16", IGEMM, "igemm_regs", t, "BM=96 BN=96 BK=32", SEQ4,
             "M=96 N=96 K=64"),
    )


def _mfma_fp8(t: str) -> tuple[Case, ...]:
    """A HIP target's cases of FP8 products."""
    return (
        # FP8 (gfx90a: the i8 atoms' bytes widened to f16 for the f16 MFMAs; gfx942: the FP8
        # MFMAs, OCP codes rebiased to FNUZ): both formats as A, 32x32 and 16x16 atoms,
        # products computed transposed, operands in registers
        case(f"fp8_nn.{t}.ms2", FP8GEMM, "fp8_nn", t, "BM=64 BN=64 BK=32", MS2,
             "M=128 N=128 K=64", "M=70 N=72 K=40"),
        case(f"fp8_nn.{t}.ms2.swapped", FP8GEMM, "fp8_nn", t, "BM=256 BN=32 BK=32", MS2,
             "M=256 N=64 K=64"),
        case(f"fp8_nn.{t}.ms2.16", FP8GEMM, "fp8_nn", t, "BM=96 BN=96 BK=32", MS2,
             "M=96 N=96 K=64"),
        case(f"fp8_nn.{t}.ms2.swapped16", FP8GEMM, "fp8_nn", t, "BM=128 BN=16 BK=32", MS2,
             "M=128 N=32 K=64"),
        case(f"fp8_nt.{t}.ms2.swapped", FP8GEMM, "fp8_nt", t, "BM=256 BN=32 BK=32", MS2,
             "M=256 N=64 K=64"),
        case(f"fp8_nt.{t}.ms2.16", FP8GEMM, "fp8_nt", t, "BM=96 BN=96 BK=32", MS2,
             "M=96 N=96 K=64"),
        case(f"fp8_nt.{t}.ms2.swapped16", FP8GEMM, "fp8_nt", t, "BM=128 BN=16 BK=32", MS2,
             "M=128 N=32 K=64"),
        case(f"fp8_regs.{t}.seq4", FP8GEMM, "fp8_regs", t, "BM=64 BN=64 BK=32", SEQ4,
             "M=64 N=64 K=64"),
        case(f"fp8_regs.{t}.seq4.16", FP8GEMM, "fp8_regs", t, "BM=96 BN=96 BK=32", SEQ4,
             "M=96 N=96 K=64"),
    )


def _specialized(t: str) -> tuple[Case, ...]:
    """The cases of warp-specialized plans (sm90a: wgmma, TMA, stmatrix, mbarriers)."""
    return (
        case(f"wgmma_widths_f16.{t}.ws", COV + "wgmma_widths.pt", "wgmma_widths_f16", t, "",
             WS, "M=64 N=256 K=64"),
        case(f"wgmma_widths_bf16.{t}.ws", COV + "wgmma_widths.pt", "wgmma_widths_bf16", t, "",
             WS, "M=64 N=256 K=64"),
        case(f"wgmma_widths_i8.{t}.ws", COV + "wgmma_widths8.pt", "wgmma_widths_i8", t, "",
             WS, "M=64 N=256 K=256"),
        case(f"wgmma_widths_f8e4m3.{t}.ws", COV + "wgmma_widths_fp8.pt", "wgmma_widths_f8e4m3",
             t, "", WS, "M=64 N=256 K=256"),
        case(f"wgmma_widths_f8e5m2.{t}.ws", COV + "wgmma_widths_fp8.pt", "wgmma_widths_f8e5m2",
             t, "", WS, "M=64 N=256 K=256"),
        case(f"wgmma_rs_i8.{t}.ws", COV + "wgmma_widths_rs8.pt", "wgmma_rs_i8", t, "", WS,
             "M=64 N=256 K=256"),
        case(f"wgmma_rs_f8e4m3.{t}.ws", COV + "wgmma_widths_rs8.pt", "wgmma_rs_f8e4m3", t, "",
             WS, "M=64 N=256 K=256"),
        case(f"wgmma_rs_f8e5m2.{t}.ws", COV + "wgmma_widths_rs8.pt", "wgmma_rs_f8e5m2", t, "",
             WS, "M=64 N=256 K=256"),
        case(f"wgmma_operands.{t}.ws3", COV + "wgmma_operands.pt", "wgmma_operands", t, "",
             WS3, "M=128 N=128 K=256", "M=72 N=130 K=250"),
        case(f"gemm.{t}.ws2c", GEMM, "gemm", t, "BM=128 BN=128 BK=64", WS2C,
             "M=256 N=128 K=128", "M=130 N=70 K=66"),
        case(f"flash_attn.{t}.wsppov", FLASH, "flash_attn", t, "BM=128 BN=64", WSPPOV,
             "B=1 H=2 S=128 T=200 D=64"),
        case(f"flash_attn_causal.{t}.wsov", "samples/flash_attn_causal.pt",
             "flash_attn_causal", t, "BM=64 BN=64", WSOV, "B=1 H=2 S=130 D=64"),
        case(f"alibi_attn.{t}.wspp", "tests/kernels/alibi_attn.pt", "alibi_attn", t,
             "BM=128 BN=64", WSPP, "B=1 H=2 S=160 D=64"),
        case(f"gemv.{t}.ws3", "tests/kernels/gemv.pt", "gemv", t, "BM=8 BK=128", WS3,
             "M=40 K=512", "M=37 K=300"),
        case(f"chain_b.{t}.ws", COV + "chain_b.pt", "chain_b", t, "BM=64 BN=64 BK=32", WS,
             "M=128 K=64 N=128 R=64"),
        # BN 32: a lane per column, B staged value by value (wgmma_layouts)
        case(f"chain_b.{t}.ws32", COV + "chain_b.pt", "chain_b", t, "BM=64 BN=32 BK=32", WS,
             "M=128 K=64 N=96 R=64"),
        # B computed from a loaded tile: out^T = b^T a^T (N: the consumer's 64, 256 rows;
        # two consumers, each its rows of A); both computed: B staged by column pairs
        case(f"swapped_b.{t}.ws", COV + "swapped.pt", "swapped_b", t, "BM=64 BN=64 BK=32",
             WS, "M=128 N=128 K=64", "M=70 N=130 K=90"),
        case(f"swapped_b.{t}.ws256", COV + "swapped.pt", "swapped_b", t, "BM=256 BN=64 BK=16",
             WS, "M=256 N=64 K=64", "M=250 N=70 K=40"),
        case(f"swapped_b.{t}.ws2c", COV + "swapped.pt", "swapped_b", t, "BM=128 BN=64 BK=32",
             WS2C, "M=256 N=128 K=64", "M=130 N=66 K=70"),
        case(f"swapped_bf16.{t}.ws", COV + "swapped.pt", "swapped_bf16", t, "BM=64", WS,
             "M=64 N=128 K=64"),
        case(f"swapped_bf16.{t}.ws2c", COV + "swapped.pt", "swapped_bf16", t, "BM=128", WS2C,
             "M=130 N=70 K=64"),
        case(f"computed_ab.{t}.ws", COV + "swapped.pt", "computed_ab", t, "", WS,
             "M=128 N=128 K=64"),
    ) + tuple(case(f"{name}.{t}.ws", COV + "producer_rows.pt", name, t, "", WS, *shapes)
              for name, shapes in PRODUCER_ROWS)


# the producer's threads copy gathered, strided and rank-3 rows: aligned and unaligned K
PRODUCER_ROWS = (
    ("gathered_f16", ("M=70 N=64 K=64", "M=70 N=64 K=60")),
    ("strided_f16", ("M=70 N=64 K=64", "M=70 N=64 K=60")),
    ("gathered_i8", ("M=70 N=64 K=128", "M=70 N=64 K=120")),
    ("strided_i8", ("M=70 N=64 K=128", "M=70 N=64 K=120")),
    ("gathered_f32", ("M=70 K=64", "M=70 K=62")),
    ("strided_f32", ("M=70 K=64", "M=70 K=62")),
    ("rank3_f16", ("H=4 M=40 N=64 K=64", "H=3 M=20 N=64 K=60")),
    ("rank3_i8", ("H=4 M=40 N=64 K=128", "H=3 M=20 N=64 K=120")),
    ("rank3_f32", ("H=4 M=40 K=64", "H=3 M=20 K=62")))


CATALOGUE: tuple[Case, ...] = (_single_role("sm80") + _single_role("sm90") + _specialized("sm90")
                               + _mfma("gfx90a") + _mfma("gfx942"))


__all__ = ["Case", "case", "CATALOGUE", "Run", "Result", "Row", "run_case", "run_catalogue",
           "coverage", "uncovered", "lowered", "lowered_result", "TOLERANCE"]
