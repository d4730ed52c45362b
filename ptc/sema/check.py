"""The type checker: `ast.Module` -> `typed.Program`, or every independent error at once.

Rules are those of docs/language.md. Each statement is checked on its own: an error in one
is reported and the name it would have bound is poisoned, so later uses stay quiet
instead of cascading.

The checker is one class, KernelChecker, assembled from mixins that each hold one part:
signature.py (parameters and declarations), stmts.py (blocks and statements), exprs.py
(expressions), calls.py (built-in calls), indexing.py (tensor indexing); support.py holds
what they share.
"""
from __future__ import annotations

from collections import Counter

from .. import ast
from ..diagnostics import Collector, Diagnostic, FlagError, Span
from . import typed as T
from .batched import HINT as RANK3_HINT, analyze as analyze_rank3
from .tiles import implicit_tiles
from .calls import CallChecker
from .exprs import ExprChecker
from .indexing import IndexChecker
from .signature import SignatureChecker
from .stmts import Scope, StmtChecker
from .support import Abandon, SourceText, source_text, store_targets, suggest


def check(module: ast.Module, shapes: dict[str, int]) -> T.Program:
    collector = Collector()
    kernels: list[T.TypedKernel] = []
    seen: dict[str, ast.Kernel] = {}
    all_dims: set[str] = set()
    for k in module.kernels:
        if k.name in seen:
            collector.error(f"kernel {k.name!r} is defined twice", k.name_span,
                            hint=f"the first is at line {seen[k.name].span.line}")
            continue
        seen[k.name] = k
        checker = KernelChecker(k, shapes, collector, module.source)
        result = checker.run()
        all_dims |= set(checker.dims)
        if result is not None:
            kernels.append(result)
    if not module.kernels:
        collector.error("the file holds no kernels", Span(1, 1, 1, 1),
                        hint="a kernel starts with `kernel NAME(...) -> (...) { ... }`")
    collector.raise_if_any()
    unknown = [Diagnostic(
        f"--shape gives {name}, which is not a dim of any kernel in {module.filename}",
        hint="dims here: " + (", ".join(sorted(all_dims)) or "none"))
        for name in shapes if module.kernels and name not in all_dims]
    if unknown:
        raise FlagError(unknown)
    return T.Program(module.filename, tuple(kernels))


