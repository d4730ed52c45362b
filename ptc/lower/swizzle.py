"""Shared-memory tile layouts: rows one after another, 16-byte chunks XOR-swizzled.

A 2-D tile of `rows x cols` elements is stored row-major with rows of `row_bytes`; with
the `xor` swizzle, the 16-byte chunk bits [4, 7) of byte offset o are XORed with the
tile's *line* index mod 8, where a line is 128 bytes when rows are at most 128 bytes long
(o >> 7) and one row when they are longer (o >> 7 divided by the 128-byte lines per row).
Eight 16-byte rows at the same column (what ldmatrix reads, or a warp's 16-byte copies)
then fall in eight different chunk positions, so they hit every bank once. Rows longer
than 128 bytes must be whole 128-byte lines (else no swizzle). A 16-byte chunk stays
contiguous, so 16-byte copies and vector reads of a row's chunk are unaffected. Buffers
are aligned to 1024 bytes so the pattern is the same relative to the buffer and to the
banks.

Bank arithmetic (`bank_conflicts`) follows NVIDIA's rule for shared memory: 32 banks of
4 bytes; a warp's request is split into phases (32 lanes for 4-byte accesses, 16 for
8-byte, 8 for 16-byte; ldmatrix: one 8x8 matrix = 8 rows of 16 bytes per phase); a phase
takes as many wavefronts as the most distinct 4-byte words any one bank is asked for.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..sema.dtypes import DTYPE_BYTES

BANKS = 32
BANK_BYTES = 4
ALIGN = 1024


@dataclass(frozen=True)
class SmemLayout:
    rows: int
    cols: int
    dtype: str
    swizzle: str          # "xor" | "none" | "tma" (panels, as TMA writes them: tma_layout)
    #                       | "k8t" (stored transposed for MFMA operands: transposed_layout)
    span: int = 0         # tma: bytes of a panel's row (the swizzle span; 16 unswizzled)

    @property
    def elem_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def transposed(self) -> bool:
        """Stored as the tile's transpose: column c is stored row c."""
        return self.swizzle == "k8t"

    @property
    def row_bytes(self) -> int:
        """Bytes of a stored row (a column of the tile when transposed)."""
        return (self.rows if self.transposed else self.cols) * self.elem_bytes

    @property
    def bytes(self) -> int:
        return (self.cols if self.transposed else self.rows) * self.row_bytes

    @property
    def name(self) -> str:
        if self.swizzle == "tma":
            return f"tma{self.span}" if self.swizzled else "tma"
        if self.transposed:
            return "transposed_k8"
        return "xor128" if self.swizzle == "xor" else "rows"

    @property
    def swizzled(self) -> bool:
        return self.swizzle in ("xor", "k8t") or (self.swizzle == "tma" and self.span >= 32)

    @property
    def panels(self) -> int:
        """tma: column panels of `span`-byte rows (a TMA box is one panel)."""
        return self.row_bytes // self.span if self.swizzle == "tma" else 1

    @property
    def panel_cols(self) -> int:
        return self.span // self.elem_bytes if self.swizzle == "tma" else self.cols

    @property
    def panel_bytes(self) -> int:
        return self.rows * self.span if self.swizzle == "tma" else self.bytes

    @property
    def lines_per_row(self) -> int:
        """128-byte lines per row (1 for rows of at most 128 bytes)."""
        return max(1, self.row_bytes // 128)

    def offset(self, row: int, col: int) -> int:
        """Byte offset of element (row, col) in the tile."""
        if self.swizzle == "tma":
            b = col * self.elem_bytes
            o = (b // self.span) * self.panel_bytes + row * self.span + b % self.span
            return span_swizzle(o, self.span)
        if self.transposed:
            return k8_offset(col, row * self.elem_bytes, self.row_bytes)
        o = row * self.row_bytes + col * self.elem_bytes
        return swizzle_offset(o, self.lines_per_row) if self.swizzle == "xor" else o


def swizzle_offset(o: int, lines_per_row: int = 1) -> int:
    return o ^ ((((o >> 7) // lines_per_row) & 7) << 4)


def k8_offset(row: int, byte: int, row_bytes: int) -> int:
    """Byte offset of `byte` in stored row `row` of a k8t tile: its 8-byte unit XORs
    (row >> 1) & 7, so the 16 rows an MFMA operand read takes at one unit -- 8 bytes per
    lane -- cover all 32 banks, and a lane's four k stay one 8-byte read."""
    unit = (byte >> 3) ^ ((row >> 1) & 7)
    return row * row_bytes + (unit << 3) + (byte & 7)


def transposed_layout(rows: int, cols: int, dtype: str) -> SmemLayout | None:
    """A rows x cols tile of a 16-bit operand stored transposed (rows become contiguous),
    for an MFMA operand whose k runs along the tile's rows (B[k][n], or A stored [k][m]):
    then a lane's four k are one 8-byte read instead of four 2-byte ones. None when the
    stored rows are not whole groups of eight 8-byte units, or rows do not split into
    the 4-row blocks a copy lands."""
    if DTYPE_BYTES[dtype] != 2 or (rows * 2) % 64 or rows % 4:
        return None
    return SmemLayout(rows, cols, dtype, "k8t")


def span_swizzle(o: int, span: int) -> int:
    """TMA's (and wgmma's) swizzle of a 1024-aligned tile's byte offset: the 16-byte chunk
    bits XOR the 128-byte line bits, 3, 2 or 1 of them for 128-, 64- or 32-byte spans."""
    bits = {128: 7, 64: 3, 32: 1}.get(span, 0)
    return o ^ (((o >> 7) & bits) << 4)


def tma_layout(rows: int, cols: int, dtype: str) -> SmemLayout | None:
    """The layout TMA writes a rows x cols tile in (docs/sm90.md), or None when no TMA box
    fits it: rows of 32 or 64 bytes are one panel swizzled over their span; rows of whole
    128-byte lines are 128-byte panels side by side (one box each); 16-byte rows are not
    swizzled. These are the layouts wgmma reads. Other rows of whole 16-byte chunks, and a
    single row (a 1-D tile), are one unswizzled box of up to 256 elements, stored densely
    (layout "none": for CUDA-core reads only)."""
    row_bytes = cols * DTYPE_BYTES[dtype]
    if rows > 256 or row_bytes % 16:
        return None
    if rows > 1 and (row_bytes in (16, 32, 64) or row_bytes % 128 == 0):
        span = row_bytes if row_bytes <= 64 else 128
        if span // DTYPE_BYTES[dtype] <= 256:
            return SmemLayout(rows, cols, dtype, "tma", span)
    if cols <= 256:
        return SmemLayout(rows, cols, dtype, "none")
    return None


def smem_layout(rows: int, cols: int, dtype: str) -> SmemLayout:
    """The layout ptc gives a tile: swizzled when its rows are whole 16-byte chunks that
    divide a 128-byte line, or whole 128-byte lines."""
    row_bytes = cols * DTYPE_BYTES[dtype]
    fits = (row_bytes % 16 == 0 and 128 % row_bytes == 0) or row_bytes % 128 == 0
    return SmemLayout(rows, cols, dtype, "xor" if fits and rows > 1 else "none")


def wavefronts(addresses: list[int], width: int) -> int:
    """Wavefronts of one phase: lanes' byte addresses, each accessing `width` bytes."""
    words_per_bank: dict[int, set[int]] = {}
    for a in addresses:
        for w in range(a // BANK_BYTES, (a + width - 1) // BANK_BYTES + 1):
            words_per_bank.setdefault(w % BANKS, set()).add(w)
    return max((len(v) for v in words_per_bank.values()), default=0)


def bank_conflicts(addresses: list[int | None], width: int) -> int:
    """Extra wavefronts of one warp-wide access (None: the lane does not take part)."""
    lanes_per_phase = {1: 32, 2: 32, 4: 32, 8: 16, 16: 8}[width]
    total = 0
    for p in range(0, len(addresses), lanes_per_phase):
        phase = [a for a in addresses[p:p + lanes_per_phase] if a is not None]
        if phase:
            total += wavefronts(phase, width) - 1
    return total


def word_conflicts(words: np.ndarray, vector: int) -> int:
    """`bank_conflicts` summed over a warp's accesses, at once: `words` [lanes, accesses]
    is the first 4-byte word each lane accesses, `vector` consecutive words from it."""
    lanes, accesses = words.shape
    per_phase = {1: 32, 2: 32, 4: 32, 8: 16, 16: 8}[BANK_BYTES * vector]
    assert lanes % per_phase == 0, (lanes, per_phase)
    # one row per (access, phase): the words its lanes touch
    touched = (words.T[:, :, None] + np.arange(vector)).reshape(-1, per_phase * vector)
    touched = np.sort(touched, axis=1)
    distinct = np.ones(touched.shape, dtype=bool)
    distinct[:, 1:] = touched[:, 1:] != touched[:, :-1]
    row_bank = np.arange(len(touched))[:, None] * BANKS + touched % BANKS
    per_bank = np.bincount(row_bank[distinct], minlength=len(touched) * BANKS)
    return int((per_bank.reshape(-1, BANKS).max(axis=1) - 1).sum())


@functools.lru_cache(maxsize=1024)    # the search lowers the same conversions many times
def scratch_pad(spill, fill, vector: int, transposed: bool, cols: int, preferred: int) -> int:
    """Words of padding per row of a row-major f32 scratch tile of `cols` columns through
    which registers in layout `spill` pass to layout `fill` (read transposed when
    `transposed`), `vector` values per access: the pad whose accesses -- one warp's, by
    the bank rule above -- take the fewest wavefronts; `preferred` on a tie, then the
    least. Padding moves rows to other banks: what a column read of a row-major tile
    (an MFMA operand's lanes down a column) needs."""
    def cost(pad: int) -> int:
        pitch = cols + pad
        total = 0
        for lay, flip in ((spill, False), (fill, transposed)):
            # warp 0's (row, column) of the first value of each access: [lanes, accesses]
            coords = lay.table[0][:, ::vector, :]
            rows, cs = (coords[..., 1], coords[..., 0]) if flip else \
                (coords[..., 0], coords[..., 1])
            total += word_conflicts(rows * pitch + cs, vector)
        return total
    return min(sorted({preferred, 0, 1, 2, 4, 8}),
               key=lambda pad: (cost(pad), pad != preferred, pad))
