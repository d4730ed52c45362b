"""The producer role of a warp-specialized plan (sm90a; ptc.lower.specialized): per step,
the waits for free slots, then the load, by TMA or by the warpgroup's threads."""
from __future__ import annotations

from dataclasses import replace

from ..sched.plan import LoopBlock, Step
from ..sema import typed as T
from ..sema.dtypes import DTYPE_BYTES
from ..stask.graph import TaskOp
from . import ir
from .capabilities import LoweringError
from .specialized_ops import SpecializedBuilder
from .tiles import (const, dim_expr, divisible_all, extent_value, global_tile, point_index,
                    tile_start, until_bound)


class Producer:
    """The producer role: one thread waits for each slot to be free, then loads it."""

    def __init__(self, build: SpecializedBuilder):
        self.b = build

    def items(self, items, loops: tuple[str, ...]) -> list:
        out: list = []
        for it in items:
            if isinstance(it, LoopBlock):
                region = next(r for r in self.b.graph.loop_regions() if r.name == it.var)
                loop = region.loop
                size = self.b.spec.tiles[loop.axis.size] if isinstance(loop.axis.size, str) \
                    else loop.axis.size
                out.append(ir.Loop(it.var, size, loop.axis.dim,
                                   until_bound(self.b.low.kernel, loop),
                                   tuple(self.items(it.body, loops + (it.var,)))))
            else:
                out.extend(self.step(it, loops))
        return out

    def step(self, step: Step, loops) -> list:
        out: list = []
        for w in step.waits:
            loop, slots = self.b.barrier_loop(w, loops)
            out.append(ir.MbarrierWait(w, loop, slots, free=True))
        if step.is_sync:
            return out
        t = self.b.low.tasks[step.task]
        if t.op != TaskOp.LOAD:
            raise LoweringError(f"the producer runs loads only, not {t.name}")
        self.b.units[t.name] = step.unit
        (full,) = [a for a in step.arrives if a.startswith("full:")] or [None]
        if full is None:
            raise LoweringError(f"{t.name}: nothing waits for the load (no full barrier)")
        if self.b.device.unit(step.unit).is_bulk_tensor_copy:
            return [replace(self.load(t, full, loops), waits=tuple(out))]
        out.append(self.copy(t, full))
        return out

    def copy(self, t, full: str) -> ir.ProducerCopy:
        (s,) = t.stmts
        kernel = self.b.low.kernel
        buf = self.b.buffers[self.b.low.buffer_of[s.name].name]
        home = self.b.values[s.name]
        tile = global_tile(kernel, self.b.spec.tiles, s.value.tensor, s.value.index)
        return ir.ProducerCopy(t.name, buf.name, tile, full, home.loop if buf.slots > 1 else "",
                               self.chunk_vector(tile))

    def chunk_vector(self, tile: ir.GlobalTile) -> int:
        """16-byte chunks (in elements) for a gathered or strided tile whose rows are whole
        chunks where the launch checks the row stride and the tensor (else element
        copies); 1 for every other tile."""
        vec = 16 // DTYPE_BYTES[tile.dtype]
        if tile.gather is None and tile.row_step == 1 or tile.cols % vec:
            return 1
        known, found = divisible_all((tile.row_stride, tile.origin), vec)
        if not known:
            return 1
        conds = [x for x in found if isinstance(x, T.Scalar)]
        self.b.alignment.extend(("dim", c.name, vec) for c in conds)
        self.b.alignment.append(("tensor", tile.tensor, 16))
        return vec

    def load(self, t, full: str, loops) -> ir.TmaLoad:
        (s,) = t.stmts
        kernel = self.b.low.kernel
        buf = self.b.buffers[self.b.low.buffer_of[s.name].name]
        lay = buf.layout
        tensor = kernel.tensor(s.value.tensor)
        tma = self.b.box(t.name)
        dims = [dim_expr(kernel, d) for d in tensor.dims]
        coords = []
        for item in s.value.index:
            if isinstance(item, T.TileSlice):     # an offset tile's may be below 0: TMA
                size = extent_value(kernel, self.b.spec.tiles, item.size)   # zero-fills
                coords.append(tile_start(kernel, item, size))
            elif isinstance(item, T.Point):
                coords.append(point_index(kernel, item))
            else:
                coords.append(const(0))
        name = f"map_{t.name}"
        self.b.maps[name] = ir.TensorMap(name, tensor.name, tensor.dtype,
                                         tuple(reversed(dims)), tma.strides,
                                         tuple(reversed(tma.box)),
                                         lay.span if lay.swizzled else 0)
        # a tensor map needs 16-byte multiples of strides and a 16-byte aligned tensor;
        # where the launch finds otherwise, the element-wise variant copies the tile itself
        esize = DTYPE_BYTES[tensor.dtype]
        self.b.alignment.extend(("dim", c.name, 16 // esize) for c in tma.conditions)
        self.b.alignment.append(("tensor", tensor.name, 16))
        home = self.b.values[s.name]
        loop = home.loop if buf.slots > 1 else ""
        tile = global_tile(kernel, self.b.spec.tiles, s.value.tensor, s.value.index)
        return ir.TmaLoad(t.name, buf.name, name, tuple(reversed(coords)), lay.panels,
                          lay.panel_cols, lay.panel_bytes, lay.bytes, full, loop, tile)
