"""ptc: a compiler for tile-level GPU kernels (PipeThreader-style software pipelining)."""
__version__ = "0.1.0"
