"""Typed kernel -> sTask-graphs (one per parallel grid).

1. Flatten: a name bound to element-wise work and read once, in an operand of a matrix
   product later in its block, is read as its expression there (`q = ((w >> 4) & 15) as
   f16; acc += a @ (q * s)` is `acc += a @ ((((w >> 4) & 15) as f16) * s)`: the operand is
   computed in its fragment layout, not a tile of its own live beside it); every load and
   every matrix multiply becomes a statement of its own, bound to
   a `%name`; the checker's `x = acc + a @ b` (an MmaAccumulate) stays one mma statement
   (the tensor core accumulates), and every other product becomes an MmaAccumulate with no
   accumulator, so each mma statement's value is an MmaAccumulate of variables.
2. Classify: load -> copy, mma -> mma, store/atomic_add -> copy, the rest -> simt.
3. Fuse: simt statements of one straight-line segment join one simt task when they are
   adjacent or one feeds the other, unless the move would reorder a dependence.
4. Connect: edges by the values tasks define and use; a value used before its definition
   in a loop body comes from the previous iteration (distance 1).
"""
from __future__ import annotations

from dataclasses import replace

from ..sema import typed as T
from ..sema.batched import flatten
from ..sema.typed import rows_extent
from .graph import Edge, Region, STask, STaskGraph, TaskKind, TaskOp


def build_graphs(kernel: T.TypedKernel) -> list[STaskGraph]:
    kernel = flatten(kernel)        # tiles of rank 3 as their rows (ptc.sema.batched)
    return [build_graph(kernel, grid) for grid in kernel.body]


def build_graph(kernel: T.TypedKernel, grid: T.Grid) -> STaskGraph:
    grid = replace(grid, body=without_dead_values(grid.body))
    flat = _Flattener(_assigned_twice(grid.body)).block(grid.body)
    builder = _Builder(kernel)
    root = builder.region("", None, flat, None)
    tasks = tuple(builder.tasks)
    edges = tuple(_connect(root, {t.name: t for t in tasks}))
    return STaskGraph(kernel, grid, tasks, edges, root)


# ---- 0. dead values ---------------------------------------------------------------------
def without_dead_values(body: tuple) -> tuple:
    """`body` without the assignments no store depends on (a tile loaded and never used is
    not a task), and without loops left empty by that."""
    live: set[str] = set()
    lets: list[T.Let] = []
    roots: list = []

    def collect(stmts) -> None:
        for st in stmts:
            if isinstance(st, T.Let):
                lets.append(st)
            elif isinstance(st, T.Store):
                roots.append(st.value)
                roots.extend(i.index for i in st.index if isinstance(i, T.Point))
            elif isinstance(st, T.Loop):
                if st.until is not None:
                    roots.append(st.until)
                collect(st.body)
    collect(body)
    for e in roots:
        live |= _vars_read(e)
    changed = True
    while changed:           # flow-insensitive: a loop-carried value reads itself
        changed = False
        for let in lets:
            if let.name in live:
                new = _vars_read(let.value) - live
                if new:
                    live |= new
                    changed = True

    def prune(stmts) -> tuple:
        out = []
        for st in stmts:
            if isinstance(st, T.Let) and st.name not in live:
                continue
            if isinstance(st, T.Loop):
                inner = prune(st.body)
                if not inner:
                    continue
                st = replace(st, body=inner, carried=tuple(c for c in st.carried if c in live))
            out.append(st)
        return tuple(out)
    return prune(body)


def _vars_read(e: T.TExpr) -> set[str]:
    out: set[str] = set()
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, T.Var):
            out.add(x.name)
        stack.extend(T.children(x))
    return out


# ---- 1. flatten ----------------------------------------------------------------------
def _assigned_twice(body) -> frozenset[str]:
    """Names assigned more than once (loop-carried values, accumulators)."""
    seen: set[str] = set()
    twice: set[str] = set()

    def walk(stmts) -> None:
        for st in stmts:
            if isinstance(st, T.Let):
                (twice if st.name in seen else seen).add(st.name)
            elif isinstance(st, T.Loop):
                walk(st.body)
    walk(body)
    return frozenset(twice)


def _element_wise(e: T.TExpr) -> bool:
    """e computes element by element from names and loads: no product or reduction."""
    if isinstance(e, (T.MatMul, T.MmaAccumulate, T.Reduce)):
        return False
    return all(_element_wise(c) for c in T.children(e))


