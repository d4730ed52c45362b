"""The device-description schema (`ptc/devices/*.yaml`) and the checks across its fields."""
from __future__ import annotations

import re
from typing import Any

from ptc import targets
from ptc.devices.model import COPY_ROLES, SHARED_SPACES, UnitKind
from ptc.devices.schema import (Bool, Choice, Int, ListOf, MapOf, Num, Optional, Pattern,
                                Record, Str, Walk, did_you_mean, valid)
from ptc.sema.dtypes import DTYPES, FUTURE_DTYPES, OPERAND_DTYPES

IDENT = Pattern(r"[a-z_][a-z0-9_]*", "an identifier (lower-case letters, digits and _)")
THROUGHPUT_DTYPES = tuple(d for d in DTYPES + OPERAND_DTYPES + FUTURE_DTYPES if d != "bool")


def _by_vendor() -> dict[str, Any]:
    """The registered backends (ptc.targets) by the vendor their YAMLs name."""
    return {b.vendor: b for b in targets.backends()}


UNIT = Record({
    "name": IDENT,
    "kind": Choice(*(k.value for k in UnitKind)),     # plain names, as messages quote them
    "async": Bool(),
    "in_order": Optional(Bool()),
    "count": Int(min=1),
    "throughput": MapOf(("bytes",) + THROUGHPUT_DTYPES, Num(),
                        "a mapping of dtype to number", "throughput key"),
    "issue_latency_cycles": Int(min=0),
    "latency_cycles": Int(min=0),
    "shares": Optional(IDENT),
    "role": Optional(Choice(*COPY_ROLES)),
})

# a device YAML's fields; device_record() adds the vendor, backend and arch
FIELDS = {
    "name": IDENT,
    "description": Str(),
    # "vendor", "backend" and "arch": from the registered backends (device_record)
    "shared_space": Choice(*SHARED_SPACES),
    # the device's own words (model.Terms): explain's text says "4 waves" on AMD
    "terms": Optional(Record({
        "warp": Str(),
        "block": Str(),
        "eu": Str(),
        "fragment_load": Str(),
        "shared": Str(),
    })),
    "clock_ghz": Num(),
    "eu_count": Int(min=1),
    "memory": Record({
        "dram_bandwidth_gbs": Num(),
        "dram_bytes": Int(min=1),
        "l2_bytes": Int(min=1),
        "l2_bandwidth_gbs": Num(),
        "dram_latency_cycles": Int(min=1),
    }),
    "eu": Record({
        "resources": Record({
            "shared_memory_bytes": Int(min=1),
            "shared_memory_per_eu_bytes": Int(min=1),
            "registers": Int(min=1),
            "max_registers_per_thread": Int(min=1),
            "alu_registers_per_thread": Optional(Int(min=1)),
            "max_threads": Int(min=1),
            "max_threads_per_block": Int(min=1),
            "warp_size": Int(min=1),
            "warpgroup_size": Int(min=1),
            "named_barriers": Int(min=1),
            "max_blocks": Int(min=1),
            "shared_bytes_per_cycle": Int(min=1),
            "exchanges_per_cycle": Num(),
            "schedulers_per_eu": Int(min=1),
            "fragment_load_bytes": Int(min=1),
        }),
        "units": ListOf(UNIT, min_len=1),
    }),
    "features": ListOf(Str()),
}


def device_record() -> Record:
    """The schema of a device YAML, with the vendors, backends and archs ptc.targets
    registers."""
    vendors = _by_vendor()
    return Record({
        "name": FIELDS["name"],
        "description": FIELDS["description"],
        "vendor": Choice(*vendors),
        "backend": Choice(*(b.name for b in vendors.values())),
        "arch": Pattern("|".join(b.arch for b in vendors.values()),
                        "an arch like sm_90a or gfx942"),
        **FIELDS})


