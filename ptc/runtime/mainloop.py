"""What a kernel's main loop issues, read from its machine code (SASS).

    reports = mainloop_reports(sass_text)        # one per kernel function in the text
    print(format_reports(reports))

The main loop is the smallest loop (a backward branch and the instructions it jumps
over) that holds the most tensor-core instructions, or the largest innermost loop where
there are none. A backward branch whose span holds an EXIT is not a loop but a jump back
from an out-of-line block (the retry of an mbarrier try_wait that the compiler moves past
the end of the kernel). Its body is counted once, statically: one iteration per warp.
Instructions predicated on `!PT` (never executed: the compiler's padding) do not count.

Classes (by opcode):
- tensor core: HMMA, HGMMA, IMMA, IGMMA, QGMMA (FP8 wgmma), DMMA; their FLOPs per warp:
  HMMA.16816 2*16*8*16, HMMA.1688 2*16*8*8, IMMA.16832 2*16*8*32 (integer operations),
  [HIQ]GMMA.64xNxK 2*64*N*K per warpgroup (a quarter per warp);
- ldmatrix: LDSM; other shared accesses: LDS, STS, LDSM excluded (STSM counted here);
- global / async copies: LDG, STG, LDGSTS, UTMALDG, UTMASTG, UBLKCP, RED, ATOM(G);
- barriers: BAR; waits: DEPBAR, LDGDEPBAR, SYNCS (mbarrier waits), WARPSYNC;
- MUFU (the SFU), SHFL.
`per_mflop` = instructions per iteration / (tensor-core MFLOP per warp per iteration),
the figure the issue's comparison with Triton uses.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)", re.M)
_TARGET = re.compile(r"BRA(?:\.\w+)*\s+(?:`\(\.L_x_\d+\)\s*)?(0x[0-9a-f]+)")

TENSOR = ("HMMA", "HGMMA", "IMMA", "IGMMA", "QGMMA", "DMMA")
GLOBAL = ("LDG", "STG", "LDGSTS", "UTMALDG", "UTMASTG", "UBLKCP", "RED", "ATOM", "ATOMG")
WAITS = ("DEPBAR", "LDGDEPBAR", "SYNCS", "WARPSYNC")


class MainLoopError(Exception):
    """The SASS holds no kernel, or no loop to report."""


@dataclass(frozen=True)
class LoopReport:
    kernel: str
    instructions: int
    tensor_core: int
    ldmatrix: int
    shared: int
    global_copies: int
    barriers: int
    waits: int
    mufu: int
    shuffles: int
    mma_flops: int               # per warp per iteration
    # every mnemonic in the loop (`IMAD.MOV.U32`) with its count
    mnemonics: tuple[tuple[str, int], ...] = ()

    def count(self, name: str) -> int:
        """Instructions whose mnemonic is `name` or starts with it (`MOV`, `IMAD.MOV`)."""
        return sum(n for m, n in self.mnemonics if m == name or m.startswith(name + "."))

    @property
    def per_mflop(self) -> float:
        return self.instructions / (self.mma_flops / 1e6) if self.mma_flops else float("inf")


def functions(sass: str) -> dict[str, list[tuple[int, str]]]:
    """Kernel name -> its instructions (address, text without the predicate-free spacing)."""
    out: dict[str, list[tuple[int, str]]] = {}
    marks = list(_FUNCTION.finditer(sass))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(sass)
        body = sass[m.end():end]
        out[m.group(1)] = [(int(a, 16), t) for a, t in _LINE.findall(body)]
    return out


def mnemonic(text: str) -> str:
    """The whole mnemonic, without the predicate: `@!P0 HMMA.16816.F32 R0, ...` ->
    HMMA.16816.F32."""
    t = re.sub(r"^@!?U?P\w+\s+", "", text.strip())
    return t.split()[0] if t else ""


def opcode(text: str) -> str:
    """The opcode's first part: `@!P0 HMMA.16816.F32 R0, ...` -> HMMA."""
    return mnemonic(text).split(".")[0]


