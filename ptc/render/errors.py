"""The errors of the renderers (ptc.render.RenderError) and of the CPU emulator
(ptc.render.emulate.EmulationError)."""


class RenderError(Exception):
    """The lowered kernel uses something this renderer cannot print (a lowering bug)."""



class EmulationError(Exception):
    """The host build failed, or the emulated kernel did something a GPU would not take
    (an access outside shared memory or the tensors, a deadlock at a barrier, ...)."""