def cross_check(d: dict[str, Any], walk: Walk) -> None:
    """Checks that relate several fields; each runs only on fields that passed the schema."""
    vendor = d.get("vendor")
    vendors = _by_vendor()
    if valid(vendor, d.get("backend")) and d["backend"] != vendors[vendor].name:
        walk.error(("backend",), f"{d['backend']!r} does not go with vendor {vendor!r} "
                                 f"(expected {vendors[vendor].name!r})")
    if valid(vendor, d.get("arch")):
        backend = vendors[vendor]
        if not re.fullmatch(backend.arch, d["arch"]):
            walk.error(("arch",), f"{d['arch']!r} is not an {vendor} arch (expected "
                                  f"{backend.arch_example})")
    eu = d.get("eu")
    if isinstance(eu, dict):
        _check_resources(eu.get("resources"), walk)
        _check_units(eu.get("units"), walk)
    if valid(vendor, d.get("features")):
        _check_features(vendor, d["features"], walk)


def _check_resources(r: Any, walk: Walk) -> None:
    if not isinstance(r, dict):
        return
    at = ("eu", "resources")
    pairs = [("shared_memory_bytes", "shared_memory_per_eu_bytes"),
             ("max_threads_per_block", "max_threads")]
    if r.get("alu_registers_per_thread") is not None:
        pairs.append(("alu_registers_per_thread", "max_registers_per_thread"))
    for small, big in pairs:
        if valid(r[small], r[big]) and r[small] > r[big]:
            walk.error(at + (small,), f"{r[small]} is more than {big} ({r[big]})")
    block, warp = r["max_threads_per_block"], r["warp_size"]
    if valid(block, warp) and block % warp:
        walk.error(at + ("max_threads_per_block",),
                   f"{block} is not a multiple of warp_size ({warp})")


def _check_units(units: Any, walk: Walk) -> None:
    if not isinstance(units, list):
        return
    at = ("eu", "units")
    first: dict[str, int] = {}
    for i, u in enumerate(units):
        if not isinstance(u, dict):
            continue
        name = u["name"]
        if valid(name):
            if name in first:
                walk.error(at + (i, "name"), f"duplicate unit name {name!r} "
                                             f"(also eu.units[{first[name]}])")
            else:
                first[name] = i
        if valid(u["kind"]) and isinstance(u["throughput"], dict):
            keys = list(u["throughput"])
            if u["kind"] == UnitKind.COPY and keys != ["bytes"]:
                walk.error(at + (i, "throughput"), "a copy unit's throughput is bytes per "
                           f"clock ({{bytes: N}}), got {', '.join(map(str, keys))}")
            elif u["kind"] != UnitKind.COPY and "bytes" in keys:
                walk.error(at + (i, "throughput"), f"a {u['kind']} unit's throughput is per "
                           "dtype (e.g. {f16: 4096}), not in bytes", at_key="bytes")
        if valid(u["kind"], u["role"]):
            if u["kind"] == UnitKind.COPY and u["role"] is None:
                walk.error(at + (i,), "a copy unit says its role: role: "
                           + " or ".join(COPY_ROLES))
            elif u["kind"] != UnitKind.COPY and u["role"] is not None:
                walk.error(at + (i, "role"), f"only copy units have a role, not a {u['kind']} "
                           "unit")
    for i, u in enumerate(units):
        if isinstance(u, dict) and valid(u["shares"]) and u["shares"] is not None:
            if u["shares"] == u["name"]:
                walk.error(at + (i, "shares"), "a unit cannot share its own pipeline")
            elif u["shares"] not in first:
                walk.error(at + (i, "shares"), f"no unit named {u['shares']!r}",
                           did_you_mean(u["shares"], list(first)))
    if valid(units):
        kinds = {u["kind"] for u in units}
        for kind in (UnitKind.MMA, UnitKind.COPY):
            if kind not in kinds:
                walk.error(at, f"no unit of kind {kind.value!r} (a device needs at least one "
                               "mma unit and one copy unit)")


def _check_features(vendor: str, features: list[str], walk: Walk) -> None:
    by_vendor = {v: b.features for v, b in _by_vendor().items()}
    known = by_vendor[vendor]
    seen: set[str] = set()
    for i, f in enumerate(features):
        if f in seen:
            walk.error(("features", i), f"duplicate feature {f!r}")
        elif f not in known:
            other = next((v for v, names in by_vendor.items() if f in names), None)
            message = (f"{f!r} is an {other} feature, not an {vendor} one" if other
                       else f"unknown {vendor} feature {f!r}")
            walk.error(("features", i), message, None if other else did_you_mean(f, known)
                       or f"known {vendor} features: {', '.join(known)}")
        seen.add(f)
