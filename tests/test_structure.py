"""The package's structure: no import cycles between ptc's modules, and no module reaching
into another's private names (docs/architecture.md describes the layering)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ptc import targets

PTC = Path(__file__).resolve().parent.parent / "ptc"


def _modules() -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is a package's __init__)."""
    out = {}
    for path in sorted(PTC.rglob("*.py")):
        parts = list(path.relative_to(PTC.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        out[".".join(parts)] = (path, is_package)
    return out


MODULES = _modules()


def _absolute(module: str, is_package: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    base = module.split(".")
    if not is_package:
        base.pop()
    if level > 1:
        base = base[:len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


class _Imports(ast.NodeVisitor):
    """Every import of a ptc module in one file, at any depth (module level, inside
    functions, under `if TYPE_CHECKING`), and every private name it takes from one."""

    def __init__(self, module: str, is_package: bool):
        self.module, self.is_package = module, is_package
        self.targets: set[str] = set()
        self.aliases: dict[str, str] = {}        # local name -> the ptc module it names
        self.private: list[str] = []

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if a.name.split(".")[0] == "ptc" and a.name in MODULES:
                self.targets.add(a.name)
                if a.asname:
                    self.aliases[a.asname] = a.name

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        target = _absolute(self.module, self.is_package, node.level, node.module)
        if target.split(".")[0] != "ptc":
            return
        for a in node.names:
            sub = f"{target}.{a.name}"
            if sub in MODULES:                   # `from . import interp`: a module
                self.targets.add(sub)
                self.aliases[a.asname or a.name] = sub
                if _is_private(a.name):
                    self.private.append(f"line {node.lineno}: from {target} import {a.name}")
            else:
                self.targets.add(target)
                if _is_private(a.name):
                    self.private.append(f"line {node.lineno}: from {target} import {a.name}")

    def attribute_uses(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in self.aliases and _is_private(node.attr)):
                self.private.append(f"line {node.lineno}: {node.value.id}.{node.attr} "
                                    f"({self.aliases[node.value.id]})")


def _scan() -> tuple[dict[str, set[str]], dict[str, list[str]]]:
    graph, private = {}, {}
    for module, (path, is_package) in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        v = _Imports(module, is_package)
        v.visit(tree)
        v.attribute_uses(tree)
        graph[module] = {t for t in v.targets if t != module and t in MODULES}
        private[module] = v.private
    return graph, private


GRAPH, PRIVATE = _scan()


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_scan_sees_the_package():
    assert {"ptc.cli", "ptc.sema.check", "ptc.sched.verify", "ptc.ops"} <= set(GRAPH)
    assert "ptc.cli.common" in GRAPH["ptc.cli.build"]
    assert "ptc.sched.problems" in GRAPH["ptc.sched.verify_order"]
    assert "ptc.interp" in GRAPH["ptc.sched.cost"]        # imported inside a function


def test_the_checker_finds_a_cycle_and_a_private_import():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    v = _Imports("ptc.x", False)
    tree = ast.parse("from .interp import _tiles\nfrom . import interp as I\nI._Machine\n")
    v.visit(tree)
    v.attribute_uses(tree)
    assert v.private == ["line 1: from ptc.interp import _tiles",
                         "line 3: I._Machine (ptc.interp)"]


def test_no_import_cycles():
    cycles = _cycles(GRAPH)
    assert not cycles, "import cycles among: " + "; ".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_names_from_other_modules(module):
    assert not PRIVATE[module], f"{module} uses private names of other modules: " + \
        ", ".join(PRIVATE[module])


def _comment_files():
    root = PTC.parent
    yield from sorted(PTC.rglob("*.py"))
    yield from sorted(p for p in (PTC / "devices").glob("*.yaml"))
    yield from sorted(p for p in (PTC / "templates").rglob("*") if p.is_file())
    yield from sorted(p for p in (PTC / "targets").glob("*/templates/**/*") if p.is_file())
    yield from sorted((root / "docs").glob("*.md"))
    yield root / "README.md"


def test_cited_documents_exist():
    """A comment or doc that names a repository document names one that exists; the
    design notes outside the repository are not cited as `DESIGN §n`."""
    import re
    root = PTC.parent
    missing = []
    for path in _comment_files():
        text = path.read_text(errors="replace")
        for m in re.finditer(r"(?<![\w/])docs/[\w./-]+\.md", text):
            if not (root / m.group(0)).is_file():
                missing.append(f"{path.relative_to(root)}: {m.group(0)}")
        if "DESIGN §" in text:
            missing.append(f"{path.relative_to(root)}: DESIGN §")
    assert not missing, "cited documents that are not in the repository: " + ", ".join(missing)


def _target_branches(text: str) -> list[str]:
    """Comparisons that single out a vendor, a backend or a unit by name: `x.vendor ==`,
    `device.backend != ...`, `unit.name == "tma"` (and "cp_async", "vmem", ...)."""
    tree = ast.parse(text)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        names = {s.attr for s in sides if isinstance(s, ast.Attribute)}
        consts = {s.value for s in sides if isinstance(s, ast.Constant)}
        if names & {"vendor", "backend"} or \
                ("name" in names and consts & {"tma", "cp_async", "vmem", "lds_dma"}):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_branch_finder_sees_what_it_forbids():
    assert _target_branches('if d.vendor == "amd": pass\n'
                            'ok = unit.name != "tma"\n'
                            'fine = layout.swizzle == "tma"\n') == [
        "line 1: d.vendor == 'amd'", "line 2: unit.name != 'tma'"]


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.split(".")[1:2] in
                                          (["sched"], ["lower"], ["explain"])))
def test_passes_do_not_branch_on_a_vendor_or_a_unit_name(module):
    """Differences between targets come from the device description (unit roles, the
    shared-memory space's name, features) and each renderer's capabilities."""
    path, _ = MODULES[module]
    found = _target_branches(path.read_text())
    assert not found, f"{module} branches on a vendor or unit name: " + "; ".join(found)




def test_only_a_backends_own_package_imports_it():
    """ptc reaches a backend through ptc.targets (its registry line), never by importing
    its package: a new backend is one folder (tests/test_toy_backend.py)."""
    found = {}
    for module, imported in GRAPH.items():
        if module.startswith("ptc.targets"):
            continue
        named = {t for t in imported if t.startswith("ptc.targets.")}
        if named:
            found[module] = named
    assert found == {}


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not m.startswith("ptc.targets")))
def test_no_branch_on_a_backend_outside_its_package(module):
    """`device.backend != "cuda"` and the like: a backend's difference is what its package
    declares (capabilities, toolchain, emulation), read through ptc.targets."""
    path, _ = MODULES[module]
    names = [*targets.names(), *(b.vendor for b in targets.backends())]
    found = [f for f in _target_branches(path.read_text())
             if any(repr(name) in f for name in names)]
    assert not found, f"{module} branches on a backend: " + "; ".join(found)