def _read_whole(name: str, e) -> bool:
    """Every read of `name` in e takes the value at e's own shape: no broadcast (an expand,
    or an operand of lower rank) repeats it, so reading its expression there computes each
    element once."""
    if isinstance(e, T.Var):
        return True
    for c in T.children(e):
        if _reads_of(name, c) and (isinstance(e, T.Expand) or (
                isinstance(e, T.Elementwise) and c.type.shape != e.type.shape)
                or not _read_whole(name, c)):
            return False
    return True


def _reads_of(name: str, e) -> int:
    """How many times e reads the local `name`."""
    if isinstance(e, T.Var):
        return int(e.name == name)
    return sum(_reads_of(name, c) for c in T.children(e))


def _in_operands(name: str, e) -> bool:
    """Every read of `name` in e lies in an operand of a matrix product that reads it
    whole (not in an accumulator, nor anywhere else)."""
    if isinstance(e, T.Var):
        return e.name != name
    if isinstance(e, (T.MatMul, T.MmaAccumulate)):
        operands = (e.lhs, e.rhs) if isinstance(e, T.MatMul) else (e.a, e.b)
        accumulator = () if isinstance(e, T.MatMul) or e.acc is None else (e.acc,)
        return all(_read_whole(name, o) for o in operands) and \
            all(_in_operands(name, a) for a in accumulator)
    return all(_in_operands(name, c) for c in T.children(e))


def _operand_names(stmts, reassigned: frozenset[str]) -> set[str]:
    """`_operand_reads` until nothing more is found: a name read by one that is read as its
    expression (`q` in `h = q * s; acc += a @ h`) is then read in the operand too."""
    chosen: dict[str, T.TExpr] = {}
    while True:
        view = _reading_as_expressions(stmts, chosen)
        new = [s for s in view if isinstance(s, T.Let)
               and s.name in _operand_reads(view, reassigned)]
        if not new:
            return set(chosen)
        chosen.update((s.name, s.value) for s in new)


def _reading_as_expressions(stmts, chosen: dict[str, T.TExpr]) -> list:
    """stmts without the lets of `chosen`, their names read as those expressions."""
    return [replace(s, value=T.substituted(s.value, chosen)) if isinstance(s, (T.Let, T.Store))
            else s for s in stmts if not (isinstance(s, T.Let) and s.name in chosen)]


def _operand_reads(stmts, reassigned: frozenset[str]) -> set[str]:
    """The names of this block bound to element-wise work and read exactly once, whole, in
    an operand of a matrix product of a later statement of the block, with nothing the
    work reads assigned in between (nor any store, where the work loads): reading the
    expression there computes the same values, once, in the operand's own layout. Only
    operands: the operand is computed where the product reads it anyway, while work read
    by other element-wise work can cost registers there (gelu's `u` inlined into its store
    spilled on sm80), and a broadcast row (`w[:, None]`) is computed once per row."""
    out: set[str] = set()
    for i, s in enumerate(stmts):
        if not isinstance(s, T.Let) or s.name in reassigned \
                or not isinstance(s.value, (T.Elementwise, T.Convert)) \
                or not _element_wise(s.value):
            continue
        uses = [(j, t) for j, t in enumerate(stmts[i + 1:], i + 1) if s.name in _all_reads(t)]
        if len(uses) != 1:
            continue
        j, use = uses[0]
        if not isinstance(use, (T.Let, T.Store)) or _reads_of(s.name, use.value) != 1 \
                or s.name in _index_reads(use) or not _in_operands(s.name, use.value):
            continue
        between = stmts[i + 1:j]
        if any(isinstance(t, T.Loop) or (isinstance(t, T.Let) and t.name in _vars_read(s.value))
               or (isinstance(t, T.Store) and T.reads_memory(s.value)) for t in between):
            continue
        out.add(s.name)
    return out


def _index_reads(s) -> set[str]:
    """The locals a store's subscripts read."""
    if not isinstance(s, T.Store):
        return set()
    return set().union(*(reads(i.index) for i in s.index if isinstance(i, T.Point)))


def _all_reads(s) -> set[str]:
    """The locals a statement reads, nested loops' statements included."""
    if isinstance(s, T.Loop):
        return set().union(*(_all_reads(t) for t in s.body)) if s.body else set()
    return reads(s)


