"""Random well-typed `.pt` kernels, written the way people write Triton (the Csmith /
YARPGen idea applied to ptc): loads with pads, named and inline broadcasts, masks built from
`index`, `where`, reductions along either axis, matrix products and chains of them,
loop-carried values, `until` bounds, several grids, scalar parameters, odd shapes and every
tile candidate.

A program is built from one of a few skeletons (a 2-D elementwise grid, a row-wise grid
over whole rows, a tile loop with products or reductions, a column reduction, two grids)
whose statements are drawn at random over typed values, so every program checks. Values
are kept in a range where the reference interpreter and a GPU agree up to rounding:
divisions by `abs(x) + 1`, `exp` of non-positive or scaled arguments, `log(abs(x) + 1)`.

    program = generate(seed)         # a Program: its text, dims, tile candidates, kind
    program.text                     # the .pt source, one statement per line

The statements are lines of the body (ptc.fuzz.reduce removes them one by one).
"""
from __future__ import annotations

import random

from .program import (LOW, Program, Scope, Value, elementwise_step, full_tile, is_float,
                      mask, odd, tiles_line)
from .quant import quant_grid
from .rank3 import rank3_grid

def elementwise_grid(rng: random.Random, seed: int) -> Program:
    """A 2-D grid: loads of tiles, rows and columns, named and inline broadcasts, masks,
    `where`, reductions of the tile along either axis broadcast back; one full store, and
    sometimes an atomic row sum and a store of the loaded tile as it is."""
    lp = rng.choice(LOW)
    s = Scope(rng)
    x = s.bind("x", f"load(X[i, j]{pad(rng)})", "f32", ("BM", "BN"))
    if rng.random() < 0.7:
        s.bind("y", f"load(Y[i, j]{pad(rng)})", lp, ("BM", "BN"))
    if rng.random() < 0.6:
        s.bind("r", "load(r[i])" + rng.choice(["[:, None]", ""]), "f32",
               ("BM", "1") if s.lines[-1].endswith("None]") else ("BM",))
    if rng.random() < 0.6:
        inline = rng.random() < 0.5
        s.bind("c", "load(c[j])" + ("[None, :]" if inline else ""), lp,
               ("1", "BN") if inline else ("BN",))
    if rng.random() < 0.5:
        s.bind("k", *mask(rng))
    if rng.random() < 0.5:
        s.bind("s", "alpha * " + x.name, "f32", ("BM", "BN"))
    for _ in range(rng.randint(2, 7)):
        roll = rng.random()
        if roll < 0.15:
            v = s.pick(lambda v: is_float(v) and v.shape == ("BM", "BN"))
            if v is not None:
                fn = rng.choice(["rowsum", "rowmax", "rowmin"])
                red = s.bind("rr", f"{fn}({v.name})", "f32" if fn == "rowsum" else v.dtype,
                             ("BM",))
                if rng.random() < 0.7:
                    s.bind("rb", f"{red.name}[:, None]", red.dtype, ("BM", "1"))
        elif roll < 0.25:
            v = s.pick(lambda v: is_float(v) and v.shape == ("BM", "BN"))
            if v is not None:
                fn = rng.choice(["sum", "max"])
                red = s.bind("cr", f"{fn}({v.name}, axis=0)",
                             "f32" if fn == "sum" else v.dtype, ("BN",))
                s.bind("cb", f"{red.name}[None, :]", red.dtype, ("1", "BN"))
        else:
            elementwise_step(s, is_float)
    out = full_tile(s, ("BM", "BN"))
    body = s.lines + [f"store(O[i, j], {out.name})"]
    outputs = "O: f32[M, N]"
    if rng.random() < 0.4:
        body.append(f"atomic_add(R[i], rowsum({out.name}))")
        outputs += ", R: f32[M]"
    if rng.random() < 0.2:          # a loaded tile stored as it is, by its name
        body.append(f"store(P[i, j], {x.name})")
        outputs += ", P: f32[M, N]"
    header = (f"kernel gen{seed}(X: f32[M, N], Y: {lp}[M, N], r: f32[M], c: {lp}[N], "
              f"alpha: f32) -> ({outputs}) {{")
    decls = (tiles_line(rng, {"BM": (16, 32, 64, 8, 4, 1), "BN": (16, 32, 64, 128)}),)
    grid = ("parallel i: BM of M, j: BN of N {", tuple(body), "}")
    shapes = {"M": odd(rng, 1, 70), "N": odd(rng, 1, 150)}
    return Program(f"gen{seed}", "elementwise", header, decls, (grid,),
                   tuple(sorted(shapes.items())), seed)


