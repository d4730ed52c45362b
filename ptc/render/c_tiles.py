"""Global-memory tiles printed as C++ statements: the frame of a tile copy into shared
memory (guard, origin, extents, gathered rows) whose copy each backend spells, and the
stores of register tiles to global memory. A mixin of CBodyPrinter (c_body.py)."""
from __future__ import annotations

import contextlib

from ..lower import ir
from ..lower.storage import BatchRows
from ..lower.layout import Layout
from ..sema import typed as T
from .errors import RenderError
from .layouts import SIXTEEN_BIT, c_storage, owner_expr, struct_name


class GlobalTileOps:
    """CopyTile and StoreTile ops, and the bounds of a global tile they share."""

    # ---- copies -----------------------------------------------------------------------------
    def CopyTile(self, op: ir.CopyTile) -> None:
        """The frame of a tile copy: its guard, origin and extents; the backend spells the
        copy itself (sync_copy, async_copy), and an async one falls back to the element-
        wise copy where the launch found the vector copies' alignment missing."""
        tile = op.tile
        origin, rs, cs, rows_left, cols_left = self.tile_bounds(tile, op.loop or None, op.ahead)
        dst = self.slot_address(op.buffer, op.loop, op.ahead)
        guard = None
        if op.guard and op.loop:
            guard = f"i_{op.loop} + {op.ahead} < {self.loop_trips[op.loop]}" if op.ahead \
                else f"0 < {self.loop_trips[op.loop]}"
        self.emit(f"// {op.task}: {tile.tensor}[{tile.rows}x{tile.cols}] -> {op.buffer}"
                  + (f", {op.ahead} iteration(s) ahead" if op.ahead else ""))
        with self.block(f"if ({guard})" if guard else ""):
            hoisted = self.hoisted_copies.get(id(op))
            if hoisted is not None:
                origin, rows_left, cols_left = hoisted
                self.emit(f"const {self.ctypes[tile.dtype]}* g = {origin};")
            else:
                self.emit(f"const {self.ctypes[tile.dtype]}* g = g_{tile.tensor} + ({origin});")
            self.emit(f"const int rows_left = {rows_left}, cols_left = {cols_left};")
            firsts = self.tile_firsts(tile, op.loop or None, op.ahead)
            if firsts:
                self.emit(f"const int rows_first = {firsts[0]}, cols_first = {firsts[1]};")
            if tile.gather is not None:
                self.gather_rows(tile, op.loop or None, op.ahead)
            sync = self.sync_copy(op, dst, rs, cs)
            if not op.asynchronous:
                self.emit(sync)
                return
            fast = self.async_copy(op, dst, rs)
            if op.fallback_vector:
                self.emit(f"if (ALIGNED) {fast}")
                self.emit(f"else {sync}")
            else:
                self.emit(fast)

    def gather_rows(self, tile: ir.GlobalTile, ahead_var: str | None = None,
                    ahead: int = 0) -> None:
        """Declare `rows`, the positions of a gathered tile's rows (GatherRows in the copy
        headers): its index tile's address, stride and length, the index load's pad and
        the gathered dim."""
        if isinstance(tile.gather, BatchRows):
            self.batch_rows(tile.gather, ahead_var, ahead)
            return
        index = tile.gather.tile
        if index.row_low or index.col_low or index.col_step != 1:
            raise RenderError(f"the positions of {tile.tensor}'s gathered rows are an offset "
                              "tile (not supported yet)")
        origin, _, cs, rows_left, cols_left = self.tile_bounds(index, ahead_var, ahead)
        with self.iteration_ahead(ahead_var, ahead):
            bound = self.scalar_expr(tile.gather.bound)
        self.emit(f"const ptc::GatherRows rows{{g_{index.tensor} + ({origin}), (int)({cs}), "
                  f"({rows_left}) > 0 ? {cols_left} : 0, {tile.gather.pad}, "
                  f"(long long)({bound})}};")

    def batch_rows(self, rows: BatchRows, ahead_var: str | None, ahead: int) -> None:
        """Declare `rows`, the positions of a tile of rank 3's rows (BatchRows in the copy
        headers): each axis's first element and end, and the outer axis's stride in rows."""
        with self.iteration_ahead(ahead_var, ahead):
            args = ", ".join(f"(int)({self.scalar_expr(e)})" for e in (
                rows.outer_start, rows.outer_bound, rows.inner_start, rows.inner_bound,
                rows.ratio))
        steps = (f", {rows.outer_step}, {rows.inner_step}"
                 if (rows.outer_step, rows.inner_step) != (1, 1) else "")
        self.emit(f"const ptc::BatchRows<{rows.inner}{steps}> rows{{{args}}};")

    @staticmethod
    def gathered_args(tile: ir.GlobalTile) -> str:
        """A gathered copy's arguments after the thread: its first column."""
        return ", cols_first" if tile.col_low else ", 0"

    @staticmethod
    def first_args(tile: ir.GlobalTile) -> str:
        """The arguments a copy of an offset tile takes after the thread (rows_first and
        cols_first, in scope where CopyTile declared them); none for other tiles."""
        return ", rows_first, cols_first" if tile.row_low or tile.col_low else ""

    def sync_copy(self, op: ir.CopyTile, dst: str, rs: str, cs: str) -> str:
        """The statement of an element-wise copy of `op`'s tile (g, rows_left, cols_left
        are in scope, and rows_first, cols_first for an offset tile)."""
        raise RenderError(f"{type(self).__name__} prints no element-wise copy")

    def async_copy(self, op: ir.CopyTile, dst: str, rs: str) -> str:
        """The statement of `op`'s vector copy."""
        raise RenderError(f"{type(self).__name__} prints no asynchronous copy")

    # ---- copies whose address and extents move by a step each trip ---------------------------
    def hoist_copies(self, loop: ir.Loop) -> None:
        """Before `loop`: each hoisted copy of its body (ptc.lower.hoist_copies), its address
        and extents at trip 0 and their steps; the copy then adds trip x step."""
        from ..lower.affine import standing
        var = loop.var
        for op in loop.body:
            if not (isinstance(op, ir.CopyTile) and op.hoisted):
                continue
            t, name, steps = op.tile, op.task, op.hoisted
            with self.iteration_ahead(var, 0):
                self.index_override[var] = str(op.ahead)      # trip 0 copies for op.ahead
                origin, _, _, *fixed = self.tile_bounds(t, None, 0)
                starts = [self.scalar_expr(e) for e in (t.row_start, t.col_start)]
                bounds = [self.scalar_expr(e) for e in (t.row_bound, t.col_bound)]
            self.emit(f"const {self.ctypes[t.dtype]}* g0_{name} = g_{t.tensor} + ({origin});")
            self.emit(f"const long long gs_{name} = {self.scalar_expr(steps[0])};")
            lefts = []
            for axis, (s, start, bound, n, left) in enumerate(zip(
                    steps[1:], starts, bounds, (t.rows, t.cols), fixed)):
                if standing(s):
                    self.emit(f"const int left{axis}_{name} = {left};")
                    lefts.append(f"left{axis}_{name}")
                    continue
                # the room at trip 0 in 32 bits (both bounds are ints), less each trip's step
                self.emit(f"const int room{axis}_{name} = (int)((long long)({bound}) - "
                          f"(long long)({start}));")
                lefts.append(f"{self.INT_FN['min']}(room{axis}_{name} - i_{var} * "
                             f"(int)({self.scalar_expr(s)}), {n})")
            self.hoisted_copies[id(op)] = (f"g0_{name} + i_{var} * gs_{name}", *lefts)

    # ---- a tile's bounds, as a copy or store of it sees them -----------------------------------
    @contextlib.contextmanager
    def iteration_ahead(self, ahead_var: str | None, ahead: int):
        """Scalar expressions rendered inside read loop `ahead_var`'s index `ahead`
        iterations on (a prefetch's)."""
        saved = dict(self.index_override)
        if ahead_var is not None and ahead:
            self.index_override[ahead_var] = f"(i_{ahead_var} + {ahead})"
        try:
            yield
        finally:
            self.index_override = saved

    def tile_firsts(self, tile: ir.GlobalTile, ahead_var: str | None = None,
                    ahead: int = 0) -> tuple[str, str] | None:
        """(rows, cols) of an offset tile that lie before the tensor, as C expressions
        (None for a tile that never starts before it)."""
        if not (tile.row_low or tile.col_low):
            return None
        with self.iteration_ahead(ahead_var, ahead):
            return tuple(self.first(start, step) if low else "0"
                         for start, low, step in ((tile.row_start, tile.row_low, tile.row_step),
                                                  (tile.col_start, tile.col_low, tile.col_step)))

    def first(self, start: T.TExpr, step: int) -> str:
        """The first of a tile's rows (columns) at or after the tensor's start: those
        before it are ceil(-start / step) where start < 0."""
        before = f"{self.INT_FN['max']}(-(long long)({self.scalar_expr(start)}), 0LL)"
        return f"(int)({before} + {step - 1}) / {step}" if step != 1 else f"(int){before}"

    def tile_bounds(self, tile: ir.GlobalTile, ahead_var: str | None, ahead: int) -> tuple[str, str, str, str, str]:
        """(origin, row stride, col stride, rows left, cols left) as C expressions."""
        with self.iteration_ahead(ahead_var, ahead):
            origin = self.scalar_expr(tile.origin)
            rs = self.scalar_expr(tile.row_stride)
            cs = self.scalar_expr(tile.col_stride)
            rows_left = self.left(tile.row_bound, tile.row_start, tile.rows, tile.row_step)
            cols_left = self.left(tile.col_bound, tile.col_start, tile.cols, tile.col_step)
            if tile.valid is not None:
                rows_left = f"(({self.scalar_expr(tile.valid)}) ? {rows_left} : 0)"
        return origin, rs, cs, rows_left, cols_left

    def left(self, bound: T.TExpr, start: T.TExpr, n: int, step: int = 1) -> str:
        """Rows (or columns) of the tile inside the tensor, at most n (negative: none);
        a strided tile's every step-th: ceil((bound - start) / step), which C's division
        keeps at most 0 where the difference is."""
        if isinstance(bound, T.Const) and isinstance(start, T.Const) and \
                bound.value - start.value >= n * step:
            return str(n)
        gap = f"(long long)({self.scalar_expr(bound)}) - (long long)({self.scalar_expr(start)})"
        if step != 1:
            gap = f"({gap} + {step - 1}) / {step}"
        return f"(int){self.INT_FN['min']}({gap}, {n}LL)"

    # ---- stores --------------------------------------------------------------------------------
    def StoreTile(self, op: ir.StoreTile) -> None:
        home, lay = self.register_tile(op.value)
        s = struct_name(home.layout)
        tile = op.tile
        ctype = self.ctypes[tile.dtype]
        origin, rs, cs, rows_left, cols_left = self.tile_bounds(tile, None, 0)
        _, _, packed = c_storage(home, lay)
        self.emit(f"// {op.task}: {tile.tensor}[{tile.rows}x{tile.cols}] <- {op.value}"
                  + (" (atomic add)" if op.atomic else ""))
        rank = lay.rank
        row = "c0" if rank == 2 else "0"
        col = "c1" if rank == 2 else ("c0" if rank == 1 else "0")
        shape = home.shape
        extra = [f"c{a} < {shape[a]}" for a, m in enumerate(lay.exceeds(shape)) if m]
        with self.block(""):
            self.emit(f"{ctype}* g = g_{tile.tensor} + ({origin});")
            if tile.gather is not None:     # scattered rows: anywhere in the tensor
                self.emit(f"const long long rs = (long long)({rs});")
                self.emit(f"const int cs = (int)({cs});")
                self.gather_rows(tile)
            else:
                self.emit(f"const int rs = (int)({rs}), cs = (int)({cs});  // offsets in the tile: 32-bit")
            self.emit(f"const int rows_left = {rows_left}, cols_left = {cols_left};")
            owner = f"if ({s}::owner(lane, warp))" if "true" not in \
                self.owner_text(lay) else ""
            with self.block(owner):
                variants = [(op.vector, "ALIGNED")] if op.vector > 1 else []
                if op.fallback_vector or op.vector == 1:
                    variants.append((1, None))
                for k, (vec, when) in enumerate(variants):
                    head = ("if (ALIGNED)" if when else ("else" if k else "")) if len(variants) > 1 else ""
                    with self.block(head):
                        with self.block(f"#pragma unroll\n{'  ' * self.depth}for (int r = 0; r < {s}::SIZE; r += {vec})"):
                            self.coords(home.layout)
                            conds = [f"{row} < rows_left", f"{col} < cols_left"] + extra
                            self.emit(f"if (!({' && '.join(conds)})) continue;")
                            at = row
                            if tile.gather is not None:   # its row's position, or none
                                self.emit(f"const int at = rows.at({row});")
                                self.emit("if (at < 0) continue;")
                                at = "at"
                            self.emit_store(op, home, vec, packed, at, col, ctype)

    def owner_text(self, lay: Layout) -> str:
        return owner_expr(lay)

    def emit_store(self, op, home, vec, packed, row, col, ctype) -> None:
        where = f"g + ({row} * rs + {col} * cs)"
        dtype = op.tile.dtype
        if home.dtype in SIXTEEN_BIT:
            t = self.ctypes[home.dtype]
            if vec == 1:
                value = f"ptc::unpack<{t}>({home.name}, r)" if packed \
                    else f"ptc::Half16<{t}>::lo({home.name}[r])"
            elif vec == 2 and packed and dtype == home.dtype:
                self.emit(f"*PTC_GLOBAL(reinterpret_cast<uint32_t*>({where})) = {home.name}[r >> 1];")
                return
            else:
                words = vec // 2
                vt = {1: "uint32_t", 2: "uint2", 4: "uint4"}[words]
                if words == 1:
                    self.emit(f"*PTC_GLOBAL(reinterpret_cast<uint32_t*>({where})) = {home.name}[r >> 1];")
                else:
                    parts = ", ".join(f"{home.name}[(r >> 1) + {w}]" for w in range(words))
                    self.emit(f"*PTC_GLOBAL(reinterpret_cast<{vt}*>({where})) = make_{vt}({parts});")
                return
        else:
            value = f"{home.name}[r]"
        if vec == 1:
            if home.dtype == dtype and dtype in ("i32", "i8", "u8", "f8e4m3", "f8e5m2", "bool"):
                v = value     # as it is: through f32, an i32 past 2^24 would be rounded
            elif ctype != "float":
                v = f"ptc::from_f32<{ctype}>(ptc::f32({value}))"
            else:
                v = f"ptc::f32({value})"
            if op.atomic:
                self.emit(f"atomicAdd({where}, {v});")
            else:
                self.emit(f"*PTC_GLOBAL({where}) = {v};")
            return
        if ctype == "float":
            vt = {2: "float2", 4: "float4"}[vec]
            parts = ", ".join(f"{home.name}[r + {i}]" for i in range(vec))
            self.emit(f"*PTC_GLOBAL(reinterpret_cast<{vt}*>({where})) = make_{vt}({parts});")
            return
        raise RenderError(f"a {vec}-wide store of {home.dtype} registers as {dtype}")