class _Flattener:
    def __init__(self, reassigned: frozenset[str] = frozenset()) -> None:
        self.names: set[str] = set()
        self.loaded: set[str] = set()    # names bound to a load: the tile is in shared memory
        self.reassigned = reassigned     # names assigned again later: values in registers
        # names read as another expression where they are used: a transposed load
        # (`v = load(X[..]).T`: each use reads the loaded tile transposed, as `load(X[..]).T`
        # written there does -- a layout, not a task) and a second name for a loaded tile
        # (`a2 = a`, `a2 = a.T`: the same bytes in shared memory, not a copy to registers)
        self.substituted: dict[str, T.TExpr] = {}

    def fresh(self, base: str) -> str:
        name, n = f"%{base}", 1
        while name in self.names:
            n += 1
            name = f"%{base}{n}"
        self.names.add(name)
        return name

    def block(self, stmts) -> list:
        out: list = []
        inlined = _operand_names(stmts, self.reassigned)
        for s in stmts:
            if isinstance(s, (T.Let, T.Store)) and self.substituted:
                s = replace(s, value=self.substitute(s.value))
            if isinstance(s, T.Let) and s.name in inlined:
                self.substituted[s.name] = s.value
            elif isinstance(s, T.Let):
                out.extend(self.let(s))
            elif isinstance(s, T.Store):
                pre: list = []
                value = s.value
                if not isinstance(value, T.Var):
                    value = self.lift(self.lower(value, pre, s.tensor), pre, s.tensor, s.span)
                elif value.name in self.loaded:
                    # a store writes registers to memory: a loaded tile stored as it is
                    # (`x = load(X[i]); store(Y[i], x)`) is read into registers first, as
                    # `store(Y[i], load(X[i]))` is
                    value = self.lift(value, pre, s.tensor, s.span)
                out.extend(pre)
                out.append(replace(s, value=value))
            elif isinstance(s, T.Loop):
                out.append(replace(s, body=tuple(self.block(s.body))))
            else:
                raise AssertionError(s)
        return out

    def let(self, s: T.Let) -> list:
        pre: list = []
        v = s.value
        if isinstance(v, (T.MatMul, T.MmaAccumulate)):
            pre.append(T.Let(s.name, self.mma(v, pre, s.name, s.span), s.span))
            return pre
        if isinstance(v, T.Load) and s.name in self.reassigned:
            # a loaded tile that is assigned again (`acc = load(C0[i, j])`, then `acc += ...`
            # in a loop) starts a value that lives in registers: read it into them
            pre.append(T.Let(s.name, self.lift(v, pre, v.tensor, s.span), s.span))
            return pre
        if isinstance(v, T.Load):
            self.loaded.add(s.name)
            pre.append(s)
            return pre
        if isinstance(v, T.Transpose) and isinstance(v.arg, T.Load) and \
                s.name not in self.reassigned:
            tile = self.lift(v.arg, pre, v.arg.tensor, s.span)
            self.loaded.add(tile.name)
            self.substituted[s.name] = replace(v, arg=tile)
            return pre
        if self.names_loaded_tile(v) and s.name not in self.reassigned:
            self.substituted[s.name] = v
            return pre
        pre.append(T.Let(s.name, self.lower(v, pre, s.name, s.span), s.span))
        return pre

    def substitute(self, e: T.TExpr) -> T.TExpr:
        """e with each name in `substituted` read as what it stands for."""
        return T.substituted(e, self.substituted)

    def names_loaded_tile(self, e: T.TExpr) -> bool:
        """e is a loaded tile's name, or its transpose."""
        if isinstance(e, T.Transpose):
            e = e.arg
        return isinstance(e, T.Var) and e.name in self.loaded

    def lift(self, e: T.TExpr, pre: list, base: str, span) -> T.Var:
        name = self.fresh(base)
        pre.append(T.Let(name, e, span))
        return T.Var(name, e.type)

    def as_var(self, e: T.TExpr, pre: list, base: str, span) -> T.TExpr:
        return e if isinstance(e, T.Var) else self.lift(e, pre, base, span)

    def mma(self, e: T.MatMul | T.MmaAccumulate, pre: list, base: str,
            span) -> T.MmaAccumulate:
        """e as an mma statement's value: the accumulator a variable, the operands variables
        (or transposed variables). Operands are computed first, the accumulator last: a
        rescaled accumulator then lives beside the operands only briefly (attention's P,
        converted to half the registers, dies before O is rescaled)."""
        if isinstance(e, T.MatMul):
            e = T.MmaAccumulate(None, e.lhs, e.rhs, e.type)

        def operand(x: T.TExpr) -> T.TExpr:
            if isinstance(x, T.Transpose):  # a transposed operand is a layout, not work
                return replace(x, arg=operand(x.arg))
            if isinstance(x, T.Load):
                return self.lift(x, pre, x.tensor, span)
            return self.as_var(self.lower(x, pre, base), pre, base, span)
        a, b = operand(e.a), operand(e.b)
        acc = e.acc
        if acc is not None:
            acc = self.as_var(self.lower(acc, pre, base), pre, base, span)
        return replace(e, acc=acc, a=a, b=b)

    def lower(self, e: T.TExpr, pre: list, base: str, span=None) -> T.TExpr:
        """Lift loads and matrix multiplies out of an elementwise expression."""
        if isinstance(e, T.Load):
            return self.lift(e, pre, e.tensor, span)
        if isinstance(e, (T.MatMul, T.MmaAccumulate)):
            return self.lift(self.mma(e, pre, base, span), pre, base + "_mma", span)
        return T.map_children(e, lambda c: self.lower(c, pre, base, span))