def pad(rng: random.Random) -> str:
    return rng.choice(["", "", "", ", pad=1.0", ", pad=-2.0"])


def row_grid(rng: random.Random, seed: int) -> Program:
    """Whole rows (`X[i, :]`, N known when compiling): softmax- and norm-like chains of
    row reductions broadcast back."""
    lp = rng.choice(LOW)
    s = Scope(rng)
    s.bind("x", "load(X[i, :])", "f32", ("BM", "N"))
    if rng.random() < 0.6:
        s.bind("w", "load(W[:])" + rng.choice(["[None, :]", ""]), lp,
               ("1", "N") if s.lines[-1].endswith("None, :]") else ("N",))
    for _ in range(rng.randint(2, 6)):
        roll = rng.random()
        v = s.pick(lambda v: is_float(v) and v.shape == ("BM", "N"))
        if roll < 0.35 and v is not None:
            fn = rng.choice(["rowmax", "rowsum", "rowmin"])
            red = s.bind("m", f"{fn}({v.name})", "f32" if fn == "rowsum" else v.dtype, ("BM",))
            if rng.random() < 0.5:
                s.bind("mb", f"{red.name}[:, None]", red.dtype, ("BM", "1"))
            else:
                s.bind("d", f"exp({v.name} - {red.name}[:, None])"
                       if fn == "rowmax" and v.dtype == "f32" else f"({v.name} - "
                       f"{red.name}[:, None])", "f32" if v.dtype == "f32" else v.dtype,
                       ("BM", "N"))
        else:
            elementwise_step(s, is_float)
    out = full_tile(s, ("BM", "N"))
    body = s.lines + [f"store(Y[i, :], {out.name})"]
    header = f"kernel gen{seed}(X: f32[M, N], W: {lp}[N]) -> (Y: f32[M, N]) {{"
    shapes = {"M": odd(rng, 1, 40), "N": rng.choice([16, 32, 48, 64, 100, 128, 200])}
    decls = (tiles_line(rng, {"BM": (1, 2, 4, 8, 16)}),)
    return Program(f"gen{seed}", "rows", header, decls,
                   (("parallel i: BM of M {", tuple(body), "}"),),
                   tuple(sorted(shapes.items())), seed)


def loop_grid(rng: random.Random, seed: int) -> Program:
    """A tile loop: a matrix product accumulated over k (f16/bf16 on tensor cores, or f32),
    operands transformed before the product, a loop-carried row maximum, an optional
    `until` bound, then an epilogue with a named or inline bias broadcast and a mask."""
    lp = rng.choice(LOW)
    f32_product = rng.random() < 0.2
    op_dtype = "f32" if f32_product else lp
    s = Scope(rng)
    body = ["acc = zeros(f32[BM, BN])"]
    carried_max = rng.random() < 0.4
    if carried_max:
        body.append("mx = full(f32[BM], -inf)")
    until = ""
    if rng.random() < 0.3:
        until = f" until (i + 1) * BM + {rng.randint(0, 40)}"
    loop = [f"a = load(A[i, k]{rng.choice(['', '', ', pad=0.0'])})",
            "b = load(B[k, j])"]
    a_name, b_name = "a", "b"
    roll = rng.random()
    if roll < 0.25:
        loop.append(f"am = where(index(k)[None, :] < K - {rng.randint(0, 9)}, a, 0.0)")
        a_name = "am"
    elif roll < 0.45:
        loop.append("as_ = a * 0.5")
        a_name = "as_"
    if rng.random() < 0.25:
        loop.append("bt = abs(b)")
        b_name = "bt"
    loop.append(f"acc += {a_name} @ {b_name}")
    if carried_max:
        loop.append(f"mx = max(mx, rowmax({a_name} as f32))"
                    if op_dtype != "f32" else f"mx = max(mx, rowmax({a_name}))")
    s.values = [Value("acc", "f32", ("BM", "BN"))]
    s.lines = []
    if carried_max:
        s.values.append(Value("mx", "f32", ("BM",)))
        s.bind("mxb", "max(mx, 0.0)[:, None]", "f32", ("BM", "1"))
    if rng.random() < 0.6:
        if rng.random() < 0.5:
            s.bind("bias", "load(bias[j])[None, :]", lp, ("1", "BN"))
        else:
            s.bind("bias", "load(bias[j])", lp, ("BN",))
    if rng.random() < 0.4:
        s.bind("ok", f"index(j)[None, :] < N - {rng.randint(0, 7)}", "bool", ("1", "BN"))
    for _ in range(rng.randint(1, 4)):
        elementwise_step(s, is_float)
    out = full_tile(s, ("BM", "BN"))
    body += [f"for k: BK of K{until} {{"] + [f"  {l}" for l in loop] + ["}"]
    body += s.lines + [f"store(C[i, j], {out.name})"]
    header = (f"kernel gen{seed}(A: {op_dtype}[M, K], B: {op_dtype}[K, N], bias: {lp}[N]) "
              f"-> (C: f32[M, N]) {{")
    decls = (tiles_line(rng, {"BM": (64, 32, 16, 128), "BN": (64, 32, 16, 128),
                              "BK": (32, 16, 64)}),)
    shapes = {"M": odd(rng, 1, 150), "N": odd(rng, 1, 150), "K": odd(rng, 1, 130)}
    return Program(f"gen{seed}", "loop", header, decls,
                   (("parallel i: BM of M, j: BN of N {", tuple(body), "}"),),
                   tuple(sorted(shapes.items())), seed)


