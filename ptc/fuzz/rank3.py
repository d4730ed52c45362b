"""The generator's skeleton of tiles of rank 3 (ptc.fuzz.generate draws it as the `rank3`
kind): a `[G, BM, BN]` tile of three dims of X, as a GQA group's heads or a 2-D block of a
convolution's pixels, computed by the back end as its G * BM rows (ptc.sema.batched)."""
from __future__ import annotations

import random

from .program import (LOW, Program, Scope, Value, binary, full_tile, is_float, odd, tiles_line,
                      unary)

HEADS = ("G", "BM", "BN")
# what a tile of rank 3 combines with: its own shape, its row values brought back, rows
OPERANDS = (HEADS, ("G", "BM", "1"), ("BN",), ("1", "BN"), ("1", "1", "BN"))


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
    if rng.random() < 0.5:
        s.bind("k", rng.choice([f"index(j)[None, :] < N - {rng.randint(0, 5)}",
                                "index(i)[:, None] >= index(j)[None, :]",
                                f"arange(BM)[:, None] + {rng.randint(0, 9)} > arange(BN)[None, :]",
                                f"index(i)[:, None] % {rng.randint(2, 4)} == 0"]),
               "bool", ("BM", "BN"))
    for _ in range(rng.randint(2, 6)):
        v = s.pick(lambda v: is_float(v) and v.shape == HEADS)
        if rng.random() < 0.3 and v is not None:
            fn = rng.choice(["rowmax", "rowsum", "rowmin"])
            red = s.bind("r", f"{fn}({v.name})", "f32" if fn == "rowsum" else v.dtype,
                         ("G", "BM"))
            s.bind("rb", f"{red.name}[:, :, None]", red.dtype, ("G", "BM", "1"))
        else:
            _step(s)
    out = full_tile(s, HEADS)
    body += s.lines + [f"store(O[g, i, j], {out.name})"]
    a = "A: f32[H, M, K]" if not product else f"A: {lp}[H, M, K], B: {lp}[K, N]"
    header = (f"kernel gen{seed}(X: f32[H, M, N], {a}, W: {lp}[N]) "
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