class KernelChecker(SignatureChecker, StmtChecker, ExprChecker, CallChecker, IndexChecker,
                    SourceText):
    def __init__(self, kernel: ast.Kernel, shapes: dict[str, int], collector: Collector,
                 source: str = ""):
        self.k = kernel
        self.source = source
        self.shapes = shapes
        self.col = collector
        self.kernel_names: dict[str, tuple[str, Span]] = {}  # name -> (kind, span)
        self.dims: dict[str, Span] = {}
        self.dim_defaults: dict[str, int] = {}
        self.static_needed: dict[str, Span] = {}
        self.tensors: dict[str, T.TensorParam] = {}
        self.scalars: dict[str, T.ScalarParam] = {}
        self.tiles: dict[str, tuple[int, ...]] = {}
        self.divides: list[ast.TileDivides] = []   # `tile A divides B`, checked at the end
        self.implicit: dict[str, str] = {}    # undeclared tile sizes -> the dim they tile
        self.indices: dict[str, T.GridAxis] = {}   # the live ones, by the name written
        self.index_names: set[str] = set()          # every index name taken so far
        self.scopes: list[Scope] = []
        self.poisoned: set[str] = set()
        self.expired: dict[str, Span] = {}   # names local to a finished block -> block span
        self.expired_indices: set[str] = set()   # the indices among them
        self.written: set[str] = set()
        self.output_loads: list[tuple[str, Span]] = []   # outputs loaded, where, in order
        self.assignment_counts = _assignment_counts(kernel.body)
        self.assigned_anywhere = set(self.assignment_counts)
        self.index_values: dict[str, T.TExpr] = {}   # variables an index may read
        self.not_index_values: dict[str, T.TExpr] = {}  # other scalars: what computes them
        self.gather_values: dict[str, T.Load] = {}   # i32 tiles loaded once: gathered rows
        self.store_targets = store_targets(kernel.body)
        self.errors_before = len(collector.diagnostics)

    # ---- driver ----------------------------------------------------------------------
    def run(self) -> T.TypedKernel | None:
        inputs = tuple(self._param(p, is_output=False) for p in self.k.params)
        outputs = tuple(self._param(p, is_output=True) for p in self.k.outputs)
        for stmt in self.k.body:
            if isinstance(stmt, ast.DimsDecl):
                self._dims_decl(stmt)
            elif isinstance(stmt, ast.TileDecl):
                self._tile_decl(stmt)
        grids = []
        for stmt in self.k.body:
            if isinstance(stmt, (ast.DimsDecl, ast.TileDecl)):
                continue
            if isinstance(stmt, ast.Parallel):
                grid = self._parallel(stmt)
                if grid is not None:
                    grids.append(grid)
            elif isinstance(stmt, ast.For):
                self.error("a `for` loop must be inside a parallel block", stmt.span,
                           "`for` is a sequential loop within one task; to spread the tiles "
                           "over the GPU write `parallel "
                           f"{source_text(self.source, stmt.axis.span)} {{ ... }}`")
            else:
                if isinstance(stmt, ast.Assign):
                    self.poisoned.add(stmt.name)
                self.error("only `dims`, `tile` and `parallel` may stand at kernel level",
                           stmt.span, "put this statement inside the parallel block")
        has_work = any(isinstance(s, (ast.Parallel, ast.For)) for s in self.k.body)
        if not has_work:
            self.error(f"kernel {self.k.name!r} has no parallel block", self.k.name_span,
                       "the work goes in `parallel i: BM of M { ... }`")
        for out in outputs if has_work else ():
            if out is not None and out.name not in self.written | self.store_targets:
                self.error(f"output {out.name!r} is never written", self._param_span(out.name),
                           f"write it with store({out.name}[...], value)")
        dims = self._dim_infos()
        implicit = {t.name: t for t in implicit_tiles(self.implicit, grids)}
        tiles = {n: implicit.get(n) or T.TileSize(n, c) for n, c in self.tiles.items()}
        divides = self._tile_divides(tiles, dims)
        if len(self.col.diagnostics) > self.errors_before:
            return None
        kernel = T.TypedKernel(self.k.name, inputs, outputs, dims, tuple(tiles.values()),
                               tuple(grids), self.k.span, divides)
        for problem in analyze_rank3(kernel).errors:
            self.error(problem.message, problem.span, RANK3_HINT)
        return None if len(self.col.diagnostics) > self.errors_before else kernel

    def _implicit_tile(self, name: str, span: Span, dim: str = "") -> bool:
        """Take an undeclared name in a tile-size position as a tile size (`tile` lines
        are optional), unless it is taken or looks like a slip for a declared one."""
        if name in self.implicit:
            if dim and not self.implicit[name]:
                self.implicit[name] = dim
            return True
        if name in self.kernel_names or name in self.poisoned:
            return False
        if suggest(name, [n for n in self.tiles if n not in self.implicit]):
            return False
        if not self._declare(name, "tile size", span):
            return False
        self.tiles[name] = ()
        self.implicit[name] = dim
        return True

    def error(self, message: str, span: Span, hint: str | None = None) -> None:
        self.col.error(message, span, hint)

    def fail(self, message: str, span: Span, hint: str | None = None):
        self.error(message, span, hint)
        raise Abandon()


def _assignment_counts(stmts, counts: Counter | None = None) -> Counter:
    """How many assignments (`=`, `+=`, ...) write each name, anywhere in the kernel."""
    counts = Counter() if counts is None else counts
    for s in stmts:
        if isinstance(s, ast.Assign):
            counts[s.name] += 1
        elif isinstance(s, (ast.Parallel, ast.For)):
            _assignment_counts(s.body, counts)
    return counts
