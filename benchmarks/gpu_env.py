"""The GPU machine's Python environment for benchmarks/gpu.sh, with no network:

    python benchmarks/gpu_env.py check                 # ptc's requirements missing or too old
    python benchmarks/gpu_env.py install --wheels .gpu-wheels --site /tmp/ptc-gpu-site
    python benchmarks/gpu_env.py facts -o OUT/env.json # python, packages, nvcc, GPU, driver

`install` installs, from the wheel folder only (`make gpu-wheels` fills it on a machine
with network), exactly the requirements this Python lacks or has too old, into a folder of
their own that gpu.sh puts on PYTHONPATH together with the working tree (ptc itself is not
installed: the tree is imported as it is). Nothing the image has is replaced.
"""
from __future__ import annotations

import argparse
import json
import platform
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[tuple[str, str]]:
    """(name, minimum version) of ptc's runtime dependencies, from pyproject.toml."""
    text = pyproject.read_text()
    block = re.search(r"^dependencies\s*=\s*\[(.*?)\]", text, re.S | re.M)
    out = []
    for item in re.findall(r'"([^"]+)"', block.group(1) if block else ""):
        m = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)\s*(?:>=\s*([0-9][0-9.]*))?\s*", item)
        if m:
            out.append((m.group(1), m.group(2) or "0"))
    return out


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        m = re.match(r"\d+", piece)
        if not m:
            break
        parts.append(int(m.group()))
    return tuple(parts)


def missing(reqs=None) -> list[tuple[str, str, str]]:
    """(name, minimum, what is installed or "") of the requirements not met here."""
    out = []
    for name, minimum in reqs if reqs is not None else requirements():
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            out.append((name, minimum, ""))
            continue
        if version_tuple(have) < version_tuple(minimum):
            out.append((name, minimum, have))
    return out


def wheel_for(folder: Path, name: str, minimum: str) -> Path | None:
    """The newest wheel of `name` at least `minimum` in `folder` that Python 3.12 on
    x86-64 Linux installs (pure Python, or cp312 / abi3 manylinux)."""
    best = None
    for path in folder.glob("*.whl"):
        parts = path.name[:-4].split("-")
        if len(parts) < 5 or normalized(parts[0]) != normalized(name):
            continue
        version, tags = parts[1], parts[-3:]
        if not fits_cp312_linux(*tags):
            continue
        if version_tuple(version) < version_tuple(minimum):
            continue
        if best is None or version_tuple(version) > version_tuple(best[0]):
            best = (version, path)
    return best[1] if best else None


def fits_cp312_linux(python: str, abi: str, plat: str) -> bool:
    """Whether a wheel's tags (python, abi, platform) install on CPython 3.12, x86-64 Linux."""
    pythons = python.split(".")
    if abi == "abi3":
        ok = any(re.fullmatch(r"cp3(\d+)", p) and int(p[3:]) <= 12 for p in pythons)
    else:
        ok = abi in ("none", "cp312") and any(p in ("py3", "py312", "cp312") for p in pythons)
    linux = any(p.startswith(("manylinux", "linux")) and p.endswith("x86_64")
                for p in plat.split("."))
    return bool(ok) and (plat == "any" or linux)


def install_command(python: str, wheels: list[Path], site: Path) -> list[str]:
    return [python, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
            "--no-compile", "--no-cache-dir", "--upgrade", "--target", str(site),
            *map(str, wheels)]


def cmd_check(args) -> int:
    gaps = missing()
    for name, minimum, have in gaps:
        print(f"{name}>={minimum}: " + (f"{have} is too old" if have else "not installed"))
    if not gaps:
        print("every requirement of ptc is installed")
    return 0


def cmd_install(args) -> int:
    gaps = missing()
    if not gaps:
        print("nothing to install: every requirement of ptc is installed")
        return 0
    folder = Path(args.wheels)
    wheels, absent = [], []
    for name, minimum, _ in gaps:
        wheel = wheel_for(folder, name, minimum) if folder.is_dir() else None
        (wheels.append(wheel) if wheel else absent.append(f"{name}>={minimum}"))
    if absent:
        print(f"gpu_env: no wheel in {folder} for {', '.join(absent)}: run `make gpu-wheels` "
              "on a machine with network and carry the folder", file=sys.stderr)
        return 1
    cmd = install_command(sys.executable, wheels, Path(args.site))
    print("+ " + " ".join(cmd), flush=True)
    if args.dry_run:
        return 0
    Path(args.site).mkdir(parents=True, exist_ok=True)
    return subprocess.run(cmd).returncode


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def facts() -> dict:
    """What the machine has: for the results' header."""
    out = {"python": platform.python_version(), "platform": platform.platform(),
           "packages": {}}
    for name in ("torch", "triton", "numpy", "ml_dtypes", "lark", "click", "jinja2", "rich",
                 "PyYAML", "pytest", "pytest-xdist"):
        try:
            out["packages"][name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out["packages"][name] = None
    nvcc = shutil.which("nvcc")
    lines = _run([nvcc, "--version"]).splitlines() if nvcc else []
    out["nvcc"] = next((line for line in lines if "release" in line), None)
    sanitizer = shutil.which("compute-sanitizer")
    out["compute_sanitizer"] = (_run([sanitizer, "--version"]).splitlines() or [""])[-1] \
        if sanitizer else None
    smi = shutil.which("nvidia-smi")
    if smi:
        fields = "name,driver_version,memory.total,clocks.max.sm,clocks.sm,power.limit"
        row = _run([smi, f"--query-gpu={fields}", "--format=csv,noheader"]).splitlines()
        out["gpu"] = dict(zip(fields.split(","), (x.strip() for x in row[0].split(",")))) \
            if row else None
    else:
        out["gpu"] = None
    return out


def cmd_facts(args) -> int:
    text = json.dumps(facts(), indent=2, sort_keys=True) + "\n"
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="list ptc's requirements this Python lacks")
    p = sub.add_parser("install", help="install what is missing from the wheel folder")
    p.add_argument("--wheels", default=str(ROOT / ".gpu-wheels"))
    p.add_argument("--site", required=True, help="folder to install into (for PYTHONPATH)")
    p.add_argument("--dry-run", action="store_true", help="print the pip command only")
    p = sub.add_parser("facts", help="the machine's Python, packages, toolchain and GPU")
    p.add_argument("-o", "--output")
    args = ap.parse_args(argv)
    return {"check": cmd_check, "install": cmd_install, "facts": cmd_facts}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
