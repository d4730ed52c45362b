"""Reading a device description: YAML text -> checked data -> `Device`.

Every problem is a `DeviceError` (a `CompileError`) whose messages start with the file name
and the key path, and whose spans point into the YAML file (`.source` holds its text).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from ptc.devices.device_schema import cross_check, device_record
from ptc.devices.model import Device, Memory, Resources, Terms, Throughput, Unit, UnitKind
from ptc.devices.schema import Walk, describe, did_you_mean
from ptc.diagnostics import NOWHERE, CompileError, Diagnostic, Span, caret_lines

BUILTIN_DIR = Path(__file__).resolve().parent


class DeviceError(CompileError):
    """Problems with a device file; spans refer to `filename`, whose text is `source`."""

    def __init__(self, diagnostics: list[Diagnostic] | Diagnostic, filename: str,
                 source: str | None = None):
        super().__init__(diagnostics)
        self.filename = filename
        self.source = source

    def render(self) -> str:
        """`file:line:col: error: key.path: what`, the YAML line with a caret, the hint."""
        out = []
        prefix = f"{self.filename}: "
        for d in self.diagnostics:
            text = d.message[len(prefix):] if d.message.startswith(prefix) else d.message
            where = f"{self.filename}:{d.span}" if d.span.line else self.filename
            out.append(f"{where}: {d.severity}: {text}")
            shown = caret_lines(self.source, d.span) if self.source and d.span.line else None
            if shown:
                out.extend(shown)
            if d.hint:
                out.append(f"hint: {d.hint}")
        return "\n".join(out)


def builtin_targets() -> list[str]:
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.yaml"))


def get_device(target_or_path: str | Path) -> Device:
    """A builtin target by name ("sm90"), or the device described by a user's YAML file."""
    text = str(target_or_path)
    targets = builtin_targets()
    if text in targets:
        return _builtin(text)
    looks_like_path = (isinstance(target_or_path, Path) or "/" in text or "\\" in text
                       or text.endswith((".yaml", ".yml")) or Path(text).exists())
    if looks_like_path:
        return load_device(target_or_path)
    hint = did_you_mean(text, targets)
    listing = (f"builtin targets: {', '.join(targets)}; "
               "or give the path of a device .yaml file")
    raise CompileError(Diagnostic(f"unknown target {text!r}",
                                  hint=f"{hint} {listing}" if hint else listing))


@lru_cache(maxsize=None)
def _builtin(name: str) -> Device:
    return load_device(BUILTIN_DIR / f"{name}.yaml", display=f"{name}.yaml")


def load_device(path: str | Path, display: str | None = None) -> Device:
    """Read and check one device file. `display` is how messages name it (default: `path`)."""
    path = Path(path)
    name = display or str(path)
    try:
        source = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DeviceError(Diagnostic(f"{name}: no such file"), name) from None
    except UnicodeDecodeError as e:
        raise DeviceError(Diagnostic(f"{name}: not UTF-8 text ({e.reason} at byte {e.start})"),
                          name) from None
    except OSError as e:
        raise DeviceError(Diagnostic(f"{name}: cannot read: {e.strerror or e}"), name) from None
    walk = Walk(name)
    data = _parse(source, walk)
    if not isinstance(data, dict):
        raise DeviceError(Diagnostic(f"{name}: expected a mapping of device settings at the "
                                     f"top level, got {describe(data)}", walk.spans[()]),
                          name, source)
    checked = walk.check(device_record(), data)
    cross_check(checked, walk)
    if walk.diagnostics:
        diags = sorted(walk.diagnostics, key=lambda d: (d.span.line, d.span.col))
        raise DeviceError(diags, name, source)
    return _build(checked, path)


def _parse(source: str, walk: Walk) -> Any:
    """The YAML data; fills walk.spans / walk.key_spans; duplicate keys are reported."""
    loader = yaml.SafeLoader(source)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        span = (Span(mark.line + 1, mark.column + 1, mark.line + 1, mark.column + 2)
                if mark else NOWHERE)
        problem = e.problem or e.context or "syntax error"
        raise DeviceError(Diagnostic(f"{walk.filename}: invalid YAML: {problem}", span),
                          walk.filename, source) from None
    except yaml.YAMLError as e:
        raise DeviceError(Diagnostic(f"{walk.filename}: invalid YAML: {e}"),
                          walk.filename, source) from None
    finally:
        loader.dispose()
    if node is None:
        raise DeviceError(Diagnostic(f"{walk.filename}: the file is empty "
                                     "(expected a mapping of device settings)"),
                          walk.filename, source)
    _record_spans(node, (), walk, set())
    return data


def _span(node: yaml.Node) -> Span:
    s, e = node.start_mark, node.end_mark
    return Span(s.line + 1, s.column + 1, e.line + 1, e.column + 1)


def _record_spans(node: yaml.Node, path: tuple, walk: Walk, active: set[int]) -> None:
    walk.spans[path] = _span(node)
    if id(node) in active:  # a recursive alias; the schema walk reports it
        return
    active.add(id(node))
    if isinstance(node, yaml.MappingNode):
        first: dict[str, yaml.Node] = {}
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                continue
            k = key.value
            if k in first:
                walk.error(path, f"duplicate key {k!r} (first at line "
                                 f"{first[k].start_mark.line + 1})", span=_span(key))
                continue
            first[k] = key
            walk.key_spans[path + (k,)] = _span(key)
            _record_spans(value, path + (k,), walk, active)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _record_spans(item, path + (i,), walk, active)
    active.discard(id(node))


def _build(d: dict[str, Any], path: Path) -> Device:
    res = {k: v for k, v in d["eu"]["resources"].items() if v is not None}
    units = tuple(
        Unit(name=u["name"], kind=UnitKind(u["kind"]), is_async=u["async"], count=u["count"],
             throughput=Throughput(tuple(u["throughput"].items())),
             issue_latency_cycles=u["issue_latency_cycles"],
             latency_cycles=u["latency_cycles"], shares=u["shares"],
             in_order=bool(u["in_order"]), role=u["role"])
        for u in d["eu"]["units"])
    return Device(
        name=d["name"], description=d["description"], vendor=d["vendor"],
        backend=d["backend"], arch=d["arch"], clock_ghz=d["clock_ghz"],
        eu_count=d["eu_count"], memory=Memory(**d["memory"]), resources=Resources(**res),
        units=units, features=frozenset(d["features"]), path=path,
        shared_space=d["shared_space"], terms=Terms(**(d["terms"] or {})))


__all__ = ["DeviceError", "builtin_targets", "get_device", "load_device"]
