"""The generator's skeleton of tiles of rank 3 (ptc.fuzz.generate draws it as the `rank3`
kind): a `[G, BM, BN]` tile of three dims of X, as a GQA group's heads or a 2-D block of a
convolution's pixels, computed by the back end as its G * BM rows (ptc.sema.batched)."""
from __future__ import annotations

import random
import re

from .program import (LOW, Program, Scope, Value, binary, full_tile, is_float, odd, tiles_line,
                      unary)

HEADS = ("G", "BM", "BN")
# what a tile of rank 3 combines with: its own shape, its row values brought back, rows,
# 2-D tiles and vectors of the rows broadcast over the heads, values and rows per head
OPERANDS = (HEADS, ("G", "BM", "1"), ("BN",), ("1", "BN"), ("1", "1", "BN"), ("BM", "BN"),
            ("1", "BM", "BN"), ("BM", "1"), ("1", "BM", "1"), ("G", "1", "1"),
            ("G", "1", "BN"))
# the tensors a program reads beside X, A, B and W, declared where it reads them
EXTRA = {"R": "R: f32[H, M]", "Bias": "Bias: {lp}[M, N]", "V": "V: f32[M]", "P": "P: f32[H]",
         "Hb": "Hb: {lp}[H, N]"}


def rank3_grid(rng: random.Random, seed: int) -> Program:
    """Loads of a tile of rank 3 (moved along the rows sometimes, with a pad), row
    broadcasts (`[BN]`, `[None, :]`, `[None, None, :]`), masks from indices broadcast over
    the heads (named or not), row values (`rowmax`, `rowsum`) carried through a loop or
    brought back as `[:, :, None]`, and in half of them a product `[G, BM, BK] @ [BK, BN]`
    accumulated over k; one store of rank 3."""
    lp = rng.choice(LOW)
    s = Scope(rng)
    product = rng.random() < 0.5
    body: list[str] = []
    if product:
        body += _product(rng, s, lp)
    else:
        rows = rng.choice(["i", "i", f"index(i) + {rng.randint(-5, 5)}"])
        s.bind("x", f"load(X[g, {rows}, j]{rng.choice(['', ', pad=1.0', ', pad=-2.0'])})",
               "f32", HEADS)
    if rng.random() < 0.6:
        form = rng.choice(["", "[None, :]", "[None, None, :]"])
        s.bind("w", f"load(W[j]){form}", lp, {"": ("BN",), "[None, :]": ("1", "BN"),
                                              "[None, None, :]": ("1", "1", "BN")}[form])
    used = _broadcasts(rng, s, lp)
    if rng.random() < 0.5:
        s.bind("k", rng.choice([f"index(j)[None, :] < N - {rng.randint(0, 5)}",
                                "index(i)[:, None] >= index(j)[None, :]",
                                f"arange(BM)[:, None] + {rng.randint(0, 9)} > arange(BN)[None, :]",
                                f"index(i)[:, None] % {rng.randint(2, 4)} == 0"]),
               "bool", ("BM", "BN"))
    for _ in range(rng.randint(2, 6)):
        v = s.pick(lambda v: is_float(v) and v.shape == HEADS)
        if rng.random() < 0.3 and v is not None:
            _row_values(s, v, used)
        else:
            _step(s)
    last = _consume(s, [v.name for v in s.values if v.name.startswith(DRAWN)])
    out = full_tile(s, HEADS)
    if last is not None and not re.search(rf"\b{last.name}\b", s.lines[-1]):
        f32 = last.name if last.dtype == "f32" else f"({last.name} as f32)"
        out = s.bind("out", f"({out.name} + {f32})", "f32", HEADS)
    body += s.lines + [f"store(O[g, i, j], {out.name})"]
    a = "A: f32[H, M, K]" if not product else f"A: {lp}[H, M, K], B: {lp}[K, N]"
    extra = "".join(f", {EXTRA[t].format(lp=lp)}" for t in EXTRA if t in used)
    header = (f"kernel gen{seed}(X: f32[H, M, N], {a}, W: {lp}[N]{extra}) "
              f"-> (O: f32[H, M, N]) {{")
    sizes = {"G": (2, 4, 1), "BM": (16, 32, 8), "BN": (64, 32, 16)}
    if product:
        sizes["BK"] = (32, 16)
    decls = (tiles_line(rng, sizes),)
    shapes = {"H": odd(rng, 1, 9), "M": odd(rng, 1, 70), "N": odd(rng, 1, 100),
              "K": odd(rng, 1, 80)}
    return Program(f"gen{seed}", "rank3", header, decls,
                   (("parallel g: G of H, i: BM of M, j: BN of N {", tuple(body), "}"),),
                   tuple(sorted(shapes.items())), seed)


def _row_values(s: Scope, v: Value, used: set[str]) -> None:
    """A reduction of `v` along its rows (`rowmax`, ...), combined sometimes with a `[G,
    BM]` tile loaded from R and with a value per head or per row, brought back as
    `[:, :, None]` (the tensors read go into `used`)."""
    rng = s.rng
    fn = rng.choice(["rowmax", "rowsum", "rowmin"])
    red = s.bind("r", f"{fn}({v.name})", "f32" if fn == "rowsum" else v.dtype, ("G", "BM"))
    if red.dtype == "f32" and rng.random() < 0.4:     # row values loaded
        red = s.bind("rl", rng.choice([f"max({red.name}, load(R[g, i]))",
                                       f"({red.name} - load(R[g, i]))"]), "f32", ("G", "BM"))
        used.add("R")
    if red.dtype == "f32" and rng.random() < 0.4:     # a value per head or per row
        expr, tensor = rng.choice([
            (f"{red.name} * load(P[g])[:, None]", "P"),
            (f"({red.name} + load(V[i]))", "V"),
            (f"({red.name} - load(V[i])[None, :])", "V"),
            (f"where(index(i)[None, :] < M - {rng.randint(0, 9)}, {red.name}, 0.0)", ""),
            (f"({red.name} + (index(g) as f32)[:, None])", "")])
        red = s.bind("rl", expr, "f32", ("G", "BM"))
        used.update({tensor} - {""})
    s.bind("rb", f"{red.name}[:, :, None]", red.dtype, ("G", "BM", "1"))