def chain_grid(rng: random.Random, seed: int) -> Program:
    """Two products in a chain (the first's result, converted, multiplies a second
    operand), as in gemm_chain and attention."""
    lp = rng.choice(LOW)
    body = ["acc = zeros(f32[BM, L])",
            "for k: BK of K {", "  acc += load(A[i, k]) @ load(B[k, :])", "}"]
    mid = rng.choice(["acc", "exp(acc - rowmax(acc)[:, None])", "max(acc, 0.0)",
                      "acc * 0.25"])
    body += [f"p = ({mid}) as {lp}", "o = p @ load(E[:, j])"]
    if rng.random() < 0.5:
        body.append("o = o / (abs(rowsum(o))[:, None] + 1.0)")
    body.append("store(C[i, j], o)")
    header = (f"kernel gen{seed}(A: {lp}[M, K], B: {lp}[K, L], E: {lp}[L, N]) "
              f"-> (C: f32[M, N]) {{")
    decls = (tiles_line(rng, {"BM": (64, 32, 16), "BN": (64, 32), "BK": (32, 16)}),)
    shapes = {"M": odd(rng, 1, 100), "N": odd(rng, 1, 100), "K": odd(rng, 1, 100),
              "L": rng.choice([16, 32, 64])}
    return Program(f"gen{seed}", "chain", header, decls,
                   (("parallel i: BM of M, j: BN of N {", tuple(body), "}"),),
                   tuple(sorted(shapes.items())), seed)


def column_grids(rng: random.Random, seed: int) -> Program:
    """Two grids: column sums over a row loop, then row maxima over a column loop."""
    lp = rng.choice(LOW)
    transform = rng.choice(["", " * 0.5", " + 1.0"])
    first = ("parallel j: BN of N {",
             ("acc = zeros(f32[BN])", "for i: BM of M {",
              f"  acc += sum(load(X[i, j]){transform}, axis=0)", "}", "store(S[j], acc)"), "}")
    second = ("parallel i: BM of M {",
              (f"mx = full({lp}[BM], -inf)", "for j: BN of N {",
               "  mx = max(mx, rowmax(load(X[i, j], pad=-inf)))", "}",
               "store(R[i], mx as f32)"), "}")
    header = f"kernel gen{seed}(X: {lp}[M, N]) -> (S: f32[N], R: f32[M]) {{"
    decls = (tiles_line(rng, {"BM": (64, 32, 16), "BN": (128, 64, 32)}),)
    shapes = {"M": odd(rng, 1, 150), "N": odd(rng, 1, 200)}
    return Program(f"gen{seed}", "two grids", header, decls, (first, second),
                   tuple(sorted(shapes.items())), seed)


def index_read(rng: random.Random, tensor: str, at: str) -> str:
    """An i32 index read from `tensor` (random inputs hold 0..15): moved and spread so that
    some land before 0 and past the dim, sometimes past the index tensor's own end."""
    pad = rng.choice(["", ", pad=-1"])
    read = f"load({tensor}[{at}]{pad})"
    return rng.choice([read, f"{read} - {rng.randint(1, 3)}", f"{read} * {rng.randint(2, 9)}",
                       f"({read} - 2) * {rng.randint(2, 5)}"])


