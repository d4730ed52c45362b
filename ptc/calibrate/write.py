"""Writing a calibrated device YAML: the original text with each fitted figure's value
replaced and its `[EST...]` tag replaced by `[MEASURED <date> <gpu>; was <old>]`, and a
header that says where the figures came from. Every other line is kept as it was."""
from __future__ import annotations

import re

from .figures import Figure

_TAG = re.compile(r"\[EST[^\]]*\]")


def number_text(value: float, is_int: bool) -> str:
    return str(int(round(value))) if is_int else f"{value:.4g}"


def calibrated_yaml(text: str, changes: list[tuple[Figure, float]], *, date: str, gpu: str,
                    header: list[str]) -> str:
    lines = text.splitlines()
    for figure, value in changes:
        line = lines[figure.line]
        code, _, comment = line.partition("#")
        old = number_text(figure.value, figure.is_int)
        new = number_text(value, figure.is_int)
        m = re.match(r"(\s*(?:-\s+)?[A-Za-z_][A-Za-z_0-9]*\s*:\s*)(\S+)(\s*)$", code)
        if not m:
            raise ValueError(f"line {figure.line + 1} of the device file is not "
                             f"`key: value` ({line.strip()})")
        tag = f"[MEASURED {date} {gpu}; was {old}]"
        comment = _TAG.sub(tag, comment, count=1) if _TAG.search(comment) else f" {tag}"
        head = m.group(1) + new
        head = head.ljust(len(code)) if len(head) < len(code) else head + " "
        lines[figure.line] = f"{head}#{comment}"
    return "\n".join([f"# {h}" if h else "#" for h in header] + lines) + "\n"
