"""The generator's skeletons of 8-bit products and of weights dequantized in registers
(ptc.fuzz.generate draws them as the `quant` kind)."""
from __future__ import annotations

import random

from .program import LOW, Program, Scope, Value, elementwise_step, full_tile, is_float, odd, tiles_line

EIGHT_BIT = ("i8", "f8e4m3", "f8e5m2")


def quant_grid(rng: random.Random, seed: int) -> Program:
    """A product of 8-bit operands (issue 21): i8 @ i8 into an i32 or f32 accumulator, or
    FP8 @ FP8 (e4m3 / e5m2 each side) into f32; each operand loaded as it is stored or
    quantized in registers from an f16 tile (a power-of-two scale, so that the conversion
    rounds the same everywhere); B stored [K, N] or [N, K] (K-major, read transposed: what
    wgmma takes); per-row and per-column scales as named broadcasts; the epilogue's
    elementwise steps. A third of them multiply by weights dequantized in registers
    instead (`dequant_grid`)."""
    if rng.random() < 0.35:
        return dequant_grid(rng, seed)
    kind = rng.choice(EIGHT_BIT)
    a_dt, b_dt = (kind, kind) if kind == "i8" else (kind, rng.choice(EIGHT_BIT[1:]))
    zero = "0" if kind == "i8" else "0.0"
    s = Scope(rng)
    int_acc = kind == "i8" and rng.random() < 0.5
    body = [f"acc = zeros({'i32' if int_acc else 'f32'}[BM, BN])"]
    params, loop = [], []
    quantized = False
    for name, dt, index in (("A", a_dt, "i, k"), ("B", b_dt, None)):
        k_major = name == "A" or rng.random() < 0.5
        stored = "[M, K]" if name == "A" else ("[N, K]" if k_major else "[K, N]")
        at = index or ("j, k" if k_major else "k, j")
        pad = rng.choice(["", f", pad={zero}"])
        tile = f"load({name}[{at}]{pad})"
        if rng.random() < 0.3:       # quantized in registers from f16
            params.append(f"{name}: f16{stored}")
            scale = rng.choice(["16.0", "32.0"]) if dt == "i8" else rng.choice(["1.0", "4.0"])
            tile = f"(({tile} * {scale}) as {dt})"
            quantized = True
        else:
            params.append(f"{name}: {dt}{stored}")
        if name == "B" and k_major:
            tile += ".T"
        loop.append(f"{name.lower()} = {tile}")
    loop.append("acc += a @ b")
    out = scaled_epilogue(rng, s, int_acc)
    out_dt = "f32" if kind == "i8" else rng.choice(["f32", "f16"])   # i8 sums overflow f16
    stored = out.name if out_dt == "f32" else f"{out.name} as f16"
    body += ["for k: BK of K {"] + [f"  {line}" for line in loop] + ["}"]
    body += s.lines + [f"store(C[i, j], {stored})"]
    header = (f"kernel gen{seed}({', '.join(params)}, sa: f32[M], sb: f32[N]) "
              f"-> (C: {out_dt}[M, N]) {{")
    # an f16 tile quantized in registers takes registers as an f16 tile does: k of 128
    # beside 128 rows does not fit (a located "no plan fits", not a bug)
    decls = (tiles_line(rng, {"BM": (64, 32, 16, 128), "BN": (64, 32, 16, 128),
                              "BK": (32, 64) if quantized else (32, 64, 128)}),)
    shapes = {"M": odd(rng, 1, 150), "N": odd(rng, 1, 150), "K": odd(rng, 1, 200)}
    return Program(f"gen{seed}", "quant", header, decls,
                   (("parallel i: BM of M, j: BN of N {", tuple(body), "}"),),
                   tuple(sorted(shapes.items())), seed)


