"""The runtime's errors: CompileErrors (one unlocated diagnostic), so that the CLI shows
them like any other error in the user's input or setup and exits 1."""
from __future__ import annotations

from ..diagnostics import CompileError, Diagnostic


class RuntimeFailure(CompileError):
    """Something outside the .pt program stopped a build or a run."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(Diagnostic(message, hint=hint))
        self.message = message
        self.hint = hint


class BuildError(RuntimeFailure):
    """nvcc is missing or failed, or the build directory cannot be written."""


class NoDevice(RuntimeFailure):
    """No GPU (or no driver) where the kernel was to run; `reason`: why, in the driver's
    words, where a backend's driver said (ptc.targets.<backend>.driver)."""

    def __init__(self, message: str, hint: str | None = None, reason: str | None = None):
        super().__init__(message, hint)
        self.reason = reason


class ArgumentError(RuntimeFailure):
    """A call's arguments do not fit the kernel's signature (found before any launch)."""


class LaunchError(RuntimeFailure):
    """CUDA reported an error while copying, launching or running the kernel."""
