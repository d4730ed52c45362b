"""Every external executable the suite and the samples run is listed in
tools/executables.yaml, and the README's set-up provides each one: a tool a fresh machine
lacks is found here, not by a user (the clang-offload-bundler that clang-19 only
*recommends* once was)."""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
INVENTORY = yaml.safe_load((ROOT / "tools" / "executables.yaml").read_text())
README = (ROOT / "README.md").read_text()
HIP_SCRIPT = (ROOT / "tools" / "hip_toolchain.sh").read_text()
PYPROJECT = (ROOT / "pyproject.toml").read_text()
PROVIDERS = {"prerequisite", "apt", "pip", "gpu-image", "compiler"}
# how Python code names an executable it starts or looks for
STARTS = [r"shutil\.which\(\s*[\"']([^\"']+)[\"']",
          r"executable_or_skip\(\s*[\"']([^\"']+)[\"']",     # tests/test_hip_build.py's
          r"subprocess\.(?:run|Popen|check_output|check_call)\(\s*\[\s*[\"']([^\"']+)[\"']",
          r"environ\.get\(\s*[\"']CXX[\"']\s*,\s*[\"']([^\"']+)[\"']"]


def names_of(name: str) -> list[str]:
    return [name, *INVENTORY[name].get("also", [])]


def every_name() -> set[str]:
    return {n for name in INVENTORY for n in names_of(name)}


def started_in_code() -> dict[str, str]:
    """executable -> the first file that starts or looks for it."""
    found: dict[str, str] = {}
    for folder in ("ptc", "tests", "benchmarks", "tools"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if any(part.startswith(".") for part in path.relative_to(ROOT).parts):
                continue    # a virtual environment's (benchmarks/.venv-triton), not ours
            text = path.read_text()
            for pattern in STARTS:
                for m in re.finditer(pattern, text):
                    found.setdefault(m.group(1), str(path.relative_to(ROOT)))
    from ptc.targets.hip.toolchain import candidates     # the HIP compilers ptc tries, in order
    for name in candidates():
        found.setdefault(Path(name).name, "ptc/targets/hip/toolchain.py")
    for name in re.findall(r'"(\S+) gfx\d+\w*"', HIP_SCRIPT):    # the probe's compilers
        found.setdefault(name, "tools/hip_toolchain.sh")
    return found


def apt_packages() -> list[str]:
    (line,) = re.findall(r"^PACKAGES=\(([^)]*)\)", HIP_SCRIPT, re.M)
    return line.split()


def dev_extra() -> str:
    return PYPROJECT[PYPROJECT.index("dev = ["):].split("]", 1)[0]


def test_every_executable_the_code_starts_is_listed():
    known = every_name() | {"python3", "python"}       # the interpreter itself
    missing = {name: where for name, where in started_in_code().items()
               if Path(name).name not in known}
    assert not missing, f"add these to tools/executables.yaml: {missing}"


def test_the_scan_sees_the_executables_it_must():
    """The scan above is not vacuous: it finds the compilers ptc runs."""
    found = started_in_code()
    for name in ("nvcc", "g++", "hipcc", "clang++-19", "cuobjdump", "c++filt", "nm"):
        assert name in found, name


@pytest.mark.parametrize("name", sorted(INVENTORY))
def test_the_set_up_provides_it(name):
    entry = INVENTORY[name]
    provider = entry["provided_by"]
    assert provider in PROVIDERS, provider
    assert entry.get("used_by"), f"{name}: say what needs it"
    if provider == "prerequisite":
        readme_name = entry.get("readme", name)
        assert re.search(rf"(?<![\w+-]){re.escape(readme_name)}(?![\w+-])", README), \
            f"the README does not name {readme_name}, a prerequisite"
    elif provider == "apt":
        assert entry["package"] in apt_packages(), \
            f"tools/hip_toolchain.sh does not install {entry['package']} ({name})"
    elif provider == "pip":
        assert f'"{entry["package"]}' in dev_extra(), \
            f"pyproject.toml's dev extra lacks {entry['package']} ({name})"
    elif provider == "compiler":
        assert entry["via"] in INVENTORY, entry["via"]
        if "package" in entry:
            assert entry["package"] in apt_packages(), \
                f"tools/hip_toolchain.sh does not install {entry['package']} ({name})"


def located(name: str) -> str | None:
    """Where this machine has `name` (or one of its other names), as ptc finds it."""
    if name == "cuobjdump":
        from ptc.targets.cuda.toolchain import find_cuobjdump
        try:
            return find_cuobjdump()
        except Exception:   # noqa: BLE001 -- BuildError: none
            return None
    if name == "nvdisasm":      # cuobjdump runs the one beside it (the pip wheel's)
        tool = located("cuobjdump")
        beside = Path(tool).parent / "nvdisasm" if tool else None
        return str(beside) if beside and beside.exists() else shutil.which(name)
    if name == "nvcc":
        from ptc.targets.cuda.toolchain import find_nvcc
        try:
            return find_nvcc()
        except Exception:   # noqa: BLE001
            return None
    return next((p for p in map(shutil.which, names_of(name)) if p), None)


@pytest.mark.parametrize("name", sorted(n for n, e in INVENTORY.items()
                                        if e["provided_by"] != "gpu-image"))
def test_this_machine_has_it(name):
    """After the README's set-up every listed tool is here (CI: must be; elsewhere a missing
    one is a skip that names it and its provider)."""
    if located(name) is None:
        entry = INVENTORY[name]
        how = entry.get("package", entry["provided_by"])
        if os.environ.get("CI"):
            pytest.fail(f"{name} is missing after the set-up ({how})")
        pytest.skip(f"{name} is not installed here ({how})")
