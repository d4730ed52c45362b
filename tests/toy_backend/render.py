"""The toy's renderer: CUDA's, with the toy's capabilities and kernel template."""
from ptc.lower import Capabilities
from ptc.sched.plan import Style
from ptc.targets.cuda.render import CudaRenderer

CAPABILITIES = Capabilities(
    backend="toy",
    styles=frozenset({Style.MULTISTAGE, Style.SEQUENTIAL}),
    atoms=frozenset({"mma.sync.m16n8k16"}),
    copy_units=frozenset({"lsu"}),
)


class ToyRenderer(CudaRenderer):
    capabilities = CAPABILITIES
    template = "kernel.toy.j2"     # in templates/, found before the base's


RENDERER = ToyRenderer