def indexed_reads(s: Scope, variant: str, lp: str, at: str, second: str,
                  params: list[str]) -> list[str]:
    """The reads of an indexed program's variant: the lines before its elementwise steps
    (the values they bind are in `s`; `params` gains the expert's W)."""
    rng = s.rng
    body: list[str] = []
    if variant == "lookup":
        named = rng.random() < 0.5
        row = index_read(rng, "idx", at)
        if named:
            body.append(f"r = {row}")
            row = "r"
        s.bind("x", f"load(X[{row}, j]{pad(rng)})", lp, ("BN",))
        if rng.random() < 0.5:      # nested: a read whose index is read
            s.bind("x", f"load(X[load(idx[load(aux[{second}], pad=-1)], pad=-1), j])", lp,
                   ("BN",))
    elif variant == "segment":
        body += ["n = load(aux[g + 0], pad=0)", "acc = zeros(f32[BN])",
                 "for m: BM of T until n {",
                 f"  x = load(X[index(m) + {index_read(rng, 'idx', 'g')}, j]{pad(rng)})",
                 "  acc += sum(where((index(m) < n)[:, None], x as f32, 0.0), axis=0)", "}"]
        s.values.append(Value("acc", "f32", ("BN",)))
    else:
        params[0] = f"X: {lp}[M, K]"
        params.append(f"W: {lp}[E, K, N]")
        e = index_read(rng, "idx", at)
        if rng.random() < 0.5:
            body.append(f"e = {e}")
            e = "e"
        body += ["acc = zeros(f32[BM, BN])", "for k: BK of K {",
                 f"  acc += load(X[i, k]) @ load(W[{e}, k, j])", "}"]
        s.values.append(Value("acc", "f32", ("BM", "BN")))
    return body


def indexed_grid(rng: random.Random, seed: int) -> Program:
    """Indices read from tensors (issue 22, part 5): a row looked up by a named or inline
    read, a tile moved by a read offset in a loop bounded by a read length, or a product's
    operand chosen by a read (an expert); rows added into an output row read from a tensor
    (an atomic scatter: repeats add up)."""
    lp = rng.choice(LOW)
    s = Scope(rng)
    variant = rng.choice(["lookup", "segment", "expert"])
    params = [f"X: {lp}[T, N]", "idx: i32[G]", "aux: i32[H]"]
    at = rng.choice(["g", "g + 0"]) if variant != "segment" else "g"
    second = rng.choice(["g + 0", "g * 2 - 3", "(g + 5) // 2"])    # aux is of another dim
    body = indexed_reads(s, variant, lp, at, second, params)
    for _ in range(rng.randint(0, 3)):
        elementwise_step(s, is_float)
    shape = ("BM", "BN") if variant == "expert" else ("BN",)
    out = full_tile(s, shape)
    body += s.lines
    rows = "i, j" if variant == "expert" else "j"
    if rng.random() < 0.5:
        body.append(f"store(O[g, {rows}], {out.name})")
    else:
        body.append(f"atomic_add(O[{index_read(rng, 'aux', second)}, {rows}], {out.name})")
    grid = "parallel g of G, " + ("i: BM of M, j: BN of N {" if variant == "expert"
                                 else "j: BN of N {")
    out_dims = "[G, M, N]" if variant == "expert" else "[G, N]"
    header = f"kernel gen{seed}({', '.join(params)}) -> (O: f32{out_dims}) {{"
    decls = (tiles_line(rng, {"BM": (64, 32, 16), "BN": (64, 32, 16, 128), "BK": (32, 16)}),)
    if variant == "lookup":
        decls = (tiles_line(rng, {"BN": (64, 32, 16, 128)}),)
    shapes = {"T": odd(rng, 1, 70), "N": odd(rng, 1, 150), "G": odd(rng, 1, 12),
              "H": odd(rng, 1, 12)}
    if variant == "expert":
        del shapes["T"]
        shapes.update(M=odd(rng, 1, 80), K=odd(rng, 1, 80), E=rng.randint(1, 6))
    return Program(f"gen{seed}", "indexed", header, decls,
                   ((grid, tuple(body), "}"),), tuple(sorted(shapes.items())), seed)


SKELETONS = (elementwise_grid, elementwise_grid, row_grid, loop_grid, loop_grid, chain_grid,
             column_grids, quant_grid, indexed_grid, rank3_grid)


def generate(seed: int) -> Program:
    """The program of `seed` (the same seed gives the same program)."""
    rng = random.Random(seed)
    skeleton = rng.choice(SKELETONS)
    for attempt in range(20):
        try:
            return skeleton(random.Random(seed * 1000 + attempt), seed)
        except ValueError:
            continue
    return elementwise_grid(random.Random(seed), seed)