# ---- 2 + 3. classify and fuse --------------------------------------------------------
def reads(e) -> set[str]:
    """Local variables an expression or statement reads."""
    if isinstance(e, T.Var):
        return {e.name}
    if isinstance(e, T.Let):
        return reads(e.value)
    if isinstance(e, T.Store):
        return reads(e.value) | set().union(*(reads(i.index) for i in e.index
                                              if isinstance(i, T.Point)))
    out: set[str] = set()
    for child in T.children(e):
        out |= reads(child)
    return out


def writes(s) -> set[str]:
    return {s.name} if isinstance(s, T.Let) else set()


def classify(s) -> TaskOp:
    if isinstance(s, T.Store):
        return TaskOp.ATOMIC_ADD if s.atomic else TaskOp.STORE
    v = s.value
    if isinstance(v, T.Load):
        return TaskOp.LOAD
    if isinstance(v, T.MmaAccumulate):
        return TaskOp.MMA
    return TaskOp.SIMT


_KIND = {TaskOp.LOAD: TaskKind.COPY, TaskOp.STORE: TaskKind.COPY,
         TaskOp.ATOMIC_ADD: TaskKind.COPY, TaskOp.MMA: TaskKind.MMA, TaskOp.SIMT: TaskKind.SIMT}


def _segments(stmts) -> list:
    """Split a block at nested loops: [[stmt...], Loop, [stmt...], ...]."""
    out, cur = [], []
    for s in stmts:
        if isinstance(s, T.Loop):
            out.append(cur)
            out.append(s)
            cur = []
        else:
            cur.append(s)
    out.append(cur)
    return out


def fuse_simt(stmts: list) -> list[list[int]]:
    """Group the statement positions of one segment into tasks (lists in program order)."""
    kinds = [classify(s) for s in stmts]
    groups: list[list[int]] = [[i] for i in range(len(stmts))]
    owner = list(range(len(stmts)))

    def can_join(g: list[int], h: list[int]) -> bool:
        # the joined task runs where its first statement is: moving every other statement
        # of it up there must not cross a dependence (either group may come first: a
        # later group can hold an earlier statement, fused in by a dependence)
        merged = set(g) | set(h)
        first = min(merged)
        for j in merged:
            for x in range(first + 1, j):
                if x in merged:
                    continue
                sx, sj = stmts[x], stmts[j]
                if (reads(sx) & writes(sj) or writes(sx) & (reads(sj) | writes(sj))):
                    return False
        return True

    for i in range(len(stmts)):
        if kinds[i] != TaskOp.SIMT:
            continue
        for j in range(i):
            if kinds[j] != TaskOp.SIMT or owner[j] == owner[i]:
                continue
            adjacent = all(kinds[x] == TaskOp.SIMT for x in range(j + 1, i))
            feeds = writes(stmts[j]) & reads(stmts[i])
            g, h = groups[owner[j]], groups[owner[i]]
            if (adjacent or feeds) and can_join(g, h):
                merged = sorted(g + h)
                old = owner[i]
                for x in h:
                    owner[x] = owner[j]
                groups[owner[j]] = merged
                groups[old] = []
    return sorted((g for g in groups if g), key=lambda g: g[0])


