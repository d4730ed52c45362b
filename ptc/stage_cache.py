"""The driver's stage cache: a stage's result kept on disk under a content key, so that the
same stage of the same input is computed once per machine, whoever asks (the CLI, the
runtime, every test module, several pytest workers).

A key is the sha256 of everything the result depends on, each part made canonical
(`canonical`: dataclasses field by field, sets sorted): the stage's inputs (the typed
kernel, the device description, the options) and ptc itself (`ptc_fingerprint`: the bytes
of every source, grammar and device YAML of the package, so an edit to any of them is a
new key -- the version number alone would not change while ptc is developed). The
templates (device headers, emulation headers, the renderers' jinja files) are left out:
the cached stages (the search, the calibration fit) never read them -- the rendered source
is not cached -- and an edit to a header would otherwise make the next test run search
everything again.

Entries are pickles of plain data written atomically (a temporary file renamed into place),
with their equal immutable parts made one object first (`shared_parts`: a search's plans
repeat the same steps, buffers and issue counts; pickle writes a shared object once),
so concurrent writers of one key only race to write the same bytes. An unreadable entry is
computed again. PTC_STAGE_CACHE=0 turns the cache off; the entries live in
$PTC_CACHE_DIR/stages (else ~/.cache/ptc/stages), beside the runtime's build cache.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import pickle
import re
import struct
import tempfile
from pathlib import Path
from typing import Any, Callable, TypeVar

T = TypeVar("T")
PACKAGE = Path(__file__).resolve().parent
FORMAT = 2     # of the entries: a change makes every old entry a miss


def cache_root() -> Path:
    """Where ptc caches what it computed: $PTC_CACHE_DIR, else ~/.cache/ptc."""
    if os.environ.get("PTC_CACHE_DIR"):
        return Path(os.environ["PTC_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "ptc"


def enabled() -> bool:
    return os.environ.get("PTC_STAGE_CACHE", "1") not in ("0", "off", "no", "false")


# a comment alone on its line (not one continued by a backslash)
_COMMENT_LINE = re.compile(r"(?m)^[ \t]*//[^\n]*(?<!\\)$")


def code_text(source: str) -> str:
    """A C++/CUDA/HIP source as a compile key: its comment-only lines blanked (the line
    count, and so every line number the compiler records, kept). A rendered kernel's
    header comments carry the estimate at the search's dims: the same plan at two shapes
    is the same code, compiled once."""
    return _COMMENT_LINE.sub("", source)


TEMPLATES = "templates"     # folders no cached stage reads (see above): ptc/templates and
                            # each backend's (ptc/targets/<backend>/templates)


@functools.lru_cache(maxsize=1)
def ptc_fingerprint() -> str:
    """The sha256 of ptc's own files (sources, grammar, device YAMLs; not the templates)."""
    h = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc" \
                and TEMPLATES not in path.relative_to(PACKAGE).parts[:-1]:
            h.update(str(path.relative_to(PACKAGE)).encode())
            h.update(b"\0")
            h.update(path.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


def canonical(value: Any) -> Any:
    """`value` as nested tuples of plain values whose repr does not depend on the process
    (sets sorted, dataclasses by class and fields, mappings by sorted key)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__qualname__,) + tuple(
            (f.name, canonical(getattr(value, f.name))) for f in dataclasses.fields(value))
    if isinstance(value, (set, frozenset)):
        return ("set",) + tuple(sorted((canonical(v) for v in value), key=repr))
    if isinstance(value, dict):
        return ("dict",) + tuple(sorted(((repr(k), canonical(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return tuple(canonical(v) for v in value)
    if isinstance(value, Path):
        return str(value)
    if callable(value) and hasattr(value, "__qualname__"):    # a rule a backend declares
        return ("function", value.__module__, value.__qualname__)
    return value


def content_key(stage: str, *parts: Any) -> str:
    h = hashlib.sha256()
    for part in (FORMAT, stage, ptc_fingerprint(), *parts):
        h.update(repr(canonical(part)).encode())
        h.update(b"\1")
    return h.hexdigest()


class StageCache:
    """One folder of entries, and this process's copies of the ones it has seen."""

    def __init__(self) -> None:
        self.memory: dict[str, Any] = {}
        self.hits = self.misses = 0

    def folder(self) -> Path:
        return cache_root() / "stages"

    def where(self, stage: str, key: str) -> Path:
        return self.folder() / stage / key[:2] / f"{key}.pickle"

    def get(self, stage: str, key: str) -> Any:
        """The stored entry of `key` (None: none, or the cache is off). Not kept in memory:
        for an entry its caller extends and stores again (`put`)."""
        return _read(self.where(stage, key)) if enabled() else None

    def put(self, stage: str, key: str, value: Any) -> None:
        """Store `value` under `key` (replacing what is there: concurrent writers of one
        key race, and the last one's entry stays)."""
        if enabled():
            _write(self.where(stage, key), value)

    def get_or_compute(self, stage: str, key: str, compute: Callable[[], T]) -> T:
        """The entry of `key`, else `compute()` (stored; an exception is not)."""
        if not enabled():
            return compute()
        where = self.where(stage, key)
        found = self.memory.get(str(where))
        if found is None:
            found = _read(where)
        if found is not None:
            self.hits += 1
            self.memory[str(where)] = found
            return found
        self.misses += 1
        value = compute()
        self.memory[str(where)] = value
        _write(where, value)
        return value


_VALUES = frozenset({str, int, float, bytes})


@functools.lru_cache(maxsize=None)
def _frozen_dataclass(t: type) -> bool:
    """Are `t`'s instances frozen dataclasses with their attributes in a __dict__?"""
    return dataclasses.is_dataclass(t) and t.__dataclass_params__.frozen \
        and "__dict__" in dir(t) and not hasattr(t, "__slots__")


def shared_parts(value: Any) -> Any:
    """`value` with its equal immutable parts made one object each: numbers, strings, tuples,
    frozensets and frozen dataclasses equal in every field (those that do not take part in
    `==` too) and every attribute. Lists and dicts are copied (each once), never merged;
    anything else (booleans, None, enums, arrays) is kept as it is. A search's record of
    150 plans pickles to 72 KB instead of 534 KB, and reads in 2.4 ms instead of 38."""
    memo: dict = {}
    copies: dict = {}    # id of an object walked -> what it became (one object stays one)
    alive: list = []     # every object whose id is in a key, kept until the walk ends

    def visit(o: Any) -> Any:
        t = type(o)
        if t in _VALUES:     # made one object by value (a float by its bits: -0.0 is not 0.0)
            return memo.setdefault((t, struct.pack("<d", o) if t is float else o), o)
        done = copies.get(id(o))
        if done is not None:
            return done
        alive.append(o)
        if t is list or t is dict:
            copies[id(o)] = out = [] if t is list else {}
            if t is list:
                out.extend(visit(x) for x in o)
            else:
                out.update((visit(k), visit(v)) for k, v in o.items())
            return out
        if t is tuple:
            out = tuple(visit(x) for x in o)
            key: Any = (tuple, tuple(map(id, out)))
        elif t is frozenset:
            out = frozenset(visit(x) for x in o)
            key = (frozenset, frozenset(map(id, out)))
        elif _frozen_dataclass(t):
            state = {k: visit(v) for k, v in o.__dict__.items()}
            out = object.__new__(t)
            out.__dict__.update(state)
            key = (t, *state, *map(id, state.values()))
        else:
            return o
        alive.append(out)
        copies[id(o)] = out = memo.setdefault(key, out)
        return out

    return visit(value)


def _read(path: Path) -> Any:
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except FileNotFoundError:
        return None
    except Exception:       # a truncated or stale entry: computed again and rewritten
        return None


def _write(path: Path, value: Any) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(shared_parts(value), f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError:          # a read-only or full cache costs time, not correctness
        try:
            os.unlink(tmp)
        except (OSError, UnboundLocalError):
            pass


STAGES = StageCache()
