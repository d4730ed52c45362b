"""ptc: a compiler for tile-level GPU kernels (PipeThreader-style software pipelining)."""
__version__ = "0.1.0"

from .runtime import compile  # noqa: E402,F401  (ptc.compile(path, target=...))
