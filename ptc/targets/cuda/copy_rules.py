"""What CUDA's copy units move (ptc.lower.tma.CopyRules): a TMA box
(cuTensorMapEncodeTiled: tensors of rank 1 to 5, the element types a tensor map names,
16-byte multiples for the innermost extent and the strides, zeros past the edges) and a
cp.async (4, 8 or 16 bytes, zero-filled)."""
from __future__ import annotations

from ptc.lower.tma import CopyRules

from .specialized import TMA_DTYPES

RULES = CopyRules(unit="TMA", dtypes=frozenset(TMA_DTYPES), max_rank=5, chunk_bytes=16,
                  fill=0.0, thread_unit="cp.async", thread_bytes=4)