def scaled_epilogue(rng: random.Random, s: Scope, int_acc: bool) -> Value:
    """The accumulator (as f32), times per-row and per-column scales as named broadcasts or
    not, then the epilogue's elementwise steps: the value to store."""
    s.values = [Value("acc", "i32" if int_acc else "f32", ("BM", "BN"))]
    s.lines = []
    acc = s.bind("accf", "acc as f32", "f32", ("BM", "BN")) if int_acc else s.values[0]
    scaled = acc.name
    if rng.random() < 0.6:
        scaled = f"({scaled} * {s.bind('sa', 'load(sa[i])[:, None]', 'f32', ('BM', '1')).name})"
    if rng.random() < 0.6:
        scaled = f"({scaled} * {s.bind('sb', 'load(sb[j])[None, :]', 'f32', ('1', 'BN')).name})"
    if scaled != acc.name:
        s.bind("y", scaled, "f32", ("BM", "BN"))
    for _ in range(rng.randint(0, 2)):
        elementwise_step(s, is_float)
    return full_tile(s, ("BM", "BN"))


def dequant_grid(rng: random.Random, seed: int) -> Program:
    """A product by weights dequantized in registers (W4A16 / W8A16 written as users write
    them): a nibble of packed i32 words or a u8 weight, less a zero point (a u8 column,
    named or inline, or a literal) or not, converted to f16 or bf16, times a column scale
    or not; the integers stay where the 16-bit dtype holds them exactly (bf16: 0..127), so
    every target may compute them two at a time through the exponent bias
    (ptc.lower.pairs)."""
    dt = rng.choice(LOW)
    s = Scope(rng)
    packed = rng.random() < 0.6
    params = [f"A: {dt}[M, K]", "W: i32[K, N]" if packed else "W: u8[K, N]"]
    pad = rng.choice(["", ", pad=0"])
    loop = [f"w = load(W[k, j]{pad})"]
    if packed:
        shift = rng.choice([0, 4, 8, 12, 16, 20, 24, 28])
        q = f"((w >> {shift}) & 15)" if shift else "(w & 15)"
    else:
        q = "(w as i32)" if dt == "f16" else "((w as i32) & 127)"
    if rng.random() < 0.4:
        loop.append(f"q = {q}")
        q = "q"
    zero = rng.choice(["column", "column", "literal", "none"])
    if zero == "column":
        params.append("Z: u8[N]")
        zp = "(load(Z[j]) as i32)" + ("" if dt == "f16" else " & 127")
        zp = f"({zp})[None, :]"
        if rng.random() < 0.5:
            loop.append(f"z = {zp}")
            zp = "z"
        value = f"(({q} - {zp}) as {dt})"
    elif zero == "literal":
        value = f"(({q} - {rng.randint(0, 15)}) as {dt})"
    else:
        value = f"({q} as {dt})"
    if rng.random() < 0.7:
        params.append(f"S: {dt}[N]")
        value = f"({value} * load(S[j])[None, :])"
    if rng.random() < 0.3:          # a packed op of two paired forms
        value = f"({value} {rng.choice(['+', '-'])} (({q} & 7) as {dt}))"
    loop.append(f"acc += load(A[i, k]) @ {value}")
    s.values = [Value("acc", "f32", ("BM", "BN"))]
    s.lines = []
    for _ in range(rng.randint(0, 2)):
        elementwise_step(s, is_float)
    out = full_tile(s, ("BM", "BN"))
    body = ["acc = zeros(f32[BM, BN])", "for k: BK of K {"] + [f"  {line}" for line in loop]
    body += ["}"] + s.lines + [f"store(C[i, j], {out.name})"]
    header = f"kernel gen{seed}({', '.join(params)}) -> (C: f32[M, N]) {{"
    decls = (tiles_line(rng, {"BM": (64, 32, 16, 128), "BN": (64, 32, 16, 128),
                              "BK": (32, 64)}),)
    shapes = {"M": odd(rng, 1, 150), "N": odd(rng, 1, 150), "K": odd(rng, 1, 200)}
    return Program(f"gen{seed}", "quant", header, decls,
                   (("parallel i: BM of M, j: BN of N {", tuple(body), "}"),),
                   tuple(sorted(shapes.items())), seed)
