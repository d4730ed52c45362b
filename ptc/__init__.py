"""ptc: a compiler for tile-level GPU kernels (PipeThreader-style software pipelining).

`import ptc` loads nothing else: `ptc.compile` (ptc.runtime.compile) is imported on first
use, so the CLI, the stage modules and tools that need only a part pay only for it."""
from .version import __version__  # noqa: F401

__all__ = ["compile", "__version__"]


def __getattr__(name: str):
    if name == "compile":         # ptc.compile(path, target=...): the runtime, on first use
        from .runtime import compile
        return compile
    raise AttributeError(f"module 'ptc' has no attribute {name!r}")