class _Builder:
    def __init__(self, kernel: T.TypedKernel) -> None:
        self.kernel = kernel
        self.tasks: list[STask] = []
        self.used_names: set[str] = set()

    def name(self, base: str) -> str:
        name, n = base, 1
        while name in self.used_names:
            n += 1
            name = f"{base}{n}"
        self.used_names.add(name)
        return name

    def region(self, name: str, loop: T.Loop | None, stmts: list, parent: str | None) -> Region:
        items: list = []
        for seg in _segments(stmts):
            if isinstance(seg, T.Loop):
                items.append(self.region(seg.axis.var, seg, list(seg.body), name))
                continue
            for group in fuse_simt(seg):
                items.append(self.task([seg[i] for i in group], name))
        return Region(name, loop, tuple(items), parent)

    def task(self, stmts: list, region: str) -> str:
        op = classify(stmts[0])
        first = stmts[0]
        tensor = None
        if op in (TaskOp.STORE, TaskOp.ATOMIC_ADD):
            tensor = first.tensor
            shape, dtype = _store_shape(self.kernel, first), self.kernel.tensor(tensor).dtype
            base = f"{op}_{tensor}"
        else:
            shape, dtype = first.value.type.shape, first.value.type.dtype
            if op == TaskOp.LOAD:
                tensor = first.value.tensor
                base = f"load_{tensor}"
            else:
                user = next((s.name for s in stmts if not s.name.startswith("%")), first.name)
                base = f"{op}_{user.lstrip('%').removesuffix('_mma')}"
            last = stmts[-1]
            shape, dtype = last.value.type.shape, last.value.type.dtype
        defined: list[str] = []
        used: list[str] = []
        for s in stmts:
            for r in sorted(reads(s)):
                if r not in defined and r not in used:
                    used.append(r)
            for w in writes(s):
                if w not in defined:
                    defined.append(w)
        t = STask(self.name(base), _KIND[op], op, region, tuple(stmts), tuple(defined),
                  tuple(used), tuple(shape), dtype, tensor)
        self.tasks.append(t)
        return t.name


def _store_shape(kernel: T.TypedKernel, s: T.Store) -> tuple[T.Extent, ...]:
    shape = tuple(i.size if isinstance(i, (T.TileSlice, T.Gather)) else i.extent
                  for i in s.index if not isinstance(i, T.Point))
    # a tile of rank 3 is its rows (ptc.sema.batched)
    return (rows_extent(*shape[:2]), shape[2]) if len(shape) == 3 else shape


# ---- 4. connect ----------------------------------------------------------------------
def _connect(root: Region, tasks: dict[str, STask]) -> list[Edge]:
    edges: list[Edge] = []
    seen: set[tuple] = set()

    def add(src: str, dst: str, value: str, distance: int) -> None:
        key = (src, dst, value, distance)
        if key not in seen:
            seen.add(key)
            edges.append(Edge(src, dst, value, distance))

    def definers(region: Region) -> list[tuple[str, set[str]]]:
        """(task, values it leaves defined) for each item, loops summarised."""
        out = []
        for item in region.items:
            if isinstance(item, Region):
                out.extend(definers(item))
            else:
                out.append((item, set(tasks[item].defines)))
        return out

    def walk(region: Region, outer: list[tuple[str, set[str]]]) -> None:
        order = definers(region)
        position = {name: i for i, (name, _) in enumerate(order)}
        for item in region.items:
            if isinstance(item, Region):
                before = [d for d in order if position[d[0]] < position[_first_task(item)]]
                walk(item, outer + before)
                continue
            t = tasks[item]
            here = position[item]
            for v in t.uses:
                src = next((n for n, vs in reversed(order[:here]) if v in vs), None)
                if src is not None:
                    add(src, item, v, 0)
                    continue
                if region.loop is not None:
                    later = next((n for n, vs in reversed(order[here:]) if v in vs), None)
                    if later is not None:
                        add(later, item, v, 1)
                init = next((n for n, vs in reversed(outer) if v in vs), None)
                if init is not None:
                    add(init, item, v, 0)

    walk(root, [])
    return edges


def _first_task(region: Region) -> str:
    for item in region.items:
        return item if isinstance(item, str) else _first_task(item)
    raise ValueError("empty region")
