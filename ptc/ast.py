"""The .pt abstract syntax tree: frozen dataclasses that carry source spans.

Produced by `ptc.grammar.parse`; consumed by `ptc.sema`. `ptc.grammar.printer` prints it
back as canonical .pt text (`ptc compile --emit ast`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from .diagnostics import Span


# ---- types ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ScalarType:
    dtype: str
    span: Span


@dataclass(frozen=True)
class DimRef:
    """One dim of a tensor type: a symbolic name (`M`) or a literal size (`4`)."""

    name: str | int
    span: Span


@dataclass(frozen=True)
class TensorType:
    dtype: str
    dims: tuple[DimRef, ...]
    span: Span
    dtype_span: Span


@dataclass(frozen=True)
class Param:
    name: str
    type: Union[ScalarType, TensorType]
    span: Span


# ---- expressions ---------------------------------------------------------------------
@dataclass(frozen=True)
class IntLit:
    value: int
    span: Span


@dataclass(frozen=True)
class FloatLit:
    value: float  # `inf` is FloatLit(inf)
    span: Span


@dataclass(frozen=True)
class Name:
    id: str
    span: Span


@dataclass(frozen=True)
class Keyword:
    name: str
    value: "Expr"
    span: Span


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple["Expr", ...]
    kwargs: tuple[Keyword, ...]
    span: Span
    func_span: Span


@dataclass(frozen=True)
class Binary:
    op: str  # + - * / // % @ < <= > >= == != & |
    lhs: "Expr"
    rhs: "Expr"
    span: Span
    op_span: Span


@dataclass(frozen=True)
class Unary:
    op: str  # - !
    operand: "Expr"
    span: Span


@dataclass(frozen=True)
class Cast:
    operand: "Expr"
    dtype: str
    span: Span
    dtype_span: Span


@dataclass(frozen=True)
class Full:
    """`:` in a subscript: the whole extent of that dim."""

    span: Span


@dataclass(frozen=True)
class NewAxis:
    """`None` in a subscript: a new broadcast axis of extent 1."""

    span: Span


@dataclass(frozen=True)
class Subscript:
    base: "Expr"
    items: tuple[Union["Expr", Full, NewAxis], ...]
    span: Span


@dataclass(frozen=True)
class Attribute:
    base: "Expr"
    name: str
    span: Span


Expr = Union[IntLit, FloatLit, Name, Call, Binary, Unary, Cast, Subscript, Attribute]


# ---- statements ----------------------------------------------------------------------
@dataclass(frozen=True)
class DimDefault:
    name: str
    value: int
    span: Span


@dataclass(frozen=True)
class DimsDecl:
    items: tuple[DimDefault, ...]
    span: Span


@dataclass(frozen=True)
class TileChoice:
    name: str
    choices: tuple[int, ...]
    span: Span


@dataclass(frozen=True)
class TileDivides:
    """`tile BK divides G`: the tile size `tile` must divide `of` (a dim, another tile size
    or a number)."""

    tile: str
    of: str | int
    span: Span


@dataclass(frozen=True)
class TileDecl:
    items: tuple[TileChoice | TileDivides, ...]
    span: Span


@dataclass(frozen=True)
class Axis:
    """`i: BM of M` (tiled: tile is a tile-size name or literal) or `b of B` (tile is None)."""

    var: str
    tile: str | int | None
    dim: str
    span: Span
    var_span: Span
    dim_span: Span
    tile_span: Span | None


@dataclass(frozen=True)
class Parallel:
    axes: tuple[Axis, ...]
    body: tuple["Stmt", ...]
    span: Span


@dataclass(frozen=True)
class For:
    axis: Axis
    until: Expr | None
    body: tuple["Stmt", ...]
    span: Span


@dataclass(frozen=True)
class Assign:
    name: str
    op: str | None  # None for `=`, else + - * / for `+=` ...
    value: Expr
    span: Span
    name_span: Span


@dataclass(frozen=True)
class ExprStmt:
    expr: Expr
    span: Span


Stmt = Union[DimsDecl, TileDecl, Parallel, For, Assign, ExprStmt]


@dataclass(frozen=True)
class Kernel:
    name: str
    params: tuple[Param, ...]
    outputs: tuple[Param, ...]
    body: tuple[Stmt, ...]
    span: Span
    name_span: Span


@dataclass(frozen=True)
class Module:
    kernels: tuple[Kernel, ...]
    filename: str
    source: str