# the stems of the values a program draws to be read: broadcasts, row values loaded
DRAWN = ("bb", "dm", "vr", "ph", "hr", "rl", "rb")


def _consume(s: Scope, names: list[str]) -> Value | None:
    """Fold each value of `names` that nothing reads yet into a chain of new [G, BM, BN]
    values (a mask by `where`, row values brought back by `[:, :, None]`), whose last one
    (returned) the store reads."""
    last = None
    for name in names:
        if any(re.search(rf"\b{name}\b", line.split("=", 1)[1]) for line in s.lines):
            continue
        v = next(v for v in s.values if v.name == name)
        a = last or s.pick(lambda x: is_float(x) and x.shape == HEADS)
        if a is None:
            return None
        if v.dtype == "bool":
            last = s.bind("m", f"where({name}, {a.name}, 0.5)", a.dtype, HEADS)
            continue
        if v.shape == ("G", "BM"):
            v = Value(f"{name}[:, :, None]", v.dtype, ("G", "BM", "1"))
        made = binary(s.rng, a, v)
        if made is not None:
            last = s.bind("e", made[0], made[1], HEADS)
    return last


def _broadcasts(rng: random.Random, s: Scope, lp: str) -> set[str]:
    """Data broadcast into the [G, BM, BN] tile, each drawn sometimes (the tensors read):
    a [BM, BN] tile over the heads (as NumPy aligns it, or `[None, :, :]`), a mask loaded
    so, a vector of the rows (`[:, None]`, `[None, :, None]`), a value per head
    (`[:, None, None]`) and a row per head (`[:, None, :]`)."""
    used: set[str] = set()
    if rng.random() < 0.3:
        form = rng.choice(["", "[None, :, :]"])
        s.bind("bb", f"load(Bias[i, j]){form}", lp, ("1", "BM", "BN") if form else ("BM", "BN"))
        used.add("Bias")
    if rng.random() < 0.15:
        s.bind("dm", f"load(Bias[i, j]) > {rng.choice(['0.0', '-0.5'])}", "bool", ("BM", "BN"))
        used.add("Bias")
    if rng.random() < 0.25:
        form = rng.choice(["[:, None]", "[None, :, None]"])
        s.bind("vr", f"load(V[i]){form}", "f32",
               ("BM", "1") if form == "[:, None]" else ("1", "BM", "1"))
        used.add("V")
    if rng.random() < 0.25:
        s.bind("ph", "load(P[g])[:, None, None]", "f32", ("G", "1", "1"))
        used.add("P")
    if rng.random() < 0.2:
        s.bind("hr", "load(Hb[g, j])[:, None, :]", lp, ("G", "1", "BN"))
        used.add("Hb")
    return used


def _product(rng: random.Random, s: Scope, lp: str) -> list[str]:
    """acc += A's [G, BM, BK] tile (masked or scaled sometimes) @ B's [BK, BN], with a
    running row maximum of the A tiles carried through the loop sometimes."""
    body = ["acc = zeros(f32[G, BM, BN])"]
    carried = rng.random() < 0.4
    if carried:
        body.append("mx = full(f32[G, BM], -inf)")
    loop = ["a = load(A[g, i, k])"]
    a = "a"
    roll = rng.random()
    if roll < 0.3:
        loop.append(f"am = where(index(k)[None, :] < K - {rng.randint(0, 9)}, a, 0.0)")
        a = "am"
    elif roll < 0.5:
        loop.append("as_ = a * 0.5")
        a = "as_"
    loop.append(f"acc += {a} @ load(B[k, j])")
    if carried:
        loop.append(f"mx = max(mx, rowmax({a} as f32))")
    body += ["for k: BK of K {"] + [f"  {line}" for line in loop] + ["}"]
    s.values.append(Value("acc", "f32", HEADS))
    if carried:
        s.bind("mxb", "max(mx, 0.0)[:, :, None]", "f32", ("G", "BM", "1"))
    return body


def _step(s: Scope) -> None:
    """A new [G, BM, BN] value: a unary function of one, a `where` under a mask from
    indices, or an operation with a value it may combine with (OPERANDS)."""
    rng = s.rng
    a = s.pick(lambda v: is_float(v) and v.shape == HEADS)
    if a is None:
        return
    roll = rng.random()
    mask = s.pick(lambda v: v.dtype == "bool")
    if roll < 0.3:
        expr, dtype = unary(rng, a.name, a.dtype)
        s.bind("u", expr, dtype, HEADS)
    elif roll < 0.45 and mask is not None:
        s.bind("m", f"where({mask.name}, {a.name}, {rng.choice(['0.0', '1.0', '-1.5'])})",
               a.dtype, HEADS)
    else:
        b = s.pick(lambda v: is_float(v) and v.shape in OPERANDS)
        made = binary(rng, a, b) if b is not None else None
        if made is not None:
            s.bind("e", made[0], made[1], HEADS)