def test_importing_ptc_loads_only_itself():
    """`import ptc` stays light: the runtime (and NumPy through it) loads when
    `ptc.compile` is first used."""
    import subprocess
    import sys
    code = ("import sys, ptc; loaded = sorted(m for m in sys.modules if m.startswith('ptc'));"
            "print(loaded, 'numpy' in sys.modules); f = ptc.compile;"
            "print(f.__module__, 'ptc.runtime' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=PTC.parent, check=True).stdout.splitlines()
    assert out == ["['ptc', 'ptc.version'] False", "ptc.runtime True"]


MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60      # a def's lines, its docstring included


def _oversized(source: str) -> list[str]:
    """The module's size when over MAX_MODULE_LINES, then each function (or method) over
    MAX_FUNCTION_LINES, with its line."""
    found = []
    lines = source.count("\n") + (not source.endswith("\n") and bool(source))
    if lines > MAX_MODULE_LINES:
        found.append(f"{lines} lines")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            size = node.end_lineno - node.lineno + 1
            if size > MAX_FUNCTION_LINES:
                found.append(f"line {node.lineno}: {node.name} is {size} lines")
    return found


def test_the_size_check_sees_a_long_function_and_a_long_module():
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES - 1))
    assert _oversized(f"def short():\n{body}") == []
    assert _oversized(f"def long():\n{body}    x = 0\n") == [
        f"line 1: long is {MAX_FUNCTION_LINES + 1} lines"]
    assert _oversized("x = 0\n" * (MAX_MODULE_LINES + 1)) == [f"{MAX_MODULE_LINES + 1} lines"]


def test_no_module_over_600_lines_and_no_function_over_60():
    """Small modules and functions, so that each reads as one idea."""
    found = [f"{path.relative_to(PTC.parent)}: {what}" for path, _ in MODULES.values()
             for what in _oversized(path.read_text())]
    assert not found, "too long:\n" + "\n".join(found)
