"""The error every C-family renderer raises (ptc.render.RenderError)."""


class RenderError(Exception):
    """The lowered kernel uses something this renderer cannot print (a lowering bug)."""

