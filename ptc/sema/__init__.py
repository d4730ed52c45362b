"""Names, dtypes, symbolic shapes: `check(module, shapes)` -> typed.Program."""
from .check import check

__all__ = ["check"]
