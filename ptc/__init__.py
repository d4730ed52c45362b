"""ptc: a compiler for tile-level GPU kernels (PipeThreader-style software pipelining)."""
from .runtime import compile  # noqa: F401  (ptc.compile(path, target=...))
from .version import __version__  # noqa: F401
