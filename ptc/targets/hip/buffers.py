"""Which of the HIP renderer's staged copies read through a buffer resource, and over what
(ptc.lower.capabilities.Capabilities.buffer_rule)."""
from ptc.sema import typed as T


def buffer_rule(tile) -> str:
    """How a staged copy of `tile` (a GlobalTile) loads through a buffer resource
    (ir.CopyTile.resource): for tiles of several rows read in place (gathered rows are
    addressed per row, in 64 bits); "" for the rest. A one-row tile keeps its guarded
    loads: its chunks are few, and a buffer resource of 4 scalar registers per tensor
    spilled the W4A16 GEMM's scalar registers on gfx942 (its scales and zero points are
    one-row tiles of two more tensors). A tile whose columns are whole (known when
    compiling) gets a buffer of its own that ends with its last row inside the tensor, so
    its rows need no compare (flash attention's K and V, which a compare per chunk pushed
    past 256 VGPRs on gfx942); the others share one buffer over their tensor (a buffer per
    copy and iteration took gfx942's GEMM from 164 to 251 instructions per iteration),
    and so does a tile whose place is read from a tensor (a page of a block table: the end
    computed from the read each iteration spilled the paged decoding kernel's scalar
    registers, 102 before)."""
    if not (tile.rows > 1 and tile.gather is None):
        return ""
    whole = isinstance(tile.col_bound, T.Const) and isinstance(tile.col_start, T.Const) \
        and tile.col_bound.value - tile.col_start.value >= tile.cols * tile.col_step
    return "tile" if whole and not T.reads_memory(tile.origin) else "tensor"
