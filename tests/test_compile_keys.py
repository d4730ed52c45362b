"""What the object cache keys on (ptc.runtime.object_cache), without a compiler: a compile by
its sources' code, not their comment lines; a disassembly (the SASS checks of a warm suite)
by the tool and the file's bytes."""
from __future__ import annotations

import pytest

from ptc.runtime import object_cache
from ptc.runtime.toolchain import Compiler, Step


@pytest.mark.parametrize("change", ["nothing", "bytes", "tool"])
def test_a_disassembly_is_kept_by_the_tool_and_the_files_bytes(change, tmp_path, monkeypatch):
    """object_cache.disassembly (cuobjdump's SASS of a built library): the same bytes in
    another folder are not disassembled again; other bytes, or a reinstalled tool, are."""
    monkeypatch.setenv("PTC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PTC_STAGE_CACHE", raising=False)
    tool = tmp_path / "cuobjdump"
    tool.write_text("#!/bin/sh\n")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "lib.so").write_bytes(b"\x7fELF one")
    (tmp_path / "b" / "lib.so").write_bytes(b"\x7fELF one")
    runs = []

    def dump(folder):
        return lambda: runs.append(folder) or f"SASS of {folder}"
    first = object_cache.disassembly(str(tool), ("--dump-sass",), tmp_path / "a" / "lib.so",
                                     dump("a"))
    if change == "bytes":
        (tmp_path / "b" / "lib.so").write_bytes(b"\x7fELF two")
    if change == "tool":
        tool.write_text("#!/bin/sh\n# a newer release\n")
    second = object_cache.disassembly(str(tool), ("--dump-sass",), tmp_path / "b" / "lib.so",
                                      dump("b"))
    assert first == "SASS of a"
    if change == "nothing":
        assert runs == ["a"] and second == first
    else:
        assert runs == ["a", "b"] and second == "SASS of b"


def test_a_compile_is_keyed_by_its_sources_code_not_their_comment_lines(tmp_path):
    step = Step("kernel.o", ("kernel.cu",), ("nvcc", "-c", "kernel.cu", "-o", "kernel.o"), 0)
    compiler = Compiler(str(tmp_path / "nvcc"), "nvcc", "nvcc")
    keys = {}
    for name, text in {"a": "// estimate: 1.5 us\nint x;\n", "b": "// estimate: 9 us\nint x;\n",
                       "c": "// estimate: 1.5 us\nint y;\n",
                       "d": "\n// estimate: 1.5 us\nint x;\n"}.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "kernel.cu").write_text(text)
        (tmp_path / name / "ptc_types.cuh").write_text("// the same header\n")
        keys[name] = object_cache.step_key(step, compiler, tmp_path / name)
    assert keys["a"] == keys["b"]                  # another estimate: the same code
    assert keys["c"] != keys["a"]                  # other code
    assert keys["d"] != keys["a"]                  # the code on another line