def loops(instructions: list[tuple[int, str]]) -> list[tuple[int, int]]:
    """(first, last address) of every backward branch's loop."""
    exits = [a for a, t in instructions if opcode(t) == "EXIT"]
    out = []
    for addr, text in instructions:
        if opcode(text) == "BRA":
            m = _TARGET.search(text)
            if m and int(m.group(1), 16) <= addr:
                first = int(m.group(1), 16)
                if not any(first <= e <= addr for e in exits):
                    out.append((first, addr))
    return out


def flops(text: str) -> int:
    """Tensor-core FLOPs per warp of one instruction."""
    op = mnemonic(text)
    if op.startswith("HMMA.16816"):
        return 2 * 16 * 8 * 16
    if op.startswith("HMMA.1688"):
        return 2 * 16 * 8 * 8
    if op.startswith("IMMA.16832"):
        return 2 * 16 * 8 * 32
    m = re.match(r"[HIQ]GMMA\.64x(\d+)x(\d+)", op)     # QGMMA: wgmma with FP8 inputs
    if m:
        return 2 * 64 * int(m.group(1)) * int(m.group(2)) // 4
    return 0


def report(kernel: str, instructions: list[tuple[int, str]]) -> LoopReport:
    candidates = loops(instructions)
    if not candidates:
        raise MainLoopError(f"{kernel} has no loop")

    def body(lp):
        return [t for a, t in instructions if lp[0] <= a <= lp[1]
                and not t.strip().startswith("@!PT")]

    def tensor(lp):
        return sum(opcode(t) in TENSOR for t in body(lp))

    most = max(tensor(lp) for lp in candidates)
    if most:      # the innermost loop that holds them all
        lp = min((lp for lp in candidates if tensor(lp) == most), key=lambda lp: len(body(lp)))
    else:         # the largest innermost loop
        inner = [lp for lp in candidates if not any(
            o != lp and lp[0] <= o[0] and o[1] <= lp[1] for o in candidates)]
        lp = max(inner, key=lambda lp: len(body(lp)))
    b = body(lp)
    ops = [opcode(t) for t in b]

    def count(names) -> int:
        return sum(o in names for o in ops)
    mnemonics = Counter(mnemonic(t) for t in b)
    return LoopReport(kernel, len(b), count(TENSOR), count(("LDSM",)),
                      count(("LDS", "STS", "STSM")), count(GLOBAL), count(("BAR",)),
                      count(WAITS), count(("MUFU",)), count(("SHFL",)),
                      sum(flops(t) for t in b if opcode(t) in TENSOR),
                      tuple(sorted(mnemonics.items())))


def mainloop_reports(sass: str, kernel: str | None = None) -> list[LoopReport]:
    """The main loop of every kernel in `sass` (or of the named one; kernels whose name
    contains `kernel` are taken), skipping functions without a loop."""
    funcs = functions(sass)
    if not funcs:
        raise MainLoopError("no kernel function in the SASS")
    out = []
    for name, ins in funcs.items():
        if kernel is not None and kernel not in name:
            continue
        try:
            out.append(report(name, ins))
        except MainLoopError:
            continue
    if not out:
        raise MainLoopError("no kernel with a loop" + (f" named {kernel}" if kernel else ""))
    return out


COLUMNS = ("tensor", "ldmatrix", "smem", "global", "bar", "wait", "mufu", "shfl", "total",
           "per TC-MFLOP")


def row(r: LoopReport) -> list[str]:
    per = f"{r.per_mflop:.0f}" if r.mma_flops else "-"
    return [str(x) for x in (r.tensor_core, r.ldmatrix, r.shared, r.global_copies, r.barriers,
                             r.waits, r.mufu, r.shuffles, r.instructions)] + [per]


def format_reports(reports: list[LoopReport], names: list[str] | None = None) -> str:
    """A plain table, one line per report (instructions per warp per main-loop iteration)."""
    labels = names or [r.kernel for r in reports]
    width = max(len(x) for x in labels + ["main loop"])
    head = f"{'main loop':<{width}}  " + "  ".join(f"{c:>8}" for c in COLUMNS)
    lines = [head]
    for label, r in zip(labels, reports):
        lines.append(f"{label:<{width}}  " + "  ".join(f"{c:>8}" for c in row(r)))
    return "\n".join(lines)
