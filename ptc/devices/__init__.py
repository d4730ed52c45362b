"""Device descriptions: one YAML file per target (sm80, sm90, gfx90a, gfx942) -> `Device`.

    from ptc.devices import get_device
    dev = get_device("sm90")            # or get_device("path/to/my_gpu.yaml")
    dev.peak_flops("f16")               # 989.4e12
    dev.units_of("copy")                # (Unit(name='tma', ...), Unit(name='cp_async', ...))

The schema is in `device_schema.py`; what each field means is in `model.py`.
"""
from ptc.devices.loader import DeviceError, builtin_targets, get_device, load_device
from ptc.devices.model import Device, Memory, Resources, Throughput, Unit, UnitKind

__all__ = ["Device", "DeviceError", "Memory", "Resources", "Throughput", "Unit", "UnitKind",
           "builtin_targets", "get_device", "load_device"]
